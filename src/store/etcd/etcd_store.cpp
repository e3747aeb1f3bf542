// EtcdStore: each key/value step one call to the gateway: a txn, a range, a put, a deleterange.
#include "store/etcd/etcd_store.hpp"

#include <poll.h>

#include "store/etcd/etcd_json.hpp"
#include "store/etcd/etcd_watch.hpp"
#include "util/error.hpp"
#include "util/poll.hpp"

namespace nxlock::store {

namespace {

using etcd::base64_encode;
using nlohmann::json;
using util::Error;
using util::ErrorKind;

json compare_value(std::string_view key, std::string_view expected) {
  return {{"key", base64_encode(key)},
          {"target", "VALUE"},
          {"result", "EQUAL"},
          {"value", base64_encode(expected)}};
}

json put_op(std::string_view key, std::string_view value) {
  return {{"request_put", {{"key", base64_encode(key)}, {"value", base64_encode(value)}}}};
}

bool succeeded(const json& answer) {
  const auto it = answer.find("succeeded");
  return it != answer.end() && it->is_boolean() && it->get<bool>();
}

[[noreturn]] void refuse_lock_step(std::string_view key) {
  throw Error(ErrorKind::usage, std::string(key),
              "the page's lock steps do not run on etcd (its lock is etcd's own recipe)");
}

// A watch on one key: any event seen on the stream is a change.
class EtcdWatcher final : public Watcher {
 public:
  explicit EtcdWatcher(std::unique_ptr<etcd::EtcdWatch> watch) : m_watch(std::move(watch)) {}

  WaitResult wait(util::Micros timeout, int interrupt_fd) override {
    const util::Micros until = util::mono_now() + timeout;
    for (;;) {
      pollfd fds[2] = {{m_watch->fd(), POLLIN, 0}, {interrupt_fd, POLLIN, 0}};
      if (util::poll_until(fds, interrupt_fd >= 0 ? 2 : 1, until) == 0) {
        return WaitResult::timed_out;
      }
      if (interrupt_fd >= 0 && fds[1].revents != 0) {
        return WaitResult::interrupted;
      }
      const etcd::WatchNews news = m_watch->take();
      if (news.changed || news.ended) {
        return WaitResult::changed;  // spurious ones allowed: the caller looks again
      }
    }
  }

 private:
  std::unique_ptr<etcd::EtcdWatch> m_watch;
};

}  // namespace

etcd::ClientConfig etcd_config(const Url& url, const ConnectOptions& options) {
  etcd::ClientConfig config;
  config.name = url.redacted;
  config.members = url.seeds;
  config.timeout_seconds = options.timeout_seconds;
  if (url.tls) {
    config.tls = net::make_tls_context(options.tls, url.redacted);
  }
  config.user = url.user;
  config.password = options.password ? options.password : url.password;
  return config;
}

EtcdKeyValue key_value_of(const json& kv, std::string_view what) {
  EtcdKeyValue out;
  out.key = etcd::bytes_field(kv, "key", what);
  out.value = etcd::bytes_field(kv, "value", what);
  out.create_revision = etcd::int_field(kv, "create_revision", what);
  out.mod_revision = etcd::int_field(kv, "mod_revision", what);
  out.lease = etcd::int_field(kv, "lease", what);
  return out;
}

EtcdStore::EtcdStore(const Url& url, const ConnectOptions& options)
    : m_client(etcd_config(url, options)) {}

SetIfAbsent EtcdStore::set_if_absent(std::string_view key, std::string_view value,
                                     std::optional<std::string_view> counter,
                                     StepPolicy /*policy*/) {
  const json request = {
      {"compare", json::array({{{"key", base64_encode(key)},
                                {"target", "CREATE"},
                                {"result", "EQUAL"},
                                {"create_revision", "0"}}})},
      {"success", json::array({put_op(key, value)})}};
  const json answer = m_client.call("/v3/kv/txn", request);
  SetIfAbsent out;
  out.set = succeeded(answer);
  if (out.set && counter) {
    // The put's revision is the key's create revision.
    out.fence = etcd::int_field(answer.value("header", json::object()), "revision", key);
  }
  return out;
}

std::optional<std::string> EtcdStore::get(std::string_view key) {
  const json answer = m_client.call("/v3/kv/range", {{"key", base64_encode(key)}});
  const auto kvs = answer.find("kvs");
  if (kvs == answer.end() || !kvs->is_array() || kvs->empty()) {
    return std::nullopt;
  }
  return key_value_of(kvs->front(), key).value;
}

Swap EtcdStore::get_and_set(std::string_view key, std::string_view value,
                            std::optional<Takeover> takeover, StepPolicy /*policy*/) {
  if (takeover) {
    refuse_lock_step(key);
  }
  const json answer = m_client.call(
      "/v3/kv/put", {{"key", base64_encode(key)}, {"value", base64_encode(value)}, {"prev_kv", true}});
  Swap out;
  const auto prev = answer.find("prev_kv");
  if (prev != answer.end() && prev->is_object()) {
    out.old = key_value_of(*prev, key).value;
  }
  return out;
}

void EtcdStore::set(std::string_view key, std::string_view value, StepPolicy /*policy*/) {
  m_client.call("/v3/kv/put", {{"key", base64_encode(key)}, {"value", base64_encode(value)}});
}

std::size_t EtcdStore::del(const std::vector<std::string>& keys) {
  // One txn: the keys go together, as one DEL of several keys does.
  json ops = json::array();
  for (const auto& key : keys) {
    ops.push_back({{"request_delete_range", {{"key", base64_encode(key)}}}});
  }
  const json answer = m_client.call("/v3/kv/txn", {{"success", ops}});
  std::size_t deleted = 0;
  for (const auto& response : answer.value("responses", json::array())) {
    deleted += static_cast<std::size_t>(
        etcd::int_field(response.value("response_delete_range", json::object()), "deleted", "del"));
  }
  return deleted;
}

bool EtcdStore::compare_and_delete(std::string_view key, std::string_view expected,
                                   std::optional<Fence> fence, StepPolicy /*policy*/) {
  if (fence) {
    refuse_lock_step(key);
  }
  const json request = {
      {"compare", json::array({compare_value(key, expected)})},
      {"success", json::array({{{"request_delete_range", {{"key", base64_encode(key)}}}}})}};
  return succeeded(m_client.call("/v3/kv/txn", request));
}

bool EtcdStore::compare_and_set(std::string_view key, std::string_view expected,
                                std::string_view value, std::optional<Fence> fence,
                                StepPolicy /*policy*/) {
  if (fence) {
    refuse_lock_step(key);
  }
  const json request = {{"compare", json::array({compare_value(key, expected)})},
                        {"success", json::array({put_op(key, value)})}};
  return succeeded(m_client.call("/v3/kv/txn", request));
}

util::Micros EtcdStore::now() {
  return util::wall_now();
}

std::unique_ptr<Watcher> EtcdStore::watch(std::string_view key) {
  // From the revision after a read of the key: nothing after this returns is missed.
  const json answer = m_client.call("/v3/kv/range", {{"key", base64_encode(key)}, {"count_only", true}});
  const std::int64_t revision = etcd::int_field(answer.value("header", json::object()), "revision", key);
  return std::make_unique<EtcdWatcher>(std::make_unique<etcd::EtcdWatch>(m_client, key, revision + 1));
}

std::vector<EtcdKeyValue> EtcdStore::range_prefix(std::string_view prefix, std::int64_t* revision) {
  // The empty prefix: every key, from "\0" (etcd refuses an empty key).
  const std::string from = prefix.empty() ? std::string(1, '\0') : std::string(prefix);
  const json answer = m_client.call(
      "/v3/kv/range", {{"key", base64_encode(from)}, {"range_end", base64_encode(etcd::prefix_end(prefix))}});
  if (revision) {
    *revision = etcd::int_field(answer.value("header", json::object()), "revision", prefix);
  }
  std::vector<EtcdKeyValue> out;
  for (const auto& kv : answer.value("kvs", json::array())) {
    out.push_back(key_value_of(kv, prefix));
  }
  return out;
}

}  // namespace nxlock::store
