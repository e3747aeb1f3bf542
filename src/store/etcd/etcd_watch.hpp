// EtcdWatch: one key's watch stream (/v3/watch), read without blocking as its events come.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "store/etcd/etcd_client.hpp"

namespace nxlock::store::etcd {

// What a watch has seen since it was last asked.
struct WatchNews {
  bool deleted = false;  // a DELETE of the key (etcdctl del, a revoked or expired lease)
  bool changed = false;  // any event (a PUT included)
  bool ended = false;    // the stream is over: the member went away or lost its leader
  std::string why;       // ended: the member's reason, if it gave one
};

class EtcdWatch {
 public:
  // Watches `key` from `start_revision` on (every event since it, none missed),
  // with require-leader. Throws util::Error (unavailable) if no member takes it.
  EtcdWatch(EtcdClient& client, std::string_view key, std::int64_t start_revision);

  // Readable when news may have come.
  int fd() const;
  // Reads what has come, without waiting.
  WatchNews take();
  // The id of the member that serves the watch, from the header of its first
  // message read by take(); 0 before one was read.
  std::int64_t member_id() const { return m_member_id; }

 private:
  std::unique_ptr<HttpConnection> m_stream;
  std::string m_partial;  // the stream's bytes after its last complete message
  bool m_ended = false;
  std::int64_t m_member_id = 0;
};

}  // namespace nxlock::store::etcd
