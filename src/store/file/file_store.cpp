// FileStore: the embedded store, checksummed per-bucket record files under flocked stripe
// directories, replaced by rename (the format and the safety argument: docs/STORE-FORMAT.md).
#include "store/file/file_store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "store/fenced_steps.hpp"
#include "store/file/counter.hpp"
#include "store/file/owner.hpp"
#include "store/file/posix.hpp"
#include "store/file/record.hpp"
#include "store/file/watcher.hpp"
#include "store/lock_value.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/trace.hpp"

namespace nxlock::store {

namespace {

using posix::close_written;
using posix::create_exclusive;
using posix::fail;
using posix::open_subdir;
using posix::read_all;
using posix::sync_fd;
using posix::write_all;
using record::Entry;
using util::ErrorKind;

constexpr const char* k_marker_name = "nxlock-store";
// Format 2: lock records carry their token and owner, and tokens come from one
// store-wide counter. A format 1 store is read as it is, and marked 2 before its
// first token of the new kind, so that an older nxlock refuses it from then on
// (its per-key counters would issue tokens below ours).
constexpr std::string_view k_marker_content = "nxlock-store 2\n";
constexpr std::string_view k_marker_v1 = "nxlock-store 1\n";
constexpr const char* k_data_name = "data";
constexpr const char* k_wait_name = "wait";

struct QueuedWaiter {
  std::string ticket;
  std::int64_t arrival = 0;      // queue_now() microseconds
  std::int64_t lease_until = 0;  // queue_now() microseconds
};

// The clock of the queue's arrivals and leases: CLOCK_BOOTTIME, one clock for
// every process of this boot, which no clock step, NTP slew or faked wall
// clock moves. On the wall clock, a waiter whose clock ran behind renewed its
// lease into the others' past and lost its place at every look.
std::int64_t queue_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1'000;
}

// A line's boot: its times mean nothing on another boot. Dashes go, so the
// line stays four words.
std::string queue_boot() {
  std::string boot = owner::this_boot();
  std::erase(boot, '-');
  return boot.empty() ? "-" : boot;
}

// A queue entry's waiters; lines that do not parse are left out (and so
// dropped by the next write): the queue is advice, the lock does not depend on it.
// A line of another boot, or of an older nxlock (three words, wall-clock
// times), has lapsed: its waiter, if it still waits, joins again at its next look.
std::vector<QueuedWaiter> parse_queue(const std::string* text) {
  static const std::string this_boot = queue_boot();
  std::vector<QueuedWaiter> waiters;
  if (text == nullptr) {
    return waiters;
  }
  std::size_t at = 0;
  while (at < text->size()) {
    std::size_t end = text->find('\n', at);
    if (end == std::string::npos) {
      end = text->size();
    }
    const std::string line = text->substr(at, end - at);
    at = end + 1;
    char ticket[64] = {};
    long long arrival = 0;
    long long lease = 0;
    char boot[64] = {};
    const int words = std::sscanf(line.c_str(), "%63s %lld %lld %63s", ticket, &arrival, &lease, boot);
    if (words >= 3 && ticket[0] == 'q') {
      waiters.push_back({ticket, arrival, words == 4 && this_boot == boot ? lease : 0});
    }
  }
  return waiters;
}

std::string encode_queue(const std::vector<QueuedWaiter>& waiters) {
  static const std::string this_boot = queue_boot();
  std::string text;
  for (const auto& w : waiters) {
    text += w.ticket + " " + std::to_string(w.arrival) + " " + std::to_string(w.lease_until) + " " +
            this_boot + "\n";
  }
  return text;
}

// A ticket as a file name: what make_ticket() makes, and nothing that could
// name another path.
bool ticket_name_ok(std::string_view ticket) {
  return !ticket.empty() && ticket.size() < 64 &&
         std::all_of(ticket.begin(), ticket.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'); });
}

// The bucket's bytes, or nullopt if it does not exist. Never follows a symlink
// and never blocks on a FIFO planted in its place.
std::optional<std::string> read_record(int stripe_fd, const std::string& name,
                                       const std::string& path) {
  const int fd = ::openat(stripe_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) {
      return std::nullopt;
    }
    fail(errno, path, "open");
  }
  util::UniqueFd file(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    fail(errno, path, "stat");
  }
  if (!S_ISREG(st.st_mode)) {
    throw util::Error(ErrorKind::data, util::escape(path), "corrupt record (not a regular file)");
  }
  return read_all(fd, path, static_cast<std::size_t>(st.st_size));
}

}  // namespace

FileStore::FileStore(std::string path, Options options)
    : m_path(std::move(path)), m_options(options) {
  // "/x/store/" would resolve a symlink named store despite O_NOFOLLOW.
  while (m_path.size() > 1 && m_path.back() == '/') {
    m_path.pop_back();
  }
  // A store that does not exist yet is made by the first write, not here:
  // `get` and `status` on it create nothing.
  ensure_root(false);
}

bool FileStore::ensure_root(bool create) {
  if (m_root) {
    return true;
  }
  if (!open_root(create && m_options.create)) {
    return false;
  }
  struct stat st {};
  if (::fstat(m_root.get(), &st) != 0) {
    fail(errno, m_path, "stat");
  }
  if (m_options.require_owner && st.st_uid != ::geteuid()) {
    m_root.reset();
    throw util::Error(ErrorKind::permission, util::escape(m_path),
                      "owned by uid " + std::to_string(st.st_uid) + ", not you");
  }
  // New files and directories inherit the store directory's permission bits, so a
  // private store (0700) stays private and a group store (2770) works for the group.
  m_file_mode = st.st_mode & 0666;
  m_dir_mode = st.st_mode & (S_ISGID | 0777);

  try {
    check_marker();
    m_data = open_subdir(m_root.get(), k_data_name, m_path + "/" + k_data_name, false, m_dir_mode,
                         false);
  } catch (...) {
    m_root.reset();  // never used unchecked
    throw;
  }
  return true;
}

FileStore::~FileStore() {
  leave_queue_now();
}

std::string FileStore::describe() const {
  return util::escape(m_path);
}

bool FileStore::open_root(bool create) {
  constexpr int k_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(m_path.c_str(), k_flags);
  if (fd < 0 && errno == ENOENT && create) {
    // The default store is the user's own, parents too (0700). A path given
    // explicitly honours the umask, and the kernel gives new directories a
    // setgid parent's group: a group can share it.
    const bool private_store = m_options.require_owner;
    const mode_t mode = private_store ? 0700 : 0777;
    for (std::size_t slash = m_path.find('/', 1); slash != std::string::npos;
         slash = m_path.find('/', slash + 1)) {
      const std::string parent = m_path.substr(0, slash);
      if (::mkdir(parent.c_str(), mode) != 0 && errno != EEXIST) {
        fail(errno, parent, "create directory");
      }
    }
    const bool made = ::mkdir(m_path.c_str(), mode) == 0;
    if (!made && errno != EEXIST) {
      fail(errno, m_path, "create store directory");
    }
    fd = ::open(m_path.c_str(), k_flags);
    // The umask must not leave us a private store we cannot write.
    if (fd >= 0 && made && private_store && ::fchmod(fd, 0700) != 0) {
      const int err = errno;
      ::close(fd);
      fail(err, m_path, "chmod");
    }
  }
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      if (!m_options.create) {
        throw util::Error(ErrorKind::unavailable, util::escape(m_path), "no nxlock store here");
      }
      return false;  // nothing there yet: every key is absent
    }
    if (err == ELOOP || err == ENOTDIR) {
      struct stat st {};
      const bool is_link = ::lstat(m_path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
      throw util::Error(ErrorKind::data, util::escape(m_path),
                        is_link ? "not an nxlock store (a symbolic link, not followed)"
                                : "not an nxlock store (not a directory)");
    }
    fail(err, m_path, "open store directory");
  }
  m_root.reset(fd);
  return true;
}

void FileStore::check_marker() {
  // Twice at most: the marker may appear between our open and our listing, when
  // another process initializes the same empty directory.
  for (int attempt = 0;; ++attempt) {
    const int fd =
        ::openat(m_root.get(), k_marker_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      util::UniqueFd file(fd);
      struct stat st {};
      if (::fstat(fd, &st) != 0) {
        fail(errno, m_path + "/" + k_marker_name, "stat");
      }
      const std::string content = S_ISREG(st.st_mode) && st.st_size <= 64
                                      ? read_all(fd, m_path + "/" + k_marker_name)
                                      : std::string();
      if (content == k_marker_content) {
        return;
      }
      if (content == k_marker_v1) {
        m_marker_v1 = true;  // marked 2 before its first token (issue_fence)
        return;
      }
      if (content.starts_with("nxlock-store ")) {
        throw util::Error(ErrorKind::data, util::escape(m_path),
                          "unsupported store format (marker says '" +
                              util::escape(content.substr(0, content.find('\n'))) +
                              "', this nxlock reads 'nxlock-store 1' and 'nxlock-store 2')");
      }
      throw util::Error(ErrorKind::data, util::escape(m_path),
                        "not an nxlock store (unexpected nxlock-store marker)");
    }
    if (errno == ELOOP) {
      throw util::Error(ErrorKind::data, util::escape(m_path),
                        "not an nxlock store (nxlock-store is a symbolic link)");
    }
    if (errno != ENOENT) {
      fail(errno, m_path + "/" + k_marker_name, "open");
    }
    if (directory_is_empty()) {
      write_marker();
      return;
    }
    if (attempt > 0) {
      throw util::Error(ErrorKind::data, util::escape(m_path),
                        "not an nxlock store (no nxlock-store marker, and the directory is not "
                        "empty)");
    }
  }
}

bool FileStore::directory_is_empty() {
  const int fd = ::openat(m_root.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    fail(errno, m_path, "open store directory");
  }
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const int err = errno;
    ::close(fd);
    fail(err, m_path, "read store directory");
  }
  bool empty = true;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(dir);
    if (entry == nullptr) {
      const int err = errno;
      ::closedir(dir);
      if (err != 0) {
        fail(err, m_path, "read store directory");
      }
      return empty;
    }
    const std::string_view name = entry->d_name;
    // Our own initialization's temporary files (a concurrent or interrupted one) do
    // not make the directory foreign.
    const bool ours = name.starts_with(".nxlock-store.") && name.ends_with(".tmp");
    if (name != "." && name != ".." && !ours) {
      empty = false;
    }
  }
}

void FileStore::write_marker() {
  // Unique per process (the pid alone may repeat across pid namespaces sharing a
  // volume): two processes may initialize the same directory at once, and both
  // renames install the same content.
  const std::string temp = ".nxlock-store." + std::to_string(::getpid()) + "-" +
                           std::to_string(util::mono_now().count()) + ".tmp";
  const std::string temp_path = m_path + "/" + temp;
  util::UniqueFd file = create_exclusive(m_root.get(), temp, temp_path, m_file_mode);
  write_all(file.get(), k_marker_content, temp_path);
  // Always synced, whatever `durable` says: a marker lost to a power cut would make
  // the whole store look foreign. It is written once per store.
  sync_fd(file.get(), temp_path);
  close_written(std::move(file), temp_path);
  if (::renameat(m_root.get(), temp.c_str(), m_root.get(), k_marker_name) != 0) {
    const int err = errno;
    ::unlinkat(m_root.get(), temp.c_str(), 0);
    fail(err, m_path + "/" + k_marker_name, "rename");
  }
  sync_fd(m_root.get(), m_path);
}

int FileStore::data_dir(bool create) {
  if (!ensure_root(create)) {
    return -1;
  }
  if (!m_data) {
    m_data = open_subdir(m_root.get(), k_data_name, m_path + "/" + k_data_name, create, m_dir_mode,
                         m_options.durable);
  }
  return m_data.get();
}

// ---- operations ------------------------------------------------------------

FileStore::Stripe FileStore::open_stripe(std::string_view key, bool create) {
  Stripe stripe{record::bucket_of(key), {}, {}, {}};
  stripe.path = m_path + "/" + k_data_name + "/" + stripe.bucket.stripe;
  stripe.record_path = stripe.path + "/" + stripe.bucket.name;
  const int data = data_dir(create);
  if (data >= 0) {
    stripe.fd = open_subdir(data, stripe.bucket.stripe.c_str(), stripe.path, create, m_dir_mode,
                            m_options.durable);
  }
  return stripe;
}

namespace {

const Entry* find_entry(const std::vector<Entry>& entries, std::string_view key) {
  const auto it =
      std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.key == key; });
  return it == entries.end() ? nullptr : &*it;
}

const std::string* value_of(const Entry* entry) {
  return entry == nullptr ? nullptr : &entry->value;
}

// True if `entry` is a lock that this host's clock may call expired but whose
// owner still runs: a live run-locked renews it, and only its timestamp is
// behind (a clock step, a caller's skewed clock). Liveness only keeps a lock.
// A caller that is the owner itself is not kept out by its own liveness.
bool kept_by_live_owner(const Entry& entry) {
  return entry.fence && entry.owner && entry.owner != owner::self() && owner::alive(*entry.owner);
}

}  // namespace

void FileStore::lock_stripe(const Stripe& stripe) {
  // The stripe lock makes read-decide-write one atomic step against every other
  // writer of the 1/256 of keys in this stripe. Held for microseconds; released
  // by closing `stripe`, so also when this process dies.
  while (::flock(stripe.fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) {
      fail(errno, stripe.path, "lock");
    }
  }
}

std::vector<Entry> FileStore::load(const Stripe& stripe) {
  if (const auto bytes = read_record(stripe.fd.get(), stripe.bucket.name, stripe.record_path)) {
    return record::parse(*bytes, stripe.bucket.name, stripe.record_path);
  }
  return {};
}

void FileStore::save(const Stripe& stripe, const std::vector<Entry>& entries) {
  if (entries.empty()) {
    remove_record(stripe);
  } else {
    write_record(stripe, record::encode(entries));
  }
}

// Applies `change` to `key` in `entries`; true if they changed.
bool FileStore::apply(std::vector<Entry>& entries, std::string_view key, const Change& change) {
  const auto it =
      std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.key == key; });
  switch (change.kind) {
    case Change::Kind::keep:
      return false;
    case Change::Kind::put: {
      Entry* entry = nullptr;
      if (it == entries.end()) {
        entry = &entries.emplace_back(Entry{std::string(key), {}, {}, {}});
      } else {
        entry = &*it;
      }
      entry->value = change.value;
      if (!change.keep_meta) {
        entry->fence = change.fence;
        entry->until = change.fence ? change.until : std::nullopt;
        entry->owner.reset();
      }
      if (change.owned && entry->fence) {
        entry->owner = owner::self();  // none if /proc cannot say who we are
      }
      return true;
    }
    case Change::Kind::erase:
      if (it == entries.end()) {
        return false;
      }
      entries.erase(it);
      return true;
  }
  return false;
}

void FileStore::mutate(std::string_view key, bool may_insert, const Decide& decide) {
  leave_queue_now();
  const Stripe stripe = open_stripe(key, may_insert);
  if (!stripe.fd) {
    decide(nullptr);  // no stripe directory: the key is absent, and nothing can be inserted
    return;
  }
  lock_stripe(stripe);
  std::vector<Entry> entries = load(stripe);
  const Change change = decide(find_entry(entries, key));
  const bool owning = change.kind == Change::Kind::put && !change.keep_meta && change.fence;
  if (apply(entries, key, change)) {
    save(stripe, entries);
  }
  if (owning) {
    // Under the stripe lock we hold anyway: an abandoned lock beside ours goes.
    sweep_stripe(stripe);
  }
}

void FileStore::sweep_stripe(const Stripe& stripe) {
  // Bounded: a few buckets per owning step, so its cost does not grow with the
  // store. Only entries written by nxlock's owning steps are ever removed (a
  // token in their metadata): never a key of the page's clients or of `set`.
  constexpr int k_budget = 8;
  const int fd = ::openat(stripe.fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return;
  }
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return;
  }
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name.size() == 16 && name != stripe.bucket.name &&
        name.find_first_not_of("0123456789abcdef") == std::string_view::npos) {
      names.emplace_back(name);
    }
  }
  ::closedir(dir);
  if (names.size() > static_cast<std::size_t>(k_budget)) {
    // A different few each time.
    const auto start = static_cast<std::size_t>(util::mono_now().count()) % names.size();
    std::rotate(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(start), names.end());
    names.resize(k_budget);
  }
  const std::int64_t now_seconds = util::whole_seconds(util::wall_now());
  for (const auto& name : names) {
    Stripe other{record::Bucket{stripe.bucket.stripe, name}, stripe.path,
                 stripe.path + "/" + name, util::UniqueFd(::dup(stripe.fd.get()))};
    if (!other.fd) {
      return;
    }
    try {
      std::vector<Entry> entries = load(other);
      const auto before = entries.size();
      std::erase_if(entries, [&](const Entry& e) {
        const auto expires = e.until ? e.until : parse_lock_timestamp(e.value);
        return e.fence && expires && *expires < now_seconds && !kept_by_live_owner(e);
      });
      if (entries.size() != before) {
        util::trace("removing an abandoned expired lock in " + other.record_path);
        save(other, entries);
      }
    } catch (const util::Error& e) {
      // A corrupt record is the user's to look at; it is not ours to clean.
      util::trace(std::string("sweep skipped: ") + e.what());
    }
  }
}

std::int64_t FileStore::issue_fence(std::int64_t at_least) {
  if (m_marker_v1) {
    write_marker();  // format 2 from now on: an older nxlock's counters would go back
    m_marker_v1 = false;
  }
  FenceCounter counter(m_root.get(), m_path, m_file_mode, m_options.durable);
  return counter.issue(std::max(at_least, util::wall_now().count()));
}

void FileStore::write_record(const Stripe& stripe, std::string_view bytes) {
  const int stripe_fd = stripe.fd.get();
  const std::string& name = stripe.bucket.name;
  // A fixed temporary name is safe: only the holder of the stripe lock writes it.
  const std::string temp = "." + name + ".tmp";
  const std::string temp_path = stripe.path + "/" + temp;
  util::UniqueFd file = create_exclusive(stripe_fd, temp, temp_path, m_file_mode);
  try {
    write_all(file.get(), bytes, temp_path);
    if (m_options.durable) {
      sync_fd(file.get(), temp_path);
    }
    close_written(std::move(file), temp_path);
    // The commit point: readers see the old bucket or the new one, never a mix,
    // and a crash before this line leaves the old one in place.
    if (::renameat(stripe_fd, temp.c_str(), stripe_fd, name.c_str()) != 0) {
      fail(errno, stripe.record_path, "rename");
    }
  } catch (...) {
    ::unlinkat(stripe_fd, temp.c_str(), 0);
    throw;
  }
  if (m_options.durable) {
    sync_fd(stripe_fd, stripe.path);
  }
}

void FileStore::remove_record(const Stripe& stripe) {
  if (::unlinkat(stripe.fd.get(), stripe.bucket.name.c_str(), 0) != 0) {
    fail(errno, stripe.record_path, "remove");
  }
  if (m_options.durable) {
    sync_fd(stripe.fd.get(), stripe.path);
  }
}

// The counter argument of the fenced steps names Redis's per-lock counter; the
// embedded store keeps one counter for all its keys (FenceCounter) and each
// lock's token in the lock's own entry, so nothing stays behind a released lock.

SetIfAbsent FileStore::set_if_absent(std::string_view key, std::string_view value,
                                     std::optional<std::string_view> counter) {
  SetIfAbsent result;
  mutate(key, true, [&](const Entry* current) {
    result.set = current == nullptr;
    Change change{Change::Kind::put, value};
    if (result.set && counter) {
      // The counter before the lock: a crash between them skips a token, never
      // issues one twice.
      result.fence = issue_fence(0);
      change.fence = result.fence;
      change.owned = m_options.record_owner;
    }
    return result.set ? change : Change{};
  });
  if (result.fence) {
    remember_own(value, *result.fence);
  }
  return result;
}

std::optional<std::string> FileStore::get_entry_value(std::string_view key) {
  // No lock: every write is a rename, so this sees a whole old or new bucket.
  const Stripe stripe = open_stripe(key, false);
  if (!stripe.fd) {
    return std::nullopt;
  }
  const auto bytes = read_record(stripe.fd.get(), stripe.bucket.name, stripe.record_path);
  if (!bytes) {
    return std::nullopt;
  }
  for (auto& entry : record::parse(*bytes, stripe.bucket.name, stripe.record_path)) {
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
  // The names are lock::fence_key's (token_of_counter).
  if (const auto token = token_of_counter(key)) {
    return std::to_string(*token);
  }
  return get_entry_value(key);
}

namespace {

// The lock whose counter the lock layer names `counter` (lock/keys.hpp):
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
  const Stripe stripe = open_stripe(*lock_key, false);
  if (!stripe.fd) {
    return std::nullopt;
  }
  const auto bytes = read_record(stripe.fd.get(), stripe.bucket.name, stripe.record_path);
  if (!bytes) {
    return std::nullopt;
  }
  for (const auto& entry : record::parse(*bytes, stripe.bucket.name, stripe.record_path)) {
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
    (void)issue_fence(*to);
    Change change{Change::Kind::put, current->value};
    change.fence = to;
    change.owned = m_options.record_owner;
    done = true;
    return change;
  });
  return done;
}

void FileStore::set(std::string_view key, std::string_view value) {
  const Change change = tagged_put(value);
  mutate(key, true, [&](const Entry*) { return change; });
}

void FileStore::remember_own(std::string_view value, std::int64_t fence) {
  if (m_own_values.size() >= 8) {
    m_own_values.erase(m_own_values.begin());
  }
  m_own_values.emplace_back(value, fence);
}

FileStore::Change FileStore::tagged_put(std::string_view value) {
  Change change{Change::Kind::put, value};
  for (auto it = m_own_values.rbegin(); it != m_own_values.rend(); ++it) {
    const auto until = parse_lock_timestamp(it->first);
    if (until && value.find("\"value\":\"" + it->first + "\"") != std::string_view::npos) {
      change.fence = it->second;
      change.until = until;
      change.owned = m_options.record_owner;
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
                                   std::optional<Fence> fence) {
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
                                std::string_view value, std::optional<Fence> fence) {
  if (fence) {
    return renew(key, expected, value, fence->token);
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
                            std::optional<Takeover> takeover) {
  Swap swap;
  mutate(key, true, [&](const Entry* current) {
    if (current != nullptr) {
      swap.old = current->value;
    }
    if (!takeover) {
      return Change{Change::Kind::put, value};
    }
    const bool expired = getset_owns(swap.old, takeover->now_seconds);
    if (expired && current != nullptr && kept_by_live_owner(*current)) {
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
      swap.fence = issue_fence(previous + 1);
      change.fence = swap.fence;
      change.owned = m_options.record_owner;
    }
    return change;
  });
  if (swap.fence) {
    remember_own(value, *swap.fence);
  }
  return swap;
}

bool FileStore::renew(std::string_view key, std::string_view expected, std::string_view value,
                      std::int64_t token) {
  bool replaced = false;
  mutate(key, false, [&](const Entry* current) {
    replaced = current != nullptr && current->value == expected && current->fence == token;
    // A renewal (or run-locked --hold's last write) by the owner: it says who
    // it is again, so a lock taken before the owner was known is kept too.
    Change change{Change::Kind::put, value};
    change.keep_meta = true;
    change.owned = m_options.record_owner;
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

// ---- the waiters' queue -----------------------------------------------------

int FileStore::wait_dir(bool create) {
  if (!ensure_root(create)) {
    return -1;
  }
  if (!m_wait) {
    m_wait = open_subdir(m_root.get(), k_wait_name, m_path + "/" + k_wait_name, create, m_dir_mode,
                         false);
  }
  return m_wait.get();
}

util::UniqueFd FileStore::make_fifo(const std::string& ticket) {
  if (!ticket_name_ok(ticket)) {
    return {};
  }
  try {
    const int dir = wait_dir(true);
    if (dir < 0 || ::mkfifoat(dir, ticket.c_str(), m_file_mode) != 0) {
      return {};
    }
    // Read and write: holding a writer ourselves, the FIFO never reports a
    // hang-up when a releaser's write end closes; and as long as we hold it
    // open, a releaser's open finds a reader (no ENXIO): we are alive.
    const int fd = ::openat(dir, ticket.c_str(), O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      ::unlinkat(dir, ticket.c_str(), 0);
      return {};
    }
    // mkfifo() honours the umask: the store's bits, so the group's releasers can wake us.
    (void)::fchmod(fd, m_file_mode);
    return util::UniqueFd(fd);
  } catch (const util::Error&) {
    return {};  // no FIFO: this waiter is woken by the key's changes instead
  }
}

void FileStore::remove_fifo(const std::string& ticket) {
  if (ticket_name_ok(ticket) && m_wait) {
    ::unlinkat(m_wait.get(), ticket.c_str(), 0);
  }
}

void FileStore::drop_from_queue(std::string_view queue, const std::vector<std::string>& tickets) {
  std::string encoded;
  mutate(queue, false, [&](const Entry* current) {
    auto waiters = parse_queue(value_of(current));
    const auto before = waiters.size();
    std::erase_if(waiters, [&](const QueuedWaiter& w) {
      return std::find(tickets.begin(), tickets.end(), w.ticket) != tickets.end();
    });
    if (waiters.size() == before) {
      return Change{};
    }
    if (waiters.empty()) {
      return Change{Change::Kind::erase, {}};
    }
    encoded = encode_queue(waiters);
    return Change{Change::Kind::put, encoded};
  });
}

void FileStore::leave_queue_now() {
  if (!m_leaving) {
    return;
  }
  const Leaving leaving = std::move(*m_leaving);
  m_leaving.reset();
  try {
    drop_from_queue(leaving.queue, {leaving.ticket});
  } catch (const util::Error& e) {
    util::trace(std::string("queue not left (the lease lapses): ") + e.what());
  }
}

bool FileStore::reap_fifo(const std::string& ticket) {
  if (!ticket_name_ok(ticket) || wait_dir(false) < 0) {
    return false;
  }
  const int fd =
      ::openat(m_wait.get(), ticket.c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return false;  // its waiter holds it open: alive
  }
  if (errno == ENXIO) {  // nobody holds it open: that waiter died
    ::unlinkat(m_wait.get(), ticket.c_str(), 0);
    return true;
  }
  return errno == ENOENT;
}

void FileStore::wake_first(std::string_view queue) {
  const auto text = get(queue);
  if (!text || wait_dir(false) < 0) {
    return;
  }
  const std::int64_t now = queue_now();
  std::vector<std::string> dead;
  // In arrival order: waiters that died (their FIFO open by nobody) are dropped
  // with their FIFOs, lapsed ones that live are passed over (their next look
  // renews them), and the first live one gets the wake-up.
  for (const auto& waiter : parse_queue(&*text)) {
    if (!ticket_name_ok(waiter.ticket)) {
      continue;
    }
    const int fd = ::openat(m_wait.get(), waiter.ticket.c_str(),
                            O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENXIO) {
        ::unlinkat(m_wait.get(), waiter.ticket.c_str(), 0);
        dead.push_back(waiter.ticket);
        continue;
      }
      if (waiter.lease_until < now) {
        if (errno == ENOENT) {
          dead.push_back(waiter.ticket);
        }
        continue;
      }
      break;  // not watching yet: it looks again by itself once it does
    }
    util::UniqueFd fifo(fd);
    if (waiter.lease_until < now) {
      continue;
    }
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
      const char byte = '1';
      (void)!::write(fd, &byte, 1);  // full (EAGAIN): it has been woken already
    }
    break;
  }
  if (!dead.empty()) {
    drop_from_queue(queue, dead);
  }
}

WaitersQueue::QueuedSet FileStore::set_if_absent(std::string_view key, std::string_view value,
                                                 std::string_view counter, std::string_view queue,
                                                 std::string_view ticket, bool waiting,
                                                 util::Micros lease) {
  // The queue's upkeep, then the SETNX: not one atomic step, and it need not
  // be: only the first waiter passes the gate, and it stays first until it
  // leaves the queue after its SETNX, so nobody passes the gate meanwhile.
  // It leaves at this store's next write (or close): with run-locked, the
  // holder's record, once the job runs; the rewrite of the line is then not
  // between the lock and the job. Its release is a write, so the line is
  // left before the release wakes the next.
  const std::int64_t now = queue_now();
  QueuedSet result;
  // A free lock with nobody in line before us (the common case: no contention)
  // is tried at once, with no write to the queue.
  {
    const auto text = get(queue);
    const auto waiters = parse_queue(text ? &*text : nullptr);
    const auto live = std::find_if(waiters.begin(), waiters.end(), [&](const QueuedWaiter& w) {
      return w.lease_until >= now || w.ticket == ticket;
    });
    if (live == waiters.end() || live->ticket == ticket) {
      if (const auto fence = set_if_absent(key, value, counter).fence) {
        if (live != waiters.end()) {
          m_leaving = Leaving{std::string(queue), std::string(ticket)};
        }
        result.outcome = QueuedSet::Outcome::set;
        result.fence = fence;
        return result;
      }
      if (!waiting) {
        result.outcome = QueuedSet::Outcome::held;
        result.current = get(key);
        return result;
      }
    }
  }

  std::string first;
  bool pruned = false;
  std::string encoded;
  std::vector<std::string> lapsed;
  mutate(queue, waiting, [&](const Entry* current) {
    auto waiters = parse_queue(value_of(current));
    const auto before = waiters.size();
    std::erase_if(waiters, [&](const QueuedWaiter& w) {
      const bool gone = w.lease_until < now && w.ticket != ticket;
      if (gone) {
        lapsed.push_back(w.ticket);
      }
      return gone;
    });
    pruned = waiters.size() != before;
    bool changed = pruned;
    if (waiting) {
      const auto ours = std::find_if(waiters.begin(), waiters.end(),
                                     [&](const QueuedWaiter& w) { return w.ticket == ticket; });
      if (ours == waiters.end()) {
        waiters.push_back({std::string(ticket), now, now + lease.count()});
        changed = true;
      } else if (ours->lease_until - now < lease.count() / 2) {
        // Renewed only once half the lease is gone: a write is a new record
        // and a rename, and a waiter looks twice as often as that.
        ours->lease_until = now + lease.count();
        changed = true;
      }
    }
    if (!waiters.empty()) {
      first = waiters.front().ticket;
    }
    if (!changed) {
      return Change{};
    }
    if (waiters.empty()) {
      return Change{Change::Kind::erase, {}};
    }
    encoded = encode_queue(waiters);
    return Change{Change::Kind::put, encoded};
  });

  for (const auto& gone : lapsed) {
    reap_fifo(gone);  // a dead waiter's FIFO goes with its place in line
  }
  if (!first.empty() && first != ticket) {
    result.outcome = QueuedSet::Outcome::behind;
    result.current = get(key);
    if (pruned && !result.current) {
      wake_first(queue);  // the one we dropped may have taken its wake-up with it
    }
    return result;
  }
  // First in line (or the line is empty), and the lock was held a moment ago:
  // once more, now that our place is written.
  result = unqueued(*this, key, value, counter);
  if (result.outcome == QueuedSet::Outcome::set && !first.empty()) {
    m_leaving = Leaving{std::string(queue), std::string(ticket)};
  }
  return result;
}

bool FileStore::compare_and_delete(std::string_view key, std::string_view expected,
                                   const Fence& fence, std::string_view queue) {
  const bool deleted = compare_and_delete(key, expected, std::optional(fence));
  if (deleted) {
    wake_first(queue);
  }
  return deleted;
}

void FileStore::leave(std::string_view key, std::string_view queue, std::string_view ticket) {
  drop_from_queue(queue, {std::string(ticket)});
  if (!get(key)) {
    wake_first(queue);  // we may have been the one woken
  }
}

std::unique_ptr<Watcher> FileStore::watch(std::string_view key) {
  return make_watcher(key);
}

std::unique_ptr<Watcher> FileStore::watch(std::string_view key, std::string ticket) {
  auto watcher = make_watcher(key);
  watcher->only_for(std::move(ticket));
  return watcher;
}

std::unique_ptr<FileWatcher> FileStore::make_watcher(std::string_view key) {
  // The stripe directory must exist to be watched: the bucket may not exist yet.
  const Stripe stripe = open_stripe(key, true);
  int shared = -1;
  if (!m_inotify_lent) {
    if (!m_inotify) {
      m_inotify.reset(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));  // -1: the watcher decides
    }
    shared = m_inotify.get();
  }
  auto watcher = std::make_unique<FileWatcher>(
      stripe.fd.get(), stripe.bucket.name, stripe.path,
      [this](const std::string& ticket) { return make_fifo(ticket); },
      [this](const std::string& ticket) { remove_fifo(ticket); }, shared,
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

}  // namespace nxlock::store
