// The embedded store's diagnosis: path, owner, mode, free space, file system, records. Reads only.
#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "store/diagnosis.hpp"
#include "store/file/access_advice.hpp"
#include "store/file/store_directory.hpp"
#include "util/escape.hpp"

namespace nxlock::store {

namespace {

// docs/STORE-FORMAT.md, "Layout".
constexpr std::string_view k_marker_prefix = "nxlock-store ";
constexpr int k_format = 2;

// Below this much free space, a warning: a record is a few hundred bytes, but
// a file system that fills up fails every lock.
constexpr unsigned long long k_low_space = 64ULL << 20;

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string user_name_of(uid_t uid) {
  const passwd* entry = getpwuid(uid);
  return entry != nullptr ? entry->pw_name : std::to_string(uid);
}

std::string group_name(gid_t gid) {
  const group* entry = getgrgid(gid);
  return entry != nullptr ? entry->gr_name : std::to_string(gid);
}

// "12.3 GiB", "512 MiB", "900 B".
std::string size_text(unsigned long long bytes) {
  static constexpr const char* k_units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(k_units)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, k_units[unit]);
  return text;
}

// What the store's marker says: the path check of a store that exists.
Check marker_check(const std::string& path, const std::string& shown) {
  std::ifstream file(path + "/" + StoreDirectory::k_marker_name, std::ios::binary);
  if (!file) {
    DIR* dir = opendir(path.c_str());
    bool empty = true;
    if (dir != nullptr) {
      while (const dirent* entry = readdir(dir)) {
        const std::string_view name = entry->d_name;
        empty = empty && (name == "." || name == "..");
      }
      closedir(dir);
    }
    if (empty) {
      return Check::ok("path", shown + ": an empty directory; the first lock makes it a store");
    }
    return Check::fail(
        "path", shown + ": not an nxlock store (no " + StoreDirectory::k_marker_name + " marker)",
        "point the URL at an empty or new directory: nxlock never writes into a foreign one");
  }
  const std::string content((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
  int format = 0;
  if (content.starts_with(k_marker_prefix) && content.ends_with('\n') &&
      std::sscanf(content.c_str() + k_marker_prefix.size(), "%d", &format) == 1 && format >= 1 &&
      format <= k_format) {
    return Check::ok("path", shown + ": an nxlock store (format " + std::to_string(format) + ")");
  }
  return Check::fail("path",
                     shown + ": an unknown store format (" + util::escape(content, 40) + ")",
                     "a newer nxlock made it, or it is damaged: use that nxlock, or another path");
}

Check owner_check(const struct stat& status, const Url& url, bool usable) {
  const std::string owner = user_name_of(status.st_uid) + ":" + group_name(status.st_gid);
  if (status.st_uid == geteuid()) {
    return Check::ok("owner", owner);
  }
  if (url.is_default_store) {
    Check refused =
        Check::fail("owner", owner + ", not " + user_name_of(geteuid()),
                    "the default store must be your own: remove it, or set NXLOCK_STORE");
    refused.stop = util::ErrorKind::permission;
    return refused;
  }
  if (!usable) {
    // Not shared with this user after all: the path check said why.
    return Check::skip("owner", owner + ": whether " + user_name_of(geteuid()) +
                                    " may share it was not checked, as it cannot use the store");
  }
  return Check::ok("owner", owner + " (shared with " + user_name_of(geteuid()) + ")");
}

Check mode_check(const struct stat& status, const Url& url, const std::string& shown) {
  const mode_t mode = status.st_mode;
  const std::string detail = mode_text(mode);
  if ((mode & S_IWOTH) != 0) {
    return Check::warn(
        "mode", detail + ": any user can remove or plant records",
        "chmod o-w " + shown + " (share it with a group instead: chgrp GROUP; chmod 2770)");
  }
  if (url.is_default_store && (mode & 077) != 0) {
    return Check::warn("mode", detail + ": the default store is meant to be private",
                       "chmod 700 " + shown);
  }
  return Check::ok("mode", detail);
}

Check space_check(const std::string& measured) {
  struct statvfs fs {};
  if (statvfs(measured.c_str(), &fs) != 0) {
    return Check::warn("free space", std::string("cannot tell: ") + std::strerror(errno),
                       "check the path's file system by hand (df)");
  }
  const unsigned long long free_bytes =
      static_cast<unsigned long long>(fs.f_bavail) * static_cast<unsigned long long>(fs.f_frsize);
  std::string detail = size_text(free_bytes);
  if (fs.f_files != 0) {
    detail += ", " + std::to_string(fs.f_favail) + " inodes";
  }
  if (free_bytes == 0 || (fs.f_files != 0 && fs.f_favail == 0)) {
    return Check::fail("free space", detail + ": every lock would fail to be written",
                       "free some space on that file system");
  }
  if (free_bytes < k_low_space) {
    return Check::warn("free space", detail + ": nearly full",
                       "free some space: locks fail once it is full");
  }
  return Check::ok("free space", detail);
}

Check file_system_check(const std::string& measured) {
  struct statfs fs {};
  if (statfs(measured.c_str(), &fs) != 0) {
    return Check::warn("file system", std::string("cannot tell: ") + std::strerror(errno),
                       "make sure it is a local file system (df -T)");
  }
  const FileSystemKind kind = classify_file_system(static_cast<long long>(fs.f_type));
  if (kind.network) {
    return Check::warn("file system", kind.name + ", a network file system",
                       "flock and rename may not be atomic across hosts there: keep the store on a "
                       "local disk, and lock across hosts with Redis");
  }
  return Check::ok("file system", kind.name);
}

// The number of records in STORE/data/XY/, and of temporary files that
// killed writers left (the next write in their stripe removes them).
Check records_check(const std::string& path) {
  std::size_t records = 0;
  std::size_t leftovers = 0;
  const std::string data = path + "/data";
  // A directory that cannot be read makes the count unknown, not zero.
  const auto unreadable = [](const std::string& directory) {
    return Check::skip("records", "not counted: " + util::escape(directory) + ": " +
                                      std::strerror(errno));
  };
  DIR* stripes = opendir(data.c_str());
  if (stripes == nullptr && errno != ENOENT) {
    return unreadable(data);
  }
  if (stripes != nullptr) {
    while (const dirent* stripe = readdir(stripes)) {
      if (stripe->d_name[0] == '.') {
        continue;
      }
      const std::string stripe_path = data + "/" + stripe->d_name;
      DIR* files = opendir(stripe_path.c_str());
      if (files == nullptr) {
        if (errno == ENOENT) {
          continue;  // emptied and removed meanwhile
        }
        Check skipped = unreadable(stripe_path);
        closedir(stripes);
        return skipped;
      }
      while (const dirent* file = readdir(files)) {
        const std::string_view name = file->d_name;
        if (name == "." || name == "..") {
          continue;
        }
        ++(name.starts_with('.') ? leftovers : records);
      }
      closedir(files);
    }
    closedir(stripes);
  }
  std::string detail = std::to_string(records) + " in the store";
  if (leftovers > 0) {
    detail += ", " + std::to_string(leftovers) + " unfinished writes (removed by the next write)";
  }
  return Check::ok("records", detail);
}

}  // namespace

FileSystemKind classify_file_system(long long magic) {
  struct Known {
    long long magic;
    const char* name;
    bool network;
  };
  // From linux/magic.h and statfs(2). FUSE counts as shared: sshfs, GlusterFS
  // and s3fs are FUSE file systems, and a local one cannot be told apart.
  static constexpr Known k_known[] = {
      {0xEF53, "ext4", false},
      {0x58465342, "xfs", false},
      {0x9123683E, "btrfs", false},
      {0x01021994, "tmpfs", false},
      {0x794C7630, "overlayfs", false},
      {0x2FC12FC1, "zfs", false},
      {0xF2F52010, "f2fs", false},
      {0x858458F6, "ramfs", false},
      {0x3153464A, "jfs", false},
      {0x52654973, "reiserfs", false},
      {0xCA451A4E, "bcachefs", false},
      {0x6969, "nfs", true},
      {0x517B, "smb", true},
      {0xFE534D42, "smb2", true},
      {0xFF534D42, "cifs", true},
      {0x65735546, "fuse", true},
      {0x00C36400, "ceph", true},
      {0x5346414F, "afs", true},
      {0x01021997, "9p", true},
      {0x73757245, "coda", true},
      {0x564C, "ncp", true},
      {0x01161970, "gfs2", true},
      {0x7461636F, "ocfs2", true},
      {0x0BD00BD0, "lustre", true},
      {0x786F4256, "vboxsf", true},
  };
  // f_type is a signed word on some ABIs: compare its low 32 bits.
  const long long low = magic & 0xFFFFFFFFLL;
  for (const Known& known : k_known) {
    if (known.magic == low) {
      return {known.name, known.network};
    }
  }
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(low));
  return {text, false};
}

Diagnosis diagnose_file(const Url& url) {
  Diagnosis diagnosis;
  diagnosis.backend = url.redacted;
  const std::string& path = url.path;
  const std::string shown = util::escape(path);
  auto& checks = diagnosis.checks;
  // Free space and the file system are measured where the records are, or
  // would be made.
  std::string measured = path;
  struct stat status {};
  if (lstat(path.c_str(), &status) != 0) {
    const int error = errno;
    if (error != ENOENT) {
      Check failed = Check::fail("path", shown + ": " + std::strerror(error),
                                 "run as a user who may read it, or give another path");
      if (error == EACCES || error == EPERM) {
        failed.stop = util::ErrorKind::permission;
      }
      checks.push_back(std::move(failed));
      return diagnosis;
    }
    measured = existing_parent(path);
    const std::string how = url.is_default_store ? "mode 0700" : "as the umask says";
    if (access(measured.c_str(), W_OK | X_OK) != 0) {
      Check refused =
          Check::fail("path",
                      shown + ": does not exist, and " + util::escape(measured) +
                          " is not writable by " + user_name_of(geteuid()),
                      "create it for this user, or give a path under a writable directory");
      refused.stop = util::ErrorKind::permission;
      checks.push_back(std::move(refused));
    } else {
      checks.push_back(Check::ok(
          "path", shown + ": does not exist yet; the first lock creates it (" + how + ")"));
    }
  } else if (S_ISLNK(status.st_mode)) {
    checks.push_back(Check::fail("path", shown + ": a symbolic link, which nxlock does not follow",
                                 "give the directory it points to as the path"));
    return diagnosis;
  } else if (!S_ISDIR(status.st_mode)) {
    checks.push_back(Check::fail("path", shown + ": not a directory",
                                 "give a directory's path (or one that does not exist yet)"));
    return diagnosis;
  } else {
    const bool usable = access(path.c_str(), R_OK | W_OK | X_OK) == 0;
    if (!usable) {
      Check refused =
          Check::fail("path", shown + ": not readable and writable by " + user_name_of(geteuid()),
                      "run as its owner, or give this user access (chgrp, chmod g+rwx)");
      refused.stop = util::ErrorKind::permission;
      checks.push_back(std::move(refused));
    } else {
      checks.push_back(marker_check(path, shown));
    }
    checks.push_back(owner_check(status, url, usable));
    checks.push_back(mode_check(status, url, shown));
  }
  checks.push_back(space_check(measured));
  checks.push_back(file_system_check(measured));
  if (measured == path) {
    checks.push_back(records_check(path));
  }
  return diagnosis;
}

}  // namespace nxlock::store
