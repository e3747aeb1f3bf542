// FileStore: the embedded store, checksummed per-bucket record files under flocked stripe
// directories, replaced by rename (the format and the safety argument: docs/STORE-FORMAT.md).
#include "store/file/file_store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

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
constexpr std::string_view k_marker_content = "nxlock-store 1\n";
constexpr const char* k_data_name = "data";
constexpr const char* k_wait_name = "wait";

struct QueuedWaiter {
  std::string ticket;
  std::int64_t arrival = 0;      // microseconds
  std::int64_t lease_until = 0;  // microseconds
};

// A queue entry's waiters; lines that do not parse are left out (and so
// dropped by the next write): the queue is advice, the lock does not depend on it.
std::vector<QueuedWaiter> parse_queue(const std::string* text) {
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
    if (std::sscanf(line.c_str(), "%63s %lld %lld", ticket, &arrival, &lease) == 3 &&
        ticket[0] == 'q') {
      waiters.push_back({ticket, arrival, lease});
    }
  }
  return waiters;
}

std::string encode_queue(const std::vector<QueuedWaiter>& waiters) {
  std::string text;
  for (const auto& w : waiters) {
    text += w.ticket + " " + std::to_string(w.arrival) + " " + std::to_string(w.lease_until) + "\n";
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
  open_root();

  struct stat st {};
  if (::fstat(m_root.get(), &st) != 0) {
    fail(errno, m_path, "stat");
  }
  if (m_options.require_owner && st.st_uid != ::geteuid()) {
    throw util::Error(ErrorKind::permission, util::escape(m_path),
                      "owned by uid " + std::to_string(st.st_uid) + ", not you");
  }
  // New files and directories inherit the store directory's permission bits, so a
  // private store (0700) stays private and a group store (2770) works for the group.
  m_file_mode = st.st_mode & 0666;
  m_dir_mode = st.st_mode & (S_ISGID | 0777);

  check_marker();
  m_data =
      open_subdir(m_root.get(), k_data_name, m_path + "/" + k_data_name, false, m_dir_mode, false);
}

FileStore::~FileStore() {
  leave_queue_now();
}

std::string FileStore::describe() const {
  return util::escape(m_path);
}

void FileStore::open_root() {
  constexpr int k_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(m_path.c_str(), k_flags);
  if (fd < 0 && errno == ENOENT && m_options.create) {
    // Missing parents get 0700 too: the default store's parents are the user's own.
    for (std::size_t slash = m_path.find('/', 1); slash != std::string::npos;
         slash = m_path.find('/', slash + 1)) {
      const std::string parent = m_path.substr(0, slash);
      if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) {
        fail(errno, parent, "create directory");
      }
    }
    const bool made = ::mkdir(m_path.c_str(), 0700) == 0;
    if (!made && errno != EEXIST) {
      fail(errno, m_path, "create store directory");
    }
    fd = ::open(m_path.c_str(), k_flags);
    // The umask must not leave us a store we cannot write.
    if (fd >= 0 && made && ::fchmod(fd, 0700) != 0) {
      const int err = errno;
      ::close(fd);
      fail(err, m_path, "chmod");
    }
  }
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      throw util::Error(ErrorKind::unavailable, util::escape(m_path), "no nxlock store here");
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
      if (content.starts_with("nxlock-store ")) {
        throw util::Error(ErrorKind::data, util::escape(m_path),
                          "unsupported store format (marker says '" +
                              util::escape(content.substr(0, content.find('\n'))) +
                              "', this nxlock reads '" +
                              std::string(k_marker_content.substr(0, 14)) + "')");
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

const std::string* find_value(const std::vector<Entry>& entries, std::string_view key) {
  const auto it =
      std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.key == key; });
  return it == entries.end() ? nullptr : &it->value;
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
    case Change::Kind::put:
      if (it == entries.end()) {
        entries.push_back({std::string(key), std::string(change.value)});
      } else {
        it->value = change.value;
      }
      return true;
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
  const Change change = decide(find_value(entries, key));
  if (apply(entries, key, change)) {
    save(stripe, entries);
  }
}

void FileStore::mutate_pair(std::string_view key, std::string_view counter, bool may_insert,
                            const DecidePair& decide) {
  leave_queue_now();
  const Stripe stripe = open_stripe(key, may_insert);
  if (!stripe.fd) {
    decide(nullptr, nullptr);  // the key is absent, and nothing can be inserted
    return;
  }
  const Stripe counter_stripe = open_stripe(counter, may_insert);
  const bool one_stripe = counter_stripe.bucket.stripe == stripe.bucket.stripe;
  // Locks in stripe name order: another pair step takes them in the same order,
  // and single-key steps hold one and wait for none, so nobody waits in a cycle.
  // One stripe is locked once: a second flock on another descriptor of the same
  // directory would wait for ourselves.
  if (one_stripe || !counter_stripe.fd) {
    lock_stripe(stripe);
  } else if (stripe.bucket.stripe < counter_stripe.bucket.stripe) {
    lock_stripe(stripe);
    lock_stripe(counter_stripe);
  } else {
    lock_stripe(counter_stripe);
    lock_stripe(stripe);
  }

  if (counter_stripe.fd && counter_stripe.bucket.name == stripe.bucket.name) {
    // One bucket holds both: one record, one write, atomic as any other.
    std::vector<Entry> entries = load(stripe);
    const Changes changes = decide(find_value(entries, key), find_value(entries, counter));
    const bool changed = apply(entries, counter, changes.counter);
    if (apply(entries, key, changes.key) || changed) {
      save(stripe, entries);
    }
    return;
  }
  std::vector<Entry> entries = load(stripe);
  std::vector<Entry> counter_entries;
  if (counter_stripe.fd) {
    counter_entries = load(counter_stripe);
  }
  const Changes changes = decide(find_value(entries, key), find_value(counter_entries, counter));
  // The counter first: a crash between the two writes then leaves a counter
  // that moved without an owner (harmless: tokens need only grow), never an
  // owner whose token the counter does not hold.
  if (changes.counter.kind != Change::Kind::keep && !counter_stripe.fd) {
    throw util::Error(ErrorKind::internal, m_path, "fencing counter's stripe missing");
  }
  if (apply(counter_entries, counter, changes.counter)) {
    save(counter_stripe, counter_entries);
  }
  if (apply(entries, key, changes.key)) {
    save(stripe, entries);
  }
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

bool FileStore::set_if_absent(std::string_view key, std::string_view value) {
  bool inserted = false;
  mutate(key, true, [&](const std::string* current) {
    inserted = current == nullptr;
    return inserted ? Change{Change::Kind::put, value} : Change{};
  });
  return inserted;
}

std::optional<std::string> FileStore::get(std::string_view key) {
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

std::optional<std::string> FileStore::get_and_set(std::string_view key, std::string_view value) {
  std::optional<std::string> old;
  mutate(key, true, [&](const std::string* current) {
    if (current != nullptr) {
      old = *current;
    }
    return Change{Change::Kind::put, value};
  });
  return old;
}

void FileStore::set(std::string_view key, std::string_view value) {
  mutate(key, true, [&](const std::string*) { return Change{Change::Kind::put, value}; });
}

std::size_t FileStore::del(const std::vector<std::string>& keys) {
  // One key at a time, each atomically under its own stripe lock: holding several
  // locks would buy nothing, since get() takes none and may look between two keys.
  std::size_t removed = 0;
  for (const auto& key : keys) {
    mutate(key, false, [&](const std::string* current) {
      if (current == nullptr) {
        return Change{};
      }
      ++removed;
      return Change{Change::Kind::erase, {}};
    });
  }
  return removed;
}

bool FileStore::compare_and_delete(std::string_view key, std::string_view expected) {
  bool deleted = false;
  mutate(key, false, [&](const std::string* current) {
    deleted = current != nullptr && *current == expected;
    return deleted ? Change{Change::Kind::erase, {}} : Change{};
  });
  return deleted;
}

bool FileStore::compare_and_set(std::string_view key, std::string_view expected,
                                std::string_view value) {
  bool replaced = false;
  mutate(key, false, [&](const std::string* current) {
    replaced = current != nullptr && *current == expected;
    return replaced ? Change{Change::Kind::put, value} : Change{};
  });
  return replaced;
}

std::optional<std::int64_t> FileStore::set_if_absent_fenced(std::string_view key,
                                                            std::string_view value,
                                                            std::string_view counter) {
  std::optional<std::int64_t> fence;
  std::string token;
  mutate_pair(key, counter, true, [&](const std::string* current, const std::string* count) {
    const std::int64_t next = next_fence(count, counter);  // a bad counter: nothing written
    if (current != nullptr) {
      return Changes{};
    }
    fence = next;
    token = std::to_string(next);
    return Changes{{Change::Kind::put, value}, {Change::Kind::put, token}};
  });
  return fence;
}

Store::FencedSwap FileStore::get_and_set_fenced(std::string_view key, std::string_view value,
                                                std::string_view counter,
                                                std::int64_t now_seconds) {
  FencedSwap swap;
  std::string token;
  mutate_pair(key, counter, true, [&](const std::string* current, const std::string* count) {
    const std::int64_t next = next_fence(count, counter);
    if (current != nullptr) {
      swap.old = *current;
    }
    if (!getset_owns(swap.old, now_seconds)) {
      return Changes{{Change::Kind::put, value}, {}};
    }
    swap.fence = next;
    token = std::to_string(next);
    return Changes{{Change::Kind::put, value}, {Change::Kind::put, token}};
  });
  return swap;
}

bool FileStore::compare_and_set_fenced(std::string_view key, std::string_view expected,
                                       std::string_view value, std::string_view counter,
                                       std::int64_t fence) {
  bool replaced = false;
  const std::string token = std::to_string(fence);
  mutate_pair(key, counter, false, [&](const std::string* current, const std::string* count) {
    replaced = current != nullptr && *current == expected && count != nullptr && *count == token;
    return replaced ? Changes{{Change::Kind::put, value}, {}} : Changes{};
  });
  return replaced;
}

bool FileStore::compare_and_delete_fenced(std::string_view key, std::string_view expected,
                                          std::string_view counter, std::int64_t fence) {
  bool deleted = false;
  const std::string token = std::to_string(fence);
  mutate_pair(key, counter, false, [&](const std::string* current, const std::string* count) {
    deleted = current != nullptr && *current == expected && count != nullptr && *count == token;
    return deleted ? Changes{{Change::Kind::erase, {}}, {}} : Changes{};
  });
  return deleted;
}

util::Micros FileStore::now() {
  return util::wall_now();
}

// ---- the waiters' queue -----------------------------------------------------

int FileStore::wait_dir(bool create) {
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

void FileStore::drop_from_queue(std::string_view queue, std::string_view ticket) {
  std::string encoded;
  mutate(queue, false, [&](const std::string* current) {
    auto waiters = parse_queue(current);
    const auto before = waiters.size();
    std::erase_if(waiters, [&](const QueuedWaiter& w) { return w.ticket == ticket; });
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
    drop_from_queue(leaving.queue, leaving.ticket);
  } catch (const util::Error& e) {
    util::trace(std::string("queue not left (the lease lapses): ") + e.what());
  }
}

void FileStore::wake_first(std::string_view queue) {
  // Bounded: each round drops one dead waiter.
  for (int round = 0; round < 64; ++round) {
    const auto text = get(queue);
    if (!text) {
      return;
    }
    const std::int64_t now = util::wall_now().count();
    const auto waiters = parse_queue(&*text);
    const auto first = std::find_if(waiters.begin(), waiters.end(),
                                    [&](const QueuedWaiter& w) { return w.lease_until >= now; });
    if (first == waiters.end() || !ticket_name_ok(first->ticket) || wait_dir(false) < 0) {
      return;
    }
    const int fd = ::openat(m_wait.get(), first->ticket.c_str(),
                            O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENXIO) {  // nobody holds it open: that waiter died
        ::unlinkat(m_wait.get(), first->ticket.c_str(), 0);
        drop_from_queue(queue, first->ticket);
        continue;
      }
      return;  // not watching yet: it looks again by itself once it does
    }
    util::UniqueFd fifo(fd);
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
      const char byte = '1';
      (void)!::write(fd, &byte, 1);  // full (EAGAIN): it has been woken already
    }
    return;
  }
}

Store::QueuedSet FileStore::set_if_absent_queued(std::string_view key, std::string_view value,
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
  const std::int64_t now = util::wall_now().count();
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
      if (const auto fence = set_if_absent_fenced(key, value, counter)) {
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
  mutate(queue, waiting, [&](const std::string* current) {
    auto waiters = parse_queue(current);
    const auto before = waiters.size();
    std::erase_if(waiters,
                  [&](const QueuedWaiter& w) { return w.lease_until < now && w.ticket != ticket; });
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
  result = set_if_absent_unqueued(key, value, counter);
  if (result.outcome == QueuedSet::Outcome::set && !first.empty()) {
    m_leaving = Leaving{std::string(queue), std::string(ticket)};
  }
  return result;
}

bool FileStore::compare_and_delete_queued(std::string_view key, std::string_view expected,
                                          std::string_view counter, std::int64_t fence,
                                          std::string_view queue) {
  const bool deleted = compare_and_delete_fenced(key, expected, counter, fence);
  if (deleted) {
    wake_first(queue);
  }
  return deleted;
}

void FileStore::leave_queue(std::string_view key, std::string_view queue, std::string_view ticket) {
  drop_from_queue(queue, ticket);
  if (!get(key)) {
    wake_first(queue);  // we may have been the one woken
  }
}

std::unique_ptr<Watcher> FileStore::watch(std::string_view key) {
  return make_watcher(key);
}

std::unique_ptr<Watcher> FileStore::watch_queued(std::string_view key, std::string ticket) {
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
