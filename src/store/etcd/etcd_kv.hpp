// EtcdKv: etcd's v3 calls as typed C++ (range, put, delete, txn; lease grant, keepalive, revoke, TTL; watch).
//
// What a caller above store/ asks of etcd: the requests and answers of its KV,
// Lease and Watch services as structs, each call one request to the gateway
// (one round trip) through the EtcdClient, which picks the member and maps the
// server's errors. Paths, JSON, base64 and int64-as-string stay in here.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "store/etcd/etcd_client.hpp"
#include "store/etcd/etcd_watch.hpp"

namespace nxlock::store::etcd {

// etcd's response header: the revision the call was answered at, and the member that answered.
struct Header {
  std::int64_t revision = 0;
  std::int64_t member_id = 0;  // a uint64's bits: only compared
};

// One key as etcd keeps it.
struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t lease = 0;
};

// A range: the key alone, or [key, range_end).
struct RangeRequest {
  enum class Sort { none, create_ascending, create_descending };
  std::string key;
  std::string range_end;                 // empty: the key alone
  std::int64_t limit = 0;                // 0: no limit
  std::int64_t max_create_revision = 0;  // 0: no bound
  Sort sort = Sort::none;
  bool keys_only = false;
  bool count_only = false;

  // Every key that starts with `prefix` (the empty prefix: every key).
  static RangeRequest prefix(std::string_view prefix);
};

struct RangeResult {
  Header header;
  std::vector<KeyValue> kvs;
};

// A put; lease 0 attaches none.
struct PutRequest {
  std::string key;
  std::string value;
  std::int64_t lease = 0;
  bool prev_kv = false;  // ask for the key as it was
};

struct PutResult {
  Header header;
  std::optional<KeyValue> prev;  // with prev_kv, if the key was there
};

// A delete of one key.
struct DeleteRequest {
  std::string key;
};

struct DeleteResult {
  Header header;
  std::int64_t deleted = 0;
};

// One comparison of a txn, on one key.
struct Compare {
  enum class Target { create_revision, lease, value };
  enum class Result { equal, greater, less };
  std::string key;
  Target target = Target::create_revision;
  Result result = Result::equal;
  std::int64_t number = 0;  // create_revision, lease
  std::string value;        // value

  // The key's create revision is `revision` (0: the key is absent).
  static Compare created_at(std::string_view key, std::int64_t revision);
  // The key is attached to `lease`.
  static Compare on_lease(std::string_view key, std::int64_t lease);
  // The key's value is `expected` (false when the key is absent).
  static Compare value_is(std::string_view key, std::string_view expected);
};

using Op = std::variant<RangeRequest, PutRequest, DeleteRequest>;

// A txn: if every comparison holds, the success ops, else the failure ops, atomically.
struct TxnRequest {
  std::vector<Compare> compare;
  std::vector<Op> success;
  std::vector<Op> failure;
};

// The answer of one op of a txn, in the order of the branch that ran.
struct OpResult {
  std::vector<KeyValue> kvs;  // a range's
  std::int64_t deleted = 0;   // a delete's
};

struct TxnResult {
  Header header;  // revision: the txn's own if it wrote
  bool succeeded = false;
  std::vector<OpResult> responses;  // one per op of the branch that ran
};

struct Lease {
  std::int64_t id = 0;
  std::int64_t ttl = 0;  // as granted (etcd may raise the ask to its least)
};

// A lease's time to live, in whole seconds.
struct LeaseTtl {
  std::int64_t left = 0;
  std::int64_t granted = 0;
};

// Every call throws util::Error as EtcdClient::call() does, and internal (70)
// for an answer that is not the shape asked for.
class EtcdKv {
 public:
  explicit EtcdKv(EtcdClient& client) : m_client(client) {}

  RangeResult range(const RangeRequest& request);
  PutResult put(const PutRequest& request);
  DeleteResult remove(const DeleteRequest& request);
  TxnResult txn(const TxnRequest& request);
  // txn(), but nullopt if a put names a lease that is gone (lapsed or revoked).
  std::optional<TxnResult> txn_if_lease_lives(const TxnRequest& request);
  // Sends the txn and does not wait for its answer (EtcdClient::call_later):
  // failures are traced, never thrown.
  void txn_later(const TxnRequest& request);

  // Throws util::Error (unavailable) if etcd grants no lease.
  Lease grant(std::int64_t ttl);
  // One keepalive: the TTL granted again, or 0 if the lease is gone.
  std::int64_t keep_alive(std::int64_t lease);
  // False if the lease was already gone.
  bool revoke(std::int64_t lease);
  // nullopt if the lease is gone.
  std::optional<LeaseTtl> time_to_live(std::int64_t lease);
  // time_to_live() of each lease, in one round trip (pipelined, on one member).
  std::vector<std::optional<LeaseTtl>> time_to_live_each(const std::vector<std::int64_t>& leases);

  // Every event of `key` from `start_revision` on (EtcdWatch).
  std::unique_ptr<EtcdWatch> watch(std::string_view key, std::int64_t start_revision);

  // The cluster's redacted URL, for messages.
  const std::string& name() const { return m_client.name(); }

 private:
  EtcdClient& m_client;
};

// A lease id as etcd's concurrency package writes it in a key: lowercase hex.
std::string lease_hex(std::int64_t lease);

}  // namespace nxlock::store::etcd
