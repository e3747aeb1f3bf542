// FileStore: the embedded store's Store operations, each one bucket transaction (or one
// unlocked read) decided by the lock rules (the format and the safety argument:
// docs/STORE-FORMAT.md), and the core its parts share (FileCore). The directory is
// store_directory.cpp's, the transaction bucket.cpp's, the waiters' queue file_queue.cpp's.
#include "store/keys.hpp"
#include "store/file/file_store.hpp"

#include <sys/inotify.h>

#include <algorithm>
#include <string>
#include <vector>

#include "store/fenced_steps.hpp"
#include "store/file/counter.hpp"
#include "store/file/owner.hpp"
#include "store/file/watcher.hpp"
#include "store/lock_value.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store {

using record::Entry;

namespace {

StoreDirectory::Options directory_options(const FileStore::Options& options) {
  StoreDirectory::Options directory;
  directory.create = options.create;
  directory.durable = options.durable;
  directory.require_owner = options.require_owner;
  directory.create_hint = options.create_hint;
  return directory;
}

}  // namespace

FileCore::FileCore(std::string path, const StoreDirectory::Options& options, bool record_owner)
    : m_directory(std::move(path), options), m_buckets(m_directory), m_record_owner(record_owner) {}

std::int64_t FileCore::issue_fence(std::int64_t at_least) {
  // Format 2 from now on: an older nxlock's counters would go back.
  m_directory.mark_current_format();
  FenceCounter counter(m_directory.root(), m_directory.path(), m_directory.file_mode(),
                       m_directory.durable());
  return counter.issue(std::max(at_least, util::wall_now().count()));
}

std::unique_ptr<FileWatcher> FileCore::make_watcher(std::string_view key,
                                                    FileWatcher::MakeFifo make_fifo,
                                                    FileWatcher::RemoveFifo remove_fifo) {
  // The stripe directory must exist to be watched: the bucket may not exist yet.
  const Stripe stripe = m_buckets.open(key, true);
  int shared = -1;
  if (!m_inotify_lent) {
    if (!m_inotify) {
      m_inotify.reset(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));  // -1: the watcher decides
    }
    shared = m_inotify.get();
  }
  auto watcher = std::make_unique<FileWatcher>(stripe.fd.get(), stripe.bucket.name, stripe.path,
                                               std::move(make_fifo), std::move(remove_fifo), shared,
                                               [this, shared] {
                                                 if (shared >= 0) {
                                                   m_inotify_lent = false;
                                                 }
                                               });
  if (shared >= 0) {
    m_inotify_lent = true;
  }
  return watcher;
}

FileStore::FileStore(std::string path, const Options& options)
    : m_core(std::move(path), directory_options(options), options.record_owner),
      m_queue(m_core, *this),
      m_leases(m_core, *this, m_queue),
      m_listing(m_core, m_leases) {
  // A store that does not exist yet is made by the first write, not here:
  // `get` and `status` on it create nothing.
  m_core.directory().open(false);
}

FileStore::~FileStore() {
  m_queue.leave_now();
}

std::string FileStore::describe() const {
  return util::escape(m_core.directory().path());
}

void FileStore::mutate(std::string_view key, bool may_insert, const Buckets::Decide& decide) {
  m_queue.leave_now();
  m_core.buckets().update(key, may_insert, decide);
}

// The counter argument of the fenced steps names Redis's per-lock counter; the
// embedded store keeps one counter for all its keys (FenceCounter) and each
// lock's token in the lock's own entry, so nothing stays behind a released lock.

SetIfAbsent FileStore::set_if_absent(std::string_view key, std::string_view value,
                                     std::optional<std::string_view> counter,
                                     StepPolicy /*policy*/) {
  SetIfAbsent result;
  mutate(key, true, [&](const Entry* current) {
    result.set = current == nullptr;
    Change change{Change::Kind::put, value};
    if (result.set && counter) {
      // The counter before the lock: a crash between them skips a token, never
      // issues one twice.
      result.fence = m_core.issue_fence(0);
      change.fence = result.fence;
      change.owned = m_core.record_owner();
    }
    return result.set ? change : Change{};
  });
  if (result.fence) {
    remember_own(value, *result.fence);
  }
  return result;
}

std::optional<std::string> FileStore::get_entry_value(std::string_view key) {
  for (auto& entry : m_core.buckets().read(key)) {
    if (entry.key == key) {
      return std::move(entry.value);
    }
  }
  return std::nullopt;
}

std::optional<std::string> FileStore::get(std::string_view key) {
  // The per-lock counter the lock layer reads (`status`, and run-locked telling
  // "taken over" from "expired") is no key here: it answers with the token in
  // the lock's record while the lock is there, as Redis's counter would (and
  // before a format 1 store's own counter key of that name, which is stale).
  // The names are store::fence_key's (token_of_counter).
  if (const auto token = token_of_counter(key)) {
    return std::to_string(*token);
  }
  return get_entry_value(key);
}

namespace {

// The lock whose counter the lock layer names `counter` (store/keys.hpp):
// "{TAG}:fence:KEY", or "}fence:KEY" for a key that holds a '}' but no tag.
std::optional<std::string_view> lock_of_counter(std::string_view counter) {
  constexpr std::string_view k_infix = "fence:";
  if (counter.starts_with('{')) {
    const auto close = counter.find('}');
    if (close == std::string_view::npos || close < 2 ||
        !counter.substr(close + 1).starts_with(":") ||
        !counter.substr(close + 2).starts_with(k_infix)) {
      return std::nullopt;
    }
    return counter.substr(close + 2 + k_infix.size());
  }
  if (counter.starts_with("}") && counter.substr(1).starts_with(k_infix)) {
    return counter.substr(1 + k_infix.size());
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::int64_t> FileStore::token_of_counter(std::string_view counter) {
  const auto lock_key = lock_of_counter(counter);
  if (!lock_key) {
    return std::nullopt;
  }
  for (const auto& entry : m_core.buckets().read(*lock_key)) {
    if (entry.key == *lock_key && entry.fence && !entry.until) {
      return entry.fence;
    }
  }
  return std::nullopt;
}

bool FileStore::raise_token(std::string_view lock_key, std::string_view expected,
                            std::string_view raised) {
  const auto from = parse_fence(expected);
  const auto to = parse_fence(raised);
  if (!from || !to || *to < *from) {
    return false;
  }
  bool done = false;
  mutate(lock_key, false, [&](const Entry* current) {
    if (current == nullptr || current->fence != from || current->until) {
      return Change{};
    }
    // The store's counter goes up to it too: later tokens are above it.
    (void)m_core.issue_fence(*to);
    Change change{Change::Kind::put, current->value};
    change.fence = to;
    change.owned = m_core.record_owner();
    done = true;
    return change;
  });
  return done;
}

void FileStore::set(std::string_view key, std::string_view value, StepPolicy /*policy*/) {
  const Change change = tagged_put(value);
  mutate(key, true, [&](const Entry*) { return change; });
}

void FileStore::remember_own(std::string_view value, std::int64_t fence) {
  if (m_own_values.size() >= 8) {
    m_own_values.erase(m_own_values.begin());
  }
  m_own_values.emplace_back(value, fence);
}

Change FileStore::tagged_put(std::string_view value) {
  Change change{Change::Kind::put, value};
  for (auto it = m_own_values.rbegin(); it != m_own_values.rend(); ++it) {
    const auto until = parse_lock_timestamp(it->first);
    if (until && value.find("\"value\":\"" + it->first + "\"") != std::string_view::npos) {
      change.fence = it->second;
      change.until = until;
      change.owned = m_core.record_owner();
      break;
    }
  }
  return change;
}

std::size_t FileStore::del(const std::vector<std::string>& keys) {
  // One key at a time, each atomically under its own stripe lock: holding several
  // locks would buy nothing, since get() takes none and may look between two keys.
  std::size_t removed = 0;
  for (const auto& key : keys) {
    mutate(key, false, [&](const Entry* current) {
      if (current == nullptr) {
        return Change{};
      }
      ++removed;
      return Change{Change::Kind::erase, {}};
    });
  }
  return removed;
}

bool FileStore::compare_and_delete(std::string_view key, std::string_view expected,
                                   std::optional<Fence> fence, StepPolicy /*policy*/) {
  bool deleted = false;
  mutate(key, false, [&](const Entry* current) {
    // Fenced: the lock's own entry holds its token (see set_if_absent()).
    deleted = current != nullptr && current->value == expected &&
              (!fence || current->fence == fence->token);
    return deleted ? Change{Change::Kind::erase, {}} : Change{};
  });
  return deleted;
}

bool FileStore::compare_and_set(std::string_view key, std::string_view expected,
                                std::string_view value, std::optional<Fence> fence,
                                StepPolicy /*policy*/) {
  if (fence) {
    return renew_owned(key, expected, value, fence->token);
  }
  // A quorum raises its lock's token on every server to the quorum's
  // (Lock::raise_fence) by compare-and-set of the counter the lock layer names:
  // here that is the token in the lock's own entry.
  if (const auto lock_key = lock_of_counter(key)) {
    return raise_token(*lock_key, expected, value);
  }
  bool replaced = false;
  Change change = tagged_put(value);
  // By value, as the page's clients renew: the same acquisition goes on, so
  // its token and owner stay (unless these are details beside our own lock).
  change.keep_meta = !change.fence;
  mutate(key, false, [&](const Entry* current) {
    replaced = current != nullptr && current->value == expected;
    return replaced ? change : Change{};
  });
  return replaced;
}

Swap FileStore::get_and_set(std::string_view key, std::string_view value,
                            std::optional<Takeover> takeover, StepPolicy /*policy*/) {
  Swap swap;
  mutate(key, true, [&](const Entry* current) {
    if (current != nullptr) {
      swap.old = current->value;
    }
    if (!takeover) {
      return Change{Change::Kind::put, value};
    }
    const bool expired = getset_owns(swap.old, takeover->now_seconds);
    if (expired && current != nullptr && owner::keeps_held(*current)) {
      // Its owner runs on this host and renews it: the caller's clock is wrong
      // (stepped, skewed), not the lock. Nothing is written, and the answer is
      // what GETSET returns from a lock renewed this very second: held.
      swap.old = std::to_string(takeover->now_seconds);
      return Change{};
    }
    Change change{Change::Kind::put, value};
    if (expired) {
      // Above the old lock's own token too, whatever the counter says.
      const std::int64_t previous = current != nullptr && current->fence ? *current->fence : 0;
      swap.fence = m_core.issue_fence(previous + 1);
      change.fence = swap.fence;
      change.owned = m_core.record_owner();
    }
    return change;
  });
  if (swap.fence) {
    remember_own(value, *swap.fence);
  }
  return swap;
}

bool FileStore::renew_owned(std::string_view key, std::string_view expected, std::string_view value,
                            std::int64_t token) {
  bool replaced = false;
  mutate(key, false, [&](const Entry* current) {
    replaced = current != nullptr && current->value == expected && current->fence == token;
    // A renewal (or run-locked --hold's last write) by the owner: it says who
    // it is again, so a lock taken before the owner was known is kept too.
    Change change{Change::Kind::put, value};
    change.keep_meta = true;
    change.owned = m_core.record_owner();
    return replaced ? change : Change{};
  });
  if (replaced) {
    remember_own(value, token);
  }
  return replaced;
}

util::Micros FileStore::now() {
  return util::wall_now();
}

std::unique_ptr<Watcher> FileStore::watch(std::string_view key) {
  return m_queue.watch_key(key);
}

}  // namespace nxlock::store
