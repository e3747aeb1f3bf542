// The Lua scripts of the lock steps and the waiters' queue, and the channels they wake.
#include "store/redis/scripts.hpp"

#include "store/keys.hpp"
#include "store/store.hpp"

namespace nxlock::store::redis {

// Waiters SUBSCRIBE here; whoever changes the key PUBLISHes. Channels are not
// scoped by db, so equal keys in two dbs only cause spurious wake-ups.
constexpr std::string_view k_wake_prefix = "nxlock:wake:";
// A queued waiter also SUBSCRIBEs to a channel of its own, named after its
// ticket, on which a release hands it its turn. Naming the ticket on the key's
// channel instead woke every waiter's process to read it and go back to sleep:
// on two cores the one it named was often the last to run.
#define NXLOCK_TURN_PREFIX "nxlock:turn:"
constexpr std::string_view k_turn_prefix = NXLOCK_TURN_PREFIX;
// WaitersQueue::k_turn_lease in microseconds, as the scripts read it.
#define NXLOCK_TURN_LEASE_US "1000000"
static_assert(WaitersQueue::k_turn_lease == util::Micros(1'000'000), "NXLOCK_TURN_LEASE_US");

// Both scripts must run on the server: done as GET, compare, then DEL/SET from
// here, another client could take over an expired lock between our GET and our
// write, and we would delete or overwrite its fresh lock. A script is atomic.
// The deleting script also wakes the key's waiters: in the same round trip, so a
// released lock's next holder is not kept waiting for a separate PUBLISH. The
// wake-up is best effort (pcall): a user whose ACL forbids PUBLISH still
// releases, and the waiters then find the lock free on their poll tick.
const std::string_view k_compare_and_delete_script =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) "
    "redis.pcall('PUBLISH', ARGV[2], '1') return 1 else return 0 end";
// ARGV[3]: how long the key is kept at least (ms; '0': no expiry is set). SET
// drops an expiry: the key keeps the longer of the one it had and ARGV[3] (a
// counter raised by the quorum keeps its week, a holder record its lock's).
const std::string_view k_compare_and_set_script =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end "
    "local left = redis.call('PTTL', KEYS[1]) "
    "redis.call('SET', KEYS[1], ARGV[2]) "
    "local keep = tonumber(ARGV[3]) "
    "if keep > 0 then if left > keep then keep = left end "
    "redis.call('PEXPIRE', KEYS[1], string.format('%.0f', keep)) end "
    "return 1";

// Each script is one string literal, its shared parts macros joined by the
// compiler: nothing is built at start-up, which every invocation pays.
//
// What every fenced script starts with. Scripts that read TIME and then write
// need effects replication: the default since Redis 5, asked for on older
// servers. `now` is the server's clock in microseconds (exact in a double, below
// 2^53), `now_text` the same as decimal text (a number passed to redis.call is
// formatted as a float, which could lose digits). keep(k, ms) sets an expiry,
// relative to now, unless ms is '0'.
#define NXLOCK_TIME_PRELUDE                                          \
  "if redis.replicate_commands then redis.replicate_commands() end " \
  "local t = redis.call('TIME') "                                    \
  "local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) "           \
  "local now_text = t[1] .. string.sub('00000' .. t[2], -6) "        \
  "local function keep(k, ms) if ms ~= '0' then redis.call('PEXPIRE', k, ms) end end "
// issue(c, ms): the next fencing token from counter c, kept ms after. A token is
// the larger of the counter plus one (INCR: exact integers) and the server's
// clock in microseconds, so tokens go on rising when the counter was evicted,
// flushed, expired or lost in a restart (as long as the clock does not step
// back). Returns the INCR's error (a counter that holds no integer) as is.
#define NXLOCK_ISSUE                                                    \
  "local function issue(c, ms) "                                        \
  "local token = redis.pcall('INCR', c) "                               \
  "if type(token) == 'table' then return token end "                    \
  "if token < now then redis.call('SET', c, now_text) token = now end " \
  "redis.call('PEXPIRE', c, ms) return token end "

// The fenced steps (Store's steps with a guard) are scripts for the same reason,
// and one more: the owning write and the counter's step must be one step, or a
// holder paused between them could be handed a token above its successor's, or
// the counter could move without an owner. Redis runs a script whole, with no
// other client's command in between, and replicates its effects together; on
// a cluster all keys share a hash slot (the caller names the counter so), so
// one node runs it. Only an owning step issues a token: SETNX that set the key,
// or a takeover of an absent or expired lock. A token that cannot be issued
// (the counter holds no integer) undoes the script's own write and returns the
// error, so a failed step leaves nothing behind. Every key written gets its
// expiry in the same script (StepPolicy::lifetime).
//
// KEYS: lock, counter. ARGV: value, lock keep (ms), counter keep (ms).
const std::string_view k_set_if_absent_fenced_script = NXLOCK_TIME_PRELUDE NXLOCK_ISSUE
    "if redis.call('SETNX', KEYS[1], ARGV[1]) == 0 then return false end "
    "local token = issue(KEYS[2], ARGV[3]) "
    "if type(token) == 'table' then redis.call('DEL', KEYS[1]) return token end "
    "keep(KEYS[1], ARGV[2]) return token";
// KEYS: lock, counter. ARGV: value, now (Unix seconds; '' for the server's
// own clock), lock keep, counter keep. The page's GETSET, but compare first:
// a lock that is not expired is left untouched (GETSET would write and the
// loser give the value back, a moment in which the holder's renewal finds
// another value and calls its lock taken over). To every other client it is
// still one GETSET: atomic, returning the old value. The expiry test must be
// the lock layer's (store/lock_value.hpp): 1 to 18 decimal digits, older than
// now. tonumber() is a double, exact below 2^53; above it the value is far
// beyond any `now`.
const std::string_view k_get_and_set_fenced_script = NXLOCK_TIME_PRELUDE NXLOCK_ISSUE
    "local limit = tonumber(t[1]) "
    "if ARGV[2] ~= '' then limit = tonumber(ARGV[2]) end "
    "local old = redis.call('GET', KEYS[1]) "
    "if old and not (#old <= 18 and string.match(old, '^%d+$') and "
    "tonumber(old) < limit) then return {old, false} end "
    "local token = issue(KEYS[2], ARGV[4]) "
    "if type(token) == 'table' then return token end "
    "redis.call('SET', KEYS[1], ARGV[1]) keep(KEYS[1], ARGV[3]) "
    "return {old, token}";
// As the unfenced ones, and the counter must still hold the holder's token: a
// lock deleted (unlock --force) and taken again with the same timestamp has a
// higher token, and is not ours. An absent counter (evicted, deleted) counts as
// ours: every acquisition writes it, so none came since it went; it is written
// back with our token. Either way it is kept a week more.
// KEYS: lock, counter. ARGV: expected, value, token, lock keep, counter keep.
const std::string_view k_compare_and_set_fenced_script =
    "local function keep(k, ms) if ms ~= '0' then redis.call('PEXPIRE', k, ms) end end "
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end "
    "local c = redis.call('GET', KEYS[2]) "
    "if c and c ~= ARGV[3] then return 0 end "
    "redis.call('SET', KEYS[1], ARGV[2]) keep(KEYS[1], ARGV[4]) "
    "if not c then redis.call('SET', KEYS[2], ARGV[3]) end "
    "redis.call('PEXPIRE', KEYS[2], ARGV[5]) return 1";
// KEYS: lock, counter. ARGV: expected, token, channel, counter keep. The
// delete, without its wake-up: the queued release wakes differently.
#define NXLOCK_FENCED_DELETE                                    \
  "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end " \
  "local c = redis.call('GET', KEYS[2]) "                       \
  "if c and c ~= ARGV[2] then return 0 end "                    \
  "redis.call('DEL', KEYS[1]) "                                 \
  "if not c then redis.call('SET', KEYS[2], ARGV[2]) end "      \
  "redis.call('PEXPIRE', KEYS[2], ARGV[4]) "
const std::string_view k_compare_and_delete_fenced_script =
    NXLOCK_FENCED_DELETE "redis.pcall('PUBLISH', ARGV[3], '1') return 1";

// The waiters' queue (WaitersQueue, store.hpp): two sorted sets in the lock
// key's slot, QUEUE (tickets scored by arrival, server microseconds) and
// QUEUE's lease companion (the same tickets scored by the instant their lease
// lapses). A release PUBLISHes the first live ticket on that waiter's own turn
// channel (turn()), which only it receives, and cuts its lease to the turn's
// (a waiter far back renews seldom, with a long lease: WaitersQueue). The
// server's own TIME decides leases, so the waiters' clocks need not agree.
// `head()` drops the lapsed entries it meets at the front: a waiter killed
// while queued holds the others up for one turn's lease at most, once first.
#define NXLOCK_QUEUE_PRELUDE                                                     \
  NXLOCK_TIME_PRELUDE NXLOCK_ISSUE                                               \
      "local pruned = false local leases = nil "                                 \
      "local function turn(h) "                                                  \
      "local lease = redis.call('ZSCORE', leases, h) "                           \
      "if lease and tonumber(lease) > now + " NXLOCK_TURN_LEASE_US               \
      " then "                                                                   \
      "redis.call('ZADD', leases, 'XX', now + " NXLOCK_TURN_LEASE_US             \
      ", h) end "                                                                \
      "redis.pcall('PUBLISH', '" NXLOCK_TURN_PREFIX                              \
      "' .. h, h) end "                                                          \
      "local function head(q, l) leases = l "                                    \
      "while true do "                                                           \
      "local first = redis.call('ZRANGE', q, 0, 0)[1] "                          \
      "if not first then return false end "                                      \
      "local lease = redis.call('ZSCORE', l, first) "                            \
      "if lease and tonumber(lease) >= now then return first end "               \
      "redis.call('ZREM', q, first) redis.call('ZREM', l, first) pruned = true " \
      "end end "
// live_ahead(q, l, t): how many live waiters are ahead of ticket t in queue q
// (leases l): its rank, less the lapsed places before it (found by their
// lease, so a long line costs only its dead); none is removed: a lapsed place
// is dropped when it is first (head()), as ever.
#define NXLOCK_LIVE_AHEAD                                                          \
  "local function live_ahead(q, l, t) "                                            \
  "local r = redis.call('ZRANK', q, t) if not r then return 0 end local n = r "    \
  "for _, w in ipairs(redis.call('ZRANGEBYSCORE', l, '-inf', '(' .. now_text)) do " \
  "local rw = redis.call('ZRANK', q, w) if rw and rw < r then n = n - 1 end end "  \
  "return n end "
// KEYS: lock, counter, queue, lease. ARGV: value, ticket, waiting, lease (us),
// queue keep (ms), lock keep (ms), counter keep (ms). A waiter behind a live
// head tries nothing; one that may go first does the SETNX (and token) of
// k_set_if_absent_fenced_script, and leaves the queue when it sets. A waiter
// that did not set joins (ZADD NX keeps its place) and renews its lease, and
// one behind learns how many live waiters are ahead of it (live_ahead: what
// --max-waiters counts, in the step that queued it); one that sets never
// writes the queue it leaves. If it dropped a dead head while
// the lock is free, the new head (when it is another) is woken: it may be
// waiting for a wake-up that the dead one took with it.
const std::string_view k_set_if_absent_queued_script = NXLOCK_QUEUE_PRELUDE NXLOCK_LIVE_AHEAD
    "local ticket = ARGV[2] "
    "local function join() if ARGV[3] == '1' then "
    "redis.call('ZADD', KEYS[3], 'NX', now, ticket) "
    "redis.call('ZADD', KEYS[4], now + tonumber(ARGV[4]), ticket) "
    "redis.call('PEXPIRE', KEYS[3], ARGV[5]) redis.call('PEXPIRE', KEYS[4], ARGV[5]) "
    "end end "
    "local h = head(KEYS[3], KEYS[4]) "
    "if h and h ~= ticket then "
    "join() "
    "local current = redis.call('GET', KEYS[1]) "
    "if pruned and not current then turn(h) end "
    "return {0, current, live_ahead(KEYS[3], KEYS[4], ticket)} end "
    "if redis.call('SETNX', KEYS[1], ARGV[1]) == 0 then "
    "join() return {1, redis.call('GET', KEYS[1])} end "
    "local token = issue(KEYS[2], ARGV[7]) "
    "if type(token) == 'table' then redis.call('DEL', KEYS[1]) return token end "
    "keep(KEYS[1], ARGV[6]) "
    "if h then redis.call('ZREM', KEYS[3], ticket) redis.call('ZREM', KEYS[4], ticket) end "
    "return {2, token}";
// KEYS: lock, counter, queue, lease. ARGV: expected, token, channel, counter
// keep. As k_compare_and_delete_fenced_script, but the wake-up goes to the
// first live waiter alone; with none queued, '1' on the key's channel wakes
// every watcher (waiters of older versions, which are not queued).
const std::string_view k_compare_and_delete_queued_script =
    NXLOCK_QUEUE_PRELUDE NXLOCK_FENCED_DELETE
    "local h = head(KEYS[3], KEYS[4]) "
    "if h then turn(h) else redis.pcall('PUBLISH', ARGV[3], '1') end return 1";
// KEYS: lock, queue, lease. ARGV: ticket. Leaving while the lock is
// free hands the wake-up on to the next live waiter (the leaver may have been
// the one woken).
const std::string_view k_leave_queue_script = NXLOCK_QUEUE_PRELUDE
    "redis.call('ZREM', KEYS[2], ARGV[1]) redis.call('ZREM', KEYS[3], ARGV[1]) "
    "if redis.call('EXISTS', KEYS[1]) == 0 then "
    "local h = head(KEYS[2], KEYS[3]) "
    "if h then turn(h) end end "
    "return 1";

// The leased holders (SharedLeases, store.hpp: shared ones and slots): a sorted
// set beside the lock (LEASES), each holder's id scored by its lease's expiry
// (a lock value, Unix seconds, compared with the server's TIME). While a lease
// lives, the lock key holds the latest one's expiry: exclusive takers,
// nxlock's or any page client's, find it held, and their scripts need no
// change. Every step first drops the lapsed leases (`prune()`, whose `secs` is
// TIME in seconds). A set holds the lock only while the key holds its latest
// expiry (`top()`) and the counter still holds the token of the set's latest
// take (field '@fence' of DETAILS; `held()`): a timestamp alone can be an
// exclusive holder's that expires in the same second. An absent counter
// (evicted) counts as the set's, as in the fenced scripts; a set of an older
// nxlock has no '@fence'. Every write moves the key with the set (`cover()`),
// so a set whose key another client deleted or wrote is never written over:
// its leases are lost. Each holder's details (DETAILS, a hash by id:
// store::details_key) go with its lease: dropped when it lapses or is
// released, kept as long. These are the embedded store's rules too
// (store/lease_book.hpp).
#define NXLOCK_SHARED_PRELUDE                                                           \
  "local secs = tonumber(t[1]) "                                                        \
  "local function prune(l, d) "                                                         \
  "for _, id in ipairs(redis.call('ZRANGEBYSCORE', l, '-inf', '(' .. t[1])) do "        \
  "redis.call('HDEL', d, id) end "                                                      \
  "redis.call('ZREMRANGEBYSCORE', l, '-inf', '(' .. t[1]) end "                         \
  "local function top(l) "                                                              \
  "local s = redis.call('ZRANGE', l, -1, -1, 'WITHSCORES')[2] "                         \
  "if s then return string.format('%.0f', tonumber(s)) end return false end "           \
  "local function held(k, c, l, d) "                                                    \
  "local x = top(l) if not x or redis.call('GET', k) ~= x then return false end "       \
  "local f = redis.call('HGET', d, '@fence') if not f then return true end "            \
  "local n = redis.call('GET', c) return not n or n == f end "                          \
  "local function owned(k, c, l, d, id, want, tok) "                                    \
  "if not held(k, c, l, d) then return false end "                                      \
  "local s = redis.call('ZSCORE', l, id) if not s then return false end "               \
  "if want ~= '' and string.format('%.0f', tonumber(s)) ~= want then return false end " \
  "local mine = string.match(redis.call('HGET', d, id) or '', '^%d+') "                 \
  "return tok == '' or not mine or mine == tok end "                                    \
  "local function cover(k, l, d, ms) "                                                  \
  "local x = top(l) "                                                                   \
  "if not x then redis.call('DEL', k, l, d) return false end "                          \
  "redis.call('SET', k, x) keep(k, ms) keep(l, ms) "                                    \
  "keep(d, ms) return true end "
// KEYS: lock, counter, leases, queue, queue lease, details. ARGV: id, expiry, ticket,
// waiting, lease (us), queue keep, lock keep, counter keep, slots. The queue's
// gate of k_set_if_absent_queued_script (an exclusive waiter queued first is
// not overtaken), then the lease: a new set if the key is absent or expired
// (the leases of a set that lost it are dropped), or one more lease in the set
// that holds the key, if it is of the same kind (shared, or slots: "#N" ids)
// and has a free slot; a key held by no live set is an exclusive holder's. A
// lease taken leaves the queue and wakes the next waiter, which may be one too.
const std::string_view k_take_shared_script = NXLOCK_QUEUE_PRELUDE NXLOCK_SHARED_PRELUDE NXLOCK_LIVE_AHEAD
    "local ticket = ARGV[3] local slots = tonumber(ARGV[9]) "
    "local function join() if ARGV[4] == '1' then "
    "redis.call('ZADD', KEYS[4], 'NX', now, ticket) "
    "redis.call('ZADD', KEYS[5], now + tonumber(ARGV[5]), ticket) "
    "redis.call('PEXPIRE', KEYS[4], ARGV[6]) redis.call('PEXPIRE', KEYS[5], ARGV[6]) "
    "end end "
    "local current = redis.call('GET', KEYS[1]) "
    "local h = head(KEYS[4], KEYS[5]) "
    "if h and h ~= ticket then join() return {0, current, live_ahead(KEYS[4], KEYS[5], ticket)} end "
    "prune(KEYS[3], KEYS[6]) "
    "local fresh = true "
    "if current then "
    "if not (#current <= 18 and string.match(current, '^%d+$')) then return {1, current} end "
    "if held(KEYS[1], KEYS[2], KEYS[3], KEYS[6]) then fresh = false "
    "local first = redis.call('ZRANGE', KEYS[3], 0, 0)[1] "
    "if (string.sub(first, 1, 1) == '#') ~= (slots > 0) then join() return {1, current} end "
    "elseif tonumber(current) >= secs then join() return {1, current} end end "
    "if fresh then redis.call('DEL', KEYS[3], KEYS[6]) end "
    "local id = ARGV[1] "
    "if slots > 0 then id = false for i = 1, slots do "
    "if not redis.call('ZSCORE', KEYS[3], '#' .. i) then id = '#' .. i break end end "
    "if not id then join() return {1, current} end end "
    "local token = issue(KEYS[2], ARGV[8]) "
    "if type(token) == 'table' then return token end "
    "redis.call('ZADD', KEYS[3], ARGV[2], id) "
    "local f = redis.call('GET', KEYS[2]) redis.call('HSET', KEYS[6], '@fence', f, id, f) "
    "cover(KEYS[1], KEYS[3], KEYS[6], ARGV[7]) "
    "if h then redis.call('ZREM', KEYS[4], ticket) redis.call('ZREM', KEYS[5], ticket) "
    "local n = head(KEYS[4], KEYS[5]) if n then turn(n) end end "
    "return {2, token, id}";
// KEYS: lock, counter, leases, details. ARGV: id, expiry, lock keep, the
// lease's expiry ('' for any), the token of its take ('' for any: DETAILS
// holds it first, as the take wrote it). Only a live lease of the set that
// holds the key is renewed.
const std::string_view k_renew_shared_script = NXLOCK_TIME_PRELUDE NXLOCK_SHARED_PRELUDE
    "prune(KEYS[3], KEYS[4]) "
    "if not owned(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[4], ARGV[5]) then return 0 end "
    "redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1]) cover(KEYS[1], KEYS[3], KEYS[4], ARGV[3]) "
    "return 1";
// KEYS: leases, details. ARGV: id, details. Only a live lease's holder is
// described, and its details expire with the leases.
const std::string_view k_record_details_script = NXLOCK_TIME_PRELUDE NXLOCK_SHARED_PRELUDE
    "prune(KEYS[1], KEYS[2]) "
    "if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end "
    "redis.call('HSET', KEYS[2], ARGV[1], ARGV[2]) "
    "local ttl = redis.call('PTTL', KEYS[1]) "
    "if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end return 1";
// KEYS: lock, counter, leases, queue, queue lease, details. ARGV: id, channel,
// lock keep, the lease's expiry ('' for any), the token of its take ('' for any). The last live lease deletes the
// key; it and any slot's release wake as a release does
// (k_compare_and_delete_queued_script): the first queued waiter, else every watcher.
const std::string_view k_release_shared_script = NXLOCK_QUEUE_PRELUDE NXLOCK_SHARED_PRELUDE
    "prune(KEYS[3], KEYS[6]) "
    "if not owned(KEYS[1], KEYS[2], KEYS[3], KEYS[6], ARGV[1], ARGV[4], ARGV[5]) then "
    "return 0 end "
    "redis.call('ZREM', KEYS[3], ARGV[1]) redis.call('HDEL', KEYS[6], ARGV[1]) "
    "if cover(KEYS[1], KEYS[3], KEYS[6], ARGV[3]) and string.sub(ARGV[1], 1, 1) ~= '#' then "
    "return 1 end "
    "local h = head(KEYS[4], KEYS[5]) "
    "if h then turn(h) else redis.pcall('PUBLISH', ARGV[2], '1') end return 1";
// KEYS: lock, counter, leases, details. The lock's value ('' if absent), then
// '1' if it is there, '1' if the set holds it, then each live lease: id,
// expiry, details ('' if none). Read only: the lapsed leases are skipped, not dropped.
const std::string_view k_read_leases_script = NXLOCK_TIME_PRELUDE
    "local function top(l) "
    "local z = redis.call('ZRANGEBYSCORE', l, t[1], '+inf', 'WITHSCORES') "
    "if #z == 0 then return false end return string.format('%.0f', tonumber(z[#z])) end "
    "local v = redis.call('GET', KEYS[1]) local x = top(KEYS[3]) "
    "local holding = x ~= false and v == x "
    "if holding then local f = redis.call('HGET', KEYS[4], '@fence') "
    "local n = redis.call('GET', KEYS[2]) holding = not f or not n or n == f end "
    "local out = {v or '', v and '1' or '0', holding and '1' or '0'} "
    "local z = redis.call('ZRANGEBYSCORE', KEYS[3], t[1], '+inf', 'WITHSCORES') "
    "for i = 1, #z, 2 do out[#out + 1] = z[i] "
    "out[#out + 1] = string.format('%.0f', tonumber(z[i + 1])) "
    "out[#out + 1] = redis.call('HGET', KEYS[4], z[i]) or '' end return out";

std::string wake_channel(std::string_view key) {
  std::string channel(k_wake_prefix);
  channel += key;
  return channel;
}

std::string turn_channel(std::string_view ticket) {
  std::string channel(k_turn_prefix);
  channel += ticket;
  return channel;
}

}  // namespace nxlock::store::redis
