// EtcdKv: each typed request written as the gateway's JSON, and its answer read back into structs.
#include "store/etcd/etcd_kv.hpp"

#include <charconv>

#include "store/etcd/etcd_json.hpp"
#include "util/error.hpp"

namespace nxlock::store::etcd {

namespace {

using nlohmann::json;
using util::Error;
using util::ErrorKind;

// int64 fields go as strings (the gateway's proto3 JSON), as the requests always sent them.
std::string int64_text(std::int64_t n) {
  return std::to_string(n);
}

json range_json(const RangeRequest& r) {
  json out = {{"key", base64_encode(r.key)}};
  if (!r.range_end.empty()) {
    out["range_end"] = base64_encode(r.range_end);
  }
  if (r.limit > 0) {
    out["limit"] = r.limit;
  }
  if (r.max_create_revision > 0) {
    out["max_create_revision"] = int64_text(r.max_create_revision);
  }
  if (r.sort != RangeRequest::Sort::none) {
    out["sort_target"] = "CREATE";
    out["sort_order"] = r.sort == RangeRequest::Sort::create_ascending ? "ASCEND" : "DESCEND";
  }
  if (r.keys_only) {
    out["keys_only"] = true;
  }
  if (r.count_only) {
    out["count_only"] = true;
  }
  return out;
}

json put_json(const PutRequest& p) {
  json out = {{"key", base64_encode(p.key)}, {"value", base64_encode(p.value)}};
  if (p.lease != 0) {
    out["lease"] = int64_text(p.lease);
  }
  if (p.prev_kv) {
    out["prev_kv"] = true;
  }
  return out;
}

json delete_json(const DeleteRequest& d) {
  return {{"key", base64_encode(d.key)}};
}

json compare_json(const Compare& c) {
  json out = {{"key", base64_encode(c.key)}};
  switch (c.result) {
    case Compare::Result::equal:
      out["result"] = "EQUAL";
      break;
    case Compare::Result::greater:
      out["result"] = "GREATER";
      break;
    case Compare::Result::less:
      out["result"] = "LESS";
      break;
  }
  switch (c.target) {
    case Compare::Target::create_revision:
      out["target"] = "CREATE";
      out["create_revision"] = int64_text(c.number);
      break;
    case Compare::Target::lease:
      out["target"] = "LEASE";
      out["lease"] = int64_text(c.number);
      break;
    case Compare::Target::value:
      out["target"] = "VALUE";
      out["value"] = base64_encode(c.value);
      break;
  }
  return out;
}

json ops_json(const std::vector<Op>& ops) {
  json out = json::array();
  for (const Op& op : ops) {
    if (const auto* range = std::get_if<RangeRequest>(&op)) {
      out.push_back({{"request_range", range_json(*range)}});
    } else if (const auto* put = std::get_if<PutRequest>(&op)) {
      out.push_back({{"request_put", put_json(*put)}});
    } else {
      out.push_back({{"request_delete_range", delete_json(std::get<DeleteRequest>(op))}});
    }
  }
  return out;
}

json txn_json(const TxnRequest& t) {
  json out = json::object();
  if (!t.compare.empty()) {
    json compare = json::array();
    for (const Compare& c : t.compare) {
      compare.push_back(compare_json(c));
    }
    out["compare"] = std::move(compare);
  }
  if (!t.success.empty()) {
    out["success"] = ops_json(t.success);
  }
  if (!t.failure.empty()) {
    out["failure"] = ops_json(t.failure);
  }
  return out;
}

json lease_json(std::int64_t lease) {
  return {{"ID", int64_text(lease)}};
}

Header header_of(const json& answer, std::string_view what) {
  const json header = answer.value("header", json::object());
  return {int_field(header, "revision", what), int_field(header, "member_id", what)};
}

KeyValue key_value_of(const json& kv, std::string_view what) {
  KeyValue out;
  out.key = bytes_field(kv, "key", what);
  out.value = bytes_field(kv, "value", what);
  out.create_revision = int_field(kv, "create_revision", what);
  out.mod_revision = int_field(kv, "mod_revision", what);
  out.lease = int_field(kv, "lease", what);
  return out;
}

std::vector<KeyValue> kvs_of(const json& answer, std::string_view what) {
  std::vector<KeyValue> out;
  const auto kvs = answer.find("kvs");
  if (kvs != answer.end() && kvs->is_array()) {
    for (const auto& kv : *kvs) {
      out.push_back(key_value_of(kv, what));
    }
  }
  return out;
}

TxnResult txn_result_of(const json& answer, const TxnRequest& request, std::string_view what) {
  TxnResult out;
  out.header = header_of(answer, what);
  const auto succeeded = answer.find("succeeded");
  out.succeeded = succeeded != answer.end() && succeeded->is_boolean() && succeeded->get<bool>();
  const auto responses = answer.find("responses");
  if (responses != answer.end() && responses->is_array()) {
    for (const auto& response : *responses) {
      OpResult op;
      if (const auto range = response.find("response_range"); range != response.end()) {
        op.kvs = kvs_of(*range, what);
      }
      if (const auto del = response.find("response_delete_range"); del != response.end()) {
        op.deleted = int_field(*del, "deleted", what);
      }
      out.responses.push_back(std::move(op));
    }
  }
  const std::size_t ran = (out.succeeded ? request.success : request.failure).size();
  if (out.responses.size() != ran) {
    throw Error(ErrorKind::internal, std::string(what), "unexpected answer from etcd (txn)");
  }
  return out;
}

}  // namespace

RangeRequest RangeRequest::prefix(std::string_view prefix) {
  RangeRequest out;
  // The empty prefix: every key, from "\0" (etcd refuses an empty key).
  out.key = prefix.empty() ? std::string(1, '\0') : std::string(prefix);
  out.range_end = prefix_end(prefix);
  return out;
}

Compare Compare::created_at(std::string_view key, std::int64_t revision) {
  return {std::string(key), Target::create_revision, Result::equal, revision, {}};
}

Compare Compare::on_lease(std::string_view key, std::int64_t lease) {
  return {std::string(key), Target::lease, Result::equal, lease, {}};
}

Compare Compare::value_is(std::string_view key, std::string_view expected) {
  return {std::string(key), Target::value, Result::equal, 0, std::string(expected)};
}

RangeResult EtcdKv::range(const RangeRequest& request) {
  const json answer = m_client.call("/v3/kv/range", range_json(request));
  return {header_of(answer, name()), kvs_of(answer, name())};
}

PutResult EtcdKv::put(const PutRequest& request) {
  const json answer = m_client.call("/v3/kv/put", put_json(request));
  PutResult out;
  out.header = header_of(answer, name());
  const auto prev = answer.find("prev_kv");
  if (prev != answer.end() && prev->is_object()) {
    out.prev = key_value_of(*prev, name());
  }
  return out;
}

DeleteResult EtcdKv::remove(const DeleteRequest& request) {
  const json answer = m_client.call("/v3/kv/deleterange", delete_json(request));
  return {header_of(answer, name()), int_field(answer, "deleted", name())};
}

TxnResult EtcdKv::txn(const TxnRequest& request) {
  return txn_result_of(m_client.call("/v3/kv/txn", txn_json(request)), request, name());
}

std::optional<TxnResult> EtcdKv::txn_if_lease_lives(const TxnRequest& request) {
  // etcd answers "requested lease not found" (NotFound) for a put on a lease that is gone.
  const auto answer = m_client.call_unless("/v3/kv/txn", txn_json(request), Code::not_found);
  if (!answer) {
    return std::nullopt;
  }
  return txn_result_of(*answer, request, name());
}

void EtcdKv::txn_later(const TxnRequest& request) {
  m_client.call_later("/v3/kv/txn", txn_json(request));
}

Lease EtcdKv::grant(std::int64_t ttl) {
  const json answer = m_client.call("/v3/lease/grant", {{"TTL", ttl}});
  const Lease lease{int_field(answer, "ID", name()), int_field(answer, "TTL", name())};
  if (lease.id == 0) {
    throw Error(ErrorKind::unavailable, name(),
                "no lease granted: " + answer.value("error", std::string("no reason given")));
  }
  return lease;
}

std::int64_t EtcdKv::keep_alive(std::int64_t lease) {
  // A stream's message: the answer is in "result".
  const json answer = m_client.call("/v3/lease/keepalive", lease_json(lease));
  return int_field(answer.value("result", json::object()), "TTL", name());
}

bool EtcdKv::revoke(std::int64_t lease) {
  return m_client.call_unless("/v3/lease/revoke", lease_json(lease), Code::not_found).has_value();
}

namespace {

// A timetolive answer: TTL -1 for a lease that is gone.
std::optional<LeaseTtl> lease_ttl_of(const json& answer, std::string_view what) {
  const std::int64_t left = int_field(answer, "TTL", what);
  if (left < 0) {
    return std::nullopt;
  }
  return LeaseTtl{left, int_field(answer, "grantedTTL", what)};
}

}  // namespace

std::optional<LeaseTtl> EtcdKv::time_to_live(std::int64_t lease) {
  return lease_ttl_of(m_client.call("/v3/lease/timetolive", lease_json(lease)), name());
}

std::vector<std::optional<LeaseTtl>> EtcdKv::time_to_live_each(
    const std::vector<std::int64_t>& leases) {
  std::vector<json> asks;
  asks.reserve(leases.size());
  for (const std::int64_t lease : leases) {
    asks.push_back(lease_json(lease));
  }
  std::vector<std::optional<LeaseTtl>> out;
  out.reserve(leases.size());
  for (const json& answer : m_client.call_pipelined("/v3/lease/timetolive", asks)) {
    out.push_back(lease_ttl_of(answer, name()));
  }
  return out;
}

std::unique_ptr<EtcdWatch> EtcdKv::watch(std::string_view key, std::int64_t start_revision) {
  return std::make_unique<EtcdWatch>(m_client, key, start_revision);
}

std::string lease_hex(std::int64_t lease) {
  char text[17];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, static_cast<std::uint64_t>(lease), 16);
  (void)ec;
  return std::string(text, end);
}

}  // namespace nxlock::store::etcd
