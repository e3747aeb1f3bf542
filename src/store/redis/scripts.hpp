// The Lua scripts of the lock steps and the waiters' queue, and the channels they wake.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <hiredis/hiredis.h>

#include "store/store.hpp"

namespace nxlock::store::redis {

// Each script's reasons, KEYS and ARGV are with its text in scripts.cpp.

// The unfenced steps: compare, then delete (and wake) or set.
extern const std::string_view k_compare_and_delete_script;
extern const std::string_view k_compare_and_set_script;
// The fenced steps: the owning write and the counter's step in one.
extern const std::string_view k_set_if_absent_fenced_script;
extern const std::string_view k_get_and_set_fenced_script;
extern const std::string_view k_compare_and_set_fenced_script;
extern const std::string_view k_compare_and_delete_fenced_script;
// The waiters' queue (WaitersQueue, store.hpp).
extern const std::string_view k_set_if_absent_queued_script;
extern const std::string_view k_compare_and_delete_queued_script;
extern const std::string_view k_leave_queue_script;
// The shared holders' leases (SharedLeases, store.hpp).
extern const std::string_view k_take_shared_script;
extern const std::string_view k_renew_shared_script;
extern const std::string_view k_record_details_script;
extern const std::string_view k_release_shared_script;
extern const std::string_view k_read_leases_script;
// k_read_leases_script's reply; throws util::Error for another reply (`name`: the server).
LeaseSet lease_set_of(const redisReply& reply, const std::string& name);

// Queue keys of waiters that all died expire this long after the last step.
constexpr std::int64_t k_queue_keep_ms = 60'000;


// The channel that whoever changes `key` PUBLISHes on, and its waiters SUBSCRIBE to.
std::string wake_channel(std::string_view key);
// The channel on which a queued waiter is handed its turn.
std::string turn_channel(std::string_view ticket);

}  // namespace nxlock::store::redis
