// EtcdWatch: the watch stream's messages, one JSON object a line, turned into news about the key.
#include "store/etcd/etcd_watch.hpp"

#include "store/etcd/etcd_json.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store::etcd {

EtcdWatch::EtcdWatch(EtcdClient& client, std::string_view key, std::int64_t start_revision)
    : m_stream(client.open_stream(
          "/v3/watch", {{"create_request",
                         {{"key", base64_encode(key)},
                          {"start_revision", std::to_string(start_revision)}}}})) {}

int EtcdWatch::fd() const {
  return m_stream->fd();
}

WatchNews EtcdWatch::take() {
  WatchNews news;
  if (m_ended) {
    news.ended = true;
    return news;
  }
  const bool open = m_stream->read_available();
  m_partial += m_stream->reader().take_body();
  std::size_t eol = 0;
  while ((eol = m_partial.find('\n')) != std::string::npos) {
    const nlohmann::json message = nlohmann::json::parse(m_partial.substr(0, eol), nullptr, false);
    m_partial.erase(0, eol + 1);
    if (!message.is_object()) {
      continue;
    }
    if (const auto error = message.find("error"); error != message.end()) {
      m_ended = true;
      news.why = util::escape(error->is_object() ? error->value("message", std::string()) : "");
      continue;
    }
    const auto result = message.find("result");
    if (result == message.end() || !result->is_object()) {
      continue;
    }
    if (const auto header = result->find("header");
        m_member_id == 0 && header != result->end() && header->is_object()) {
      try {
        m_member_id = int_field(*header, "member_id", "watch");
      } catch (const util::Error&) {
        // Not an id: the watch's member stays unknown, which only keeps the watch.
      }
    }
    if (result->value("canceled", false)) {
      m_ended = true;
      news.why = util::escape(result->value("cancel_reason", std::string("the watch was canceled")));
    }
    for (const auto& event : result->value("events", nlohmann::json::array())) {
      news.changed = true;
      if (event.value("type", std::string()) == "DELETE") {
        news.deleted = true;
      }
    }
  }
  if (!open) {
    m_ended = true;
    if (news.why.empty()) {
      news.why = m_stream->reader().failed() ? m_stream->reader().error()
                                              : "the member ended the watch";
    }
  }
  news.ended = m_ended;
  if (m_ended) {
    m_stream->close();
  }
  return news;
}

}  // namespace nxlock::store::etcd
