// FileStore: the embedded store, checksummed per-bucket record files under flocked stripe
// directories, replaced by rename (the format and the safety argument: docs/STORE-FORMAT.md).
#include "store/file_store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "store/file_record.hpp"
#include "util/crc32c.hpp"
#include "util/error.hpp"

namespace nxlock::store {

namespace {

using util::ErrorKind;

constexpr const char* k_marker_name = "nxlock-store";
constexpr std::string_view k_marker_content = "nxlock-store 1\n";
constexpr const char* k_data_name = "data";

constexpr std::string_view k_record_magic = "NXLR";
constexpr std::uint8_t k_record_version = 1;
constexpr std::size_t k_header_size = 12;  // magic, version, 3 reserved bytes, entry count
constexpr std::size_t k_checksum_size = 4;

// Without inotify, waiters look again this often.
constexpr util::Micros k_poll_slice{200'000};

// ---- errors ----------------------------------------------------------------

// The outcome class of a failed system call, as the user should see it.
ErrorKind kind_of(int err) {
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
      return ErrorKind::permission;
    case ELOOP:    // O_NOFOLLOW met a symlink where the store keeps its own files
    case ENOTDIR:  // something that is not a directory where one should be
    case EISDIR:
      return ErrorKind::data;
    case ENOSPC:
    case EDQUOT:
    case EIO:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return ErrorKind::unavailable;
    default:
      return ErrorKind::internal;
  }
}

[[noreturn]] void fail(int err, const std::string& path, const std::string& action) {
  // With O_NOFOLLOW, ELOOP means the last component is a symlink: say so plainly.
  const std::string why = err == ELOOP ? "is a symbolic link (not followed)" : std::strerror(err);
  throw util::Error(kind_of(err), path, action + ": " + why);
}

[[noreturn]] void corrupt(const std::string& path, const std::string& which) {
  throw util::Error(ErrorKind::data, path, "corrupt record (" + which + ")");
}

// ---- small file helpers ----------------------------------------------------

// Reads to the end of the file, or up to `size` bytes when the size is known: our
// files are never changed in place (they are replaced by rename), so stopping
// there saves the read() that would only report the end.
std::string read_all(int fd, const std::string& path, std::size_t size = SIZE_MAX) {
  std::string bytes;
  char buffer[65536];
  while (bytes.size() < size) {
    const ssize_t n = ::read(fd, buffer, std::min(sizeof buffer, size - bytes.size()));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      fail(errno, path, "read");
    }
    if (n == 0) {
      return bytes;
    }
    bytes.append(buffer, static_cast<std::size_t>(n));
  }
  return bytes;
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      fail(errno, path, "write");
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void sync_fd(int fd, const std::string& path) {
  if (::fsync(fd) != 0) {
    fail(errno, path, "fsync");
  }
}

// Closes a file we wrote, reporting a late write error (NFS reports them here).
void close_written(util::UniqueFd fd, const std::string& path) {
  if (::close(fd.release()) != 0 && errno != EINTR) {
    fail(errno, path, "close");
  }
}

// Opens directory `name` in `parent` without following a symlink. When it is
// missing: returns an invalid fd, or with `create` makes it with exactly `mode`.
util::UniqueFd open_subdir(int parent, const char* name, const std::string& path, bool create,
                           mode_t mode, bool durable) {
  bool made = false;
  bool tried_mkdir = false;
  for (;;) {
    const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      util::UniqueFd dir(fd);
      if (made) {
        // mkdirat() honours the umask; set the bits exactly so a group-shared store
        // stays writable by its group.
        if (::fchmod(fd, mode) != 0) {
          fail(errno, path, "chmod");
        }
        if (durable) {
          sync_fd(parent, path);
        }
      }
      return dir;
    }
    if (errno != ENOENT || tried_mkdir) {
      fail(errno, path, "open directory");
    }
    if (!create) {
      return {};
    }
    tried_mkdir = true;
    if (::mkdirat(parent, name, mode) == 0) {
      made = true;
    } else if (errno != EEXIST) {  // EEXIST: another process made it first
      fail(errno, path, "create directory");
    }
  }
}

// Creates `name` in `dir` for writing, with exactly `mode`. O_EXCL: never writes
// through a file (or a link to one) that is already there.
util::UniqueFd create_exclusive(int dir, const std::string& name, const std::string& path,
                                mode_t mode) {
  for (int attempt = 0;; ++attempt) {
    const int fd =
        ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) {
      util::UniqueFd file(fd);
      // Like mkdirat(), open() honours the umask: set the store's bits exactly.
      if (::fchmod(fd, mode) != 0) {
        fail(errno, path, "chmod");
      }
      return file;
    }
    if (errno != EEXIST || attempt > 0) {
      fail(errno, path, "create");
    }
    // A temporary file left by a writer that died mid-write. Whoever may write
    // this name holds the lock we hold now, so it is stale: remove it.
    if (::unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) {
      fail(errno, path, "remove stale temporary file");
    }
  }
}

// ---- records ---------------------------------------------------------------

using record::Entry;

// Where a key lives: STORE/data/<stripe>/<name>, name = FNV-1a 64 of the key in hex.
struct BucketName {
  std::string stripe;  // the first two hex digits: one of 256 lock stripes
  std::string name;
};

std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3;
  }
  return hash;
}

std::string bucket_file_name(std::string_view key) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::uint64_t hash = fnv1a64(key);
  std::string name(16, '0');
  for (int i = 15; i >= 0; --i) {
    name[static_cast<std::size_t>(i)] = k_digits[hash & 0xF];
    hash >>= 4;
  }
  return name;
}

BucketName bucket_of(std::string_view key) {
  std::string name = bucket_file_name(key);
  return {name.substr(0, 2), std::move(name)};
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8) {
    out.push_back(static_cast<char>((v >> shift) & 0xFF));
  }
}

std::uint32_t get_u32(std::string_view bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  }
  return v;
}

std::uint32_t length_u32(std::size_t size, std::string_view what) {
  if (size > UINT32_MAX) {
    throw util::Error(ErrorKind::usage, std::string(what),
                      "too large for the embedded store (at most 4 GiB)");
  }
  return static_cast<std::uint32_t>(size);
}

std::string encode_record(const std::vector<Entry>& entries) {
  std::string out;
  out.append(k_record_magic);
  out.push_back(static_cast<char>(k_record_version));
  out.append(3, '\0');
  put_u32(out, length_u32(entries.size(), "bucket"));
  for (const auto& entry : entries) {
    put_u32(out, length_u32(entry.key.size(), "key"));
    out.append(entry.key);
    put_u32(out, length_u32(entry.value.size(), "value"));
    out.append(entry.value);
  }
  put_u32(out, util::crc32c(out));
  return out;
}

// Parses a record that must hold exactly what encode_record() writes for bucket
// `name`; anything else throws "corrupt record (<which check>)" naming `path`.
std::vector<Entry> parse_record(std::string_view bytes, const std::string& name,
                                const std::string& path) {
  if (bytes.size() < k_header_size + k_checksum_size) {
    corrupt(path, "shorter than a header");
  }
  if (bytes.substr(0, 4) != k_record_magic) {
    corrupt(path, "bad magic");
  }
  if (static_cast<unsigned char>(bytes[4]) != k_record_version) {
    corrupt(path, "unknown version " + std::to_string(static_cast<unsigned char>(bytes[4])));
  }
  if (bytes[5] != '\0' || bytes[6] != '\0' || bytes[7] != '\0') {
    corrupt(path, "nonzero reserved bytes");
  }
  const std::string_view body = bytes.substr(0, bytes.size() - k_checksum_size);
  if (util::crc32c(body) != get_u32(bytes, body.size())) {
    corrupt(path, "checksum mismatch");
  }
  const std::uint32_t count = get_u32(bytes, 8);
  if (count == 0) {
    corrupt(path, "no entries");
  }

  std::size_t at = k_header_size;
  // Reads one length-prefixed field, refusing lengths that overrun the body.
  auto field = [&](std::uint32_t index) {
    if (body.size() - at < 4 || body.size() - at - 4 < get_u32(body, at)) {
      corrupt(path, "entry " + std::to_string(index) + " overruns the record");
    }
    const std::size_t length = get_u32(body, at);
    const std::string_view value = body.substr(at + 4, length);
    at += 4 + length;
    return std::string(value);
  };
  std::vector<Entry> entries;
  // Each entry takes at least 8 bytes: never trust `count` for a huge reservation.
  entries.reserve(std::min<std::size_t>(count, body.size() / 8));
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string key = field(i);
    std::string value = field(i);
    if (bucket_file_name(key) != name) {
      corrupt(path, "entry " + std::to_string(i) + " does not belong in this bucket");
    }
    for (const auto& earlier : entries) {
      if (earlier.key == key) {
        corrupt(path, "duplicate key");
      }
    }
    entries.push_back({std::move(key), std::move(value)});
  }
  if (at != body.size()) {
    corrupt(path, "trailing bytes");
  }
  return entries;
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
    throw util::Error(ErrorKind::data, path, "corrupt record (not a regular file)");
  }
  return read_all(fd, path, static_cast<std::size_t>(st.st_size));
}

// ---- watching --------------------------------------------------------------

// Waits for the bucket file of one key to be replaced or removed, with inotify on
// its stripe directory; without inotify, by sleeping in short slices.
class FileWatcher final : public Watcher {
 public:
  FileWatcher(int stripe_fd, std::string name, const std::string& stripe_path)
      : m_name(std::move(name)), m_path(stripe_path) {
    const int fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd < 0) {
      if (errno == ENOSYS || errno == EMFILE || errno == ENFILE || errno == ENOMEM) {
        return;  // no inotify here (or the per-user limit is reached): poll instead
      }
      fail(errno, stripe_path, "inotify_init1");
    }
    m_inotify.reset(fd);
    // A rename onto the bucket name (every write) or its unlink (the last entry
    // removed); IN_CREATE for writers that create it in place; the *_SELF events
    // because nothing can be seen once the directory itself goes away.
    const std::uint32_t mask =
        IN_MOVED_TO | IN_DELETE | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
    // Watch the directory we opened with O_NOFOLLOW, not whatever the path names now.
    const std::string via_proc = "/proc/self/fd/" + std::to_string(stripe_fd);
    int wd = ::inotify_add_watch(fd, via_proc.c_str(), mask);
    if (wd < 0 && errno == ENOENT) {  // no /proc: the path, not following a last symlink
      wd = ::inotify_add_watch(fd, stripe_path.c_str(), mask | IN_DONT_FOLLOW);
    }
    if (wd < 0) {
      if (errno == ENOSPC) {  // the per-user watch limit: poll instead
        m_inotify.reset();
        return;
      }
      fail(errno, stripe_path, "inotify_add_watch");
    }
  }

  WaitResult wait(util::Micros timeout, int interrupt_fd) override {
    const util::Micros start = util::mono_now();
    timeout = std::max(timeout, util::Micros(0));
    const util::Micros deadline =
        timeout >= util::Micros::max() - start ? util::Micros::max() : start + timeout;
    for (;;) {
      const util::Micros remaining = std::max(deadline - util::mono_now(), util::Micros(0));
      const util::Micros slice = m_inotify ? remaining : std::min(remaining, k_poll_slice);
      pollfd fds[2] = {};
      nfds_t count = 0;
      if (interrupt_fd >= 0) {
        fds[count++] = {interrupt_fd, POLLIN, 0};
      }
      if (m_inotify) {
        fds[count++] = {m_inotify.get(), POLLIN, 0};
      }
      const int ready = ::poll(fds, count, to_poll_ms(slice));
      if (ready < 0) {
        if (errno == EINTR) {
          continue;  // a signal: its handler may have written interrupt_fd, look again
        }
        fail(errno, m_path, "poll");
      }
      if (interrupt_fd >= 0 && fds[0].revents != 0) {
        return WaitResult::interrupted;  // left unread: it belongs to the caller
      }
      if (m_inotify && fds[count - 1].revents != 0 && drain_events()) {
        return WaitResult::changed;
      }
      if (ready == 0 || !m_inotify) {
        if (slice < remaining) {
          return WaitResult::changed;  // polling: one slice passed, the caller looks again
        }
        if (util::mono_now() >= deadline) {
          return WaitResult::timed_out;
        }
      }
    }
  }

 private:
  static int to_poll_ms(util::Micros time) {
    // Round up so a wait never wakes a little early and spins.
    const std::int64_t ms = time.count() / 1000 + (time.count() % 1000 != 0 ? 1 : 0);
    return static_cast<int>(std::min<std::int64_t>(ms, INT_MAX));
  }

  // Reads every pending event; true if one concerns our bucket (or we may have
  // missed one). If the watch itself is gone (the directory was removed), later
  // waits poll.
  bool drain_events() {
    bool relevant = false;
    bool watch_gone = false;
    alignas(inotify_event) char buffer[4096];
    for (;;) {
      const ssize_t n = ::read(m_inotify.get(), buffer, sizeof buffer);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        if (errno == EAGAIN) {
          if (watch_gone) {
            m_inotify.reset();
          }
          return relevant;
        }
        fail(errno, m_path, "read inotify events");
      }
      std::size_t at = 0;
      while (at + sizeof(inotify_event) <= static_cast<std::size_t>(n)) {
        inotify_event event{};
        std::memcpy(&event, buffer + at, sizeof event);
        const char* name = buffer + at + sizeof event;
        const std::string_view event_name(name, ::strnlen(name, event.len));
        if ((event.mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) != 0 ||
            event_name == m_name) {
          relevant = true;
        }
        watch_gone = watch_gone || (event.mask & IN_IGNORED) != 0;
        at += sizeof event + event.len;
      }
    }
  }

  std::string m_name;        // the bucket file's name in the watched stripe directory
  std::string m_path;        // the stripe directory, for messages
  util::UniqueFd m_inotify;  // invalid: no inotify, poll in slices
};

}  // namespace

// The record functions, for tests and fuzz targets (store/file_record.hpp).
namespace record {

std::string bucket_file_name(std::string_view key) {
  return store::bucket_file_name(key);
}

std::string encode(const std::vector<Entry>& entries) {
  return store::encode_record(entries);
}

std::vector<Entry> parse(std::string_view bytes, const std::string& name, const std::string& path) {
  return store::parse_record(bytes, name, path);
}

}  // namespace record

// ---- opening ---------------------------------------------------------------

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
    throw util::Error(ErrorKind::permission, m_path,
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

FileStore::~FileStore() = default;

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
      throw util::Error(ErrorKind::unavailable, m_path, "no nxlock store here");
    }
    if (err == ELOOP || err == ENOTDIR) {
      struct stat st {};
      const bool is_link = ::lstat(m_path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
      throw util::Error(ErrorKind::data, m_path,
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
        throw util::Error(ErrorKind::data, m_path,
                          "unsupported store format (marker says '" +
                              content.substr(0, content.find('\n')) + "', this nxlock reads '" +
                              std::string(k_marker_content.substr(0, 14)) + "')");
      }
      throw util::Error(ErrorKind::data, m_path,
                        "not an nxlock store (unexpected nxlock-store marker)");
    }
    if (errno == ELOOP) {
      throw util::Error(ErrorKind::data, m_path,
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
      throw util::Error(ErrorKind::data, m_path,
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

void FileStore::mutate(std::string_view key, bool may_insert, const Decide& decide) {
  const BucketName bucket = bucket_of(key);
  const int data = data_dir(may_insert);
  if (data < 0) {
    decide(nullptr);  // no data directory: the key is absent, and nothing can be inserted
    return;
  }
  const std::string stripe_path = m_path + "/" + k_data_name + "/" + bucket.stripe;
  const std::string record_path = stripe_path + "/" + bucket.name;
  const util::UniqueFd stripe = open_subdir(data, bucket.stripe.c_str(), stripe_path, may_insert,
                                            m_dir_mode, m_options.durable);
  if (!stripe) {
    decide(nullptr);
    return;
  }
  // The stripe lock makes read-decide-write one atomic step against every other
  // writer of the 1/256 of keys in this stripe. Held for microseconds; released
  // by closing `stripe`, so also when this process dies.
  while (::flock(stripe.get(), LOCK_EX) != 0) {
    if (errno != EINTR) {
      fail(errno, stripe_path, "lock");
    }
  }

  std::vector<Entry> entries;
  if (const auto bytes = read_record(stripe.get(), bucket.name, record_path)) {
    entries = parse_record(*bytes, bucket.name, record_path);
  }
  const auto it =
      std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.key == key; });
  const Change change = decide(it == entries.end() ? nullptr : &it->value);
  switch (change.kind) {
    case Change::Kind::keep:
      return;
    case Change::Kind::put:
      if (it == entries.end()) {
        entries.push_back({std::string(key), std::string(change.value)});
      } else {
        it->value = change.value;
      }
      break;
    case Change::Kind::erase:
      if (it == entries.end()) {
        return;
      }
      entries.erase(it);
      break;
  }
  if (entries.empty()) {
    remove_record(stripe.get(), bucket.name, stripe_path);
  } else {
    write_record(stripe.get(), bucket.name, stripe_path, encode_record(entries));
  }
}

void FileStore::write_record(int stripe_fd, const std::string& name, const std::string& stripe_path,
                             std::string_view bytes) {
  // A fixed temporary name is safe: only the holder of the stripe lock writes it.
  const std::string temp = "." + name + ".tmp";
  const std::string temp_path = stripe_path + "/" + temp;
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
      fail(errno, stripe_path + "/" + name, "rename");
    }
  } catch (...) {
    ::unlinkat(stripe_fd, temp.c_str(), 0);
    throw;
  }
  if (m_options.durable) {
    sync_fd(stripe_fd, stripe_path);
  }
}

void FileStore::remove_record(int stripe_fd, const std::string& name,
                              const std::string& stripe_path) {
  if (::unlinkat(stripe_fd, name.c_str(), 0) != 0) {
    fail(errno, stripe_path + "/" + name, "remove");
  }
  if (m_options.durable) {
    sync_fd(stripe_fd, stripe_path);
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
  const BucketName bucket = bucket_of(key);
  const int data = data_dir(false);
  if (data < 0) {
    return std::nullopt;
  }
  const std::string stripe_path = m_path + "/" + k_data_name + "/" + bucket.stripe;
  const std::string record_path = stripe_path + "/" + bucket.name;
  const util::UniqueFd stripe =
      open_subdir(data, bucket.stripe.c_str(), stripe_path, false, m_dir_mode, false);
  if (!stripe) {
    return std::nullopt;
  }
  const auto bytes = read_record(stripe.get(), bucket.name, record_path);
  if (!bytes) {
    return std::nullopt;
  }
  for (auto& entry : parse_record(*bytes, bucket.name, record_path)) {
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

util::Micros FileStore::now() {
  return util::wall_now();
}

std::unique_ptr<Watcher> FileStore::watch(std::string_view key) {
  const BucketName bucket = bucket_of(key);
  const std::string stripe_path = m_path + "/" + k_data_name + "/" + bucket.stripe;
  // The stripe directory must exist to be watched: the bucket may not exist yet.
  const util::UniqueFd stripe = open_subdir(data_dir(true), bucket.stripe.c_str(), stripe_path,
                                            true, m_dir_mode, m_options.durable);
  return std::make_unique<FileWatcher>(stripe.get(), bucket.name, stripe_path);
}

}  // namespace nxlock::store
