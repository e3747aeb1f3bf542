// A key's bucket: read whole without a lock, or read, decided on and replaced by rename
// under its stripe's flock (docs/STORE-FORMAT.md, "Why it is atomic").
#include "store/file/bucket.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "store/file/owner.hpp"
#include "store/file/posix.hpp"
#include "store/file/store_directory.hpp"
#include "store/file/sweep.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"

namespace nxlock::store {

namespace {

using posix::fail;
using record::Entry;

// A corrupt record, named with the key it was read for, and what removing it
// costs: a bucket holds the keys of one 64-bit hash, in practice that key alone.
[[noreturn]] void corrupt(const Stripe& stripe, const std::string& why) {
  std::string reason = why;
  if (!stripe.key.empty()) {
    reason += " for key '" + util::escape(stripe.key) +
              "'; removing this file drops that key only (a lock there is then free)";
  }
  throw util::Error(util::ErrorKind::data, util::escape(stripe.record_path), reason);
}

// The bucket's bytes, or nullopt if it does not exist. Never follows a symlink
// and never blocks on a FIFO planted in its place.
std::optional<std::string> read_record(const Stripe& stripe) {
  const int fd = ::openat(stripe.fd.get(), stripe.bucket.name.c_str(),
                          O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) {
      return std::nullopt;
    }
    fail(errno, stripe.record_path, "open");
  }
  util::UniqueFd file(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    fail(errno, stripe.record_path, "stat");
  }
  if (!S_ISREG(st.st_mode)) {
    corrupt(stripe, "corrupt record (not a regular file)");
  }
  return posix::read_all(fd, stripe.record_path, static_cast<std::size_t>(st.st_size));
}

void lock_stripe(const Stripe& stripe, int how = LOCK_EX) {
  // The stripe lock makes read-decide-write one atomic step against every other
  // writer of the 1/256 of keys in this stripe. Held for microseconds; released
  // by closing `stripe`, so also when this process dies.
  while (::flock(stripe.fd.get(), how) != 0) {
    if (errno != EINTR) {
      fail(errno, stripe.path, "lock");
    }
  }
}

// Applies `change` to `key` in `entries`; true if they changed.
bool apply(std::vector<Entry>& entries, std::string_view key, const Change& change) {
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

const Entry* find_entry(const std::vector<Entry>& entries, std::string_view key) {
  const auto it =
      std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.key == key; });
  return it == entries.end() ? nullptr : &*it;
}

}  // namespace

Stripe Buckets::open(std::string_view key, bool create) {
  Stripe stripe{record::bucket_of(key), {}, {}, {}, std::string(key)};
  stripe.path = m_directory.path() + "/" + StoreDirectory::k_data_name + "/" + stripe.bucket.stripe;
  stripe.record_path = stripe.path + "/" + stripe.bucket.name;
  const int data = m_directory.data_dir(create);
  if (data >= 0) {
    stripe.fd = posix::open_subdir(data, stripe.bucket.stripe.c_str(), stripe.path, create,
                                   m_directory.dir_mode(), m_directory.durable());
  }
  return stripe;
}

std::vector<Entry> Buckets::read(std::string_view key) {
  const Stripe stripe = open(key, false);
  return stripe.fd ? load(stripe) : std::vector<Entry>{};
}

void Buckets::update(std::string_view key, bool may_insert, const Decide& decide) {
  const Stripe stripe = open(key, may_insert);
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
    sweep_abandoned(*this, stripe);
  }
}

std::pair<std::vector<Entry>, std::vector<Entry>> Buckets::read_pair(std::string_view first,
                                                                     std::string_view second) {
  const Stripe a = open(first, false);
  const Stripe b = open(second, false);
  const bool one_stripe = a.bucket.stripe == b.bucket.stripe;
  const Stripe& low = a.bucket.stripe < b.bucket.stripe ? a : b;
  const Stripe& high = &low == &a ? b : a;
  if (low.fd) {
    lock_stripe(low, LOCK_SH);
  }
  if (!one_stripe && high.fd) {
    lock_stripe(high, LOCK_SH);
  }
  return {a.fd ? load(a) : std::vector<Entry>{}, b.fd ? load(b) : std::vector<Entry>{}};
}

void Buckets::update_pair(std::string_view first, std::string_view second, bool second_first,
                          const DecidePair& decide) {
  const Stripe a = open(first, true);
  const Stripe b = open(second, true);
  // A flock belongs to an open file description: one stripe locked through
  // two descriptors would wait on itself.
  const bool one_stripe = a.bucket.stripe == b.bucket.stripe;
  const Stripe& low = a.bucket.stripe < b.bucket.stripe ? a : b;
  lock_stripe(low);
  if (!one_stripe) {
    lock_stripe(&low == &a ? b : a);
  }
  if (one_stripe && a.bucket.name == b.bucket.name) {
    std::vector<Entry> entries = load(a);
    const auto [change_a, change_b] =
        decide(find_entry(entries, first), find_entry(entries, second));
    const bool changed_a = apply(entries, first, change_a);
    if (apply(entries, second, change_b) || changed_a) {
      save(a, entries);
    }
    return;
  }
  std::vector<Entry> entries_a = load(a);
  std::vector<Entry> entries_b = load(b);
  const auto changes = decide(find_entry(entries_a, first), find_entry(entries_b, second));
  const auto write_a = [&] {
    if (apply(entries_a, first, changes.first)) {
      save(a, entries_a);
    }
  };
  const auto write_b = [&] {
    if (apply(entries_b, second, changes.second)) {
      save(b, entries_b);
    }
  };
  if (second_first) {
    write_b();
    write_a();
  } else {
    write_a();
    write_b();
  }
}

std::vector<Entry> Buckets::load(const Stripe& stripe) {
  const auto bytes = read_record(stripe);
  if (!bytes) {
    return {};
  }
  try {
    return record::parse(*bytes, stripe.bucket.name, stripe.record_path);
  } catch (const util::Error& e) {
    corrupt(stripe, e.reason());
  }
}

void Buckets::save(const Stripe& stripe, const std::vector<Entry>& entries) {
  if (entries.empty()) {
    remove_record(stripe);
  } else {
    write_record(stripe, record::encode(entries));
  }
}

void Buckets::write_record(const Stripe& stripe, std::string_view bytes) {
  const int stripe_fd = stripe.fd.get();
  const std::string& name = stripe.bucket.name;
  // A fixed temporary name is safe: only the holder of the stripe lock writes it.
  const std::string temp = "." + name + ".tmp";
  const std::string temp_path = stripe.path + "/" + temp;
  util::UniqueFd file =
      posix::create_exclusive(stripe_fd, temp, temp_path, m_directory.file_mode());
  try {
    posix::write_all(file.get(), bytes, temp_path);
    if (m_directory.durable()) {
      posix::sync_fd(file.get(), temp_path);
    }
    posix::close_written(std::move(file), temp_path);
    // The commit point: readers see the old bucket or the new one, never a mix,
    // and a crash before this line leaves the old one in place.
    if (::renameat(stripe_fd, temp.c_str(), stripe_fd, name.c_str()) != 0) {
      fail(errno, stripe.record_path, "rename");
    }
  } catch (...) {
    ::unlinkat(stripe_fd, temp.c_str(), 0);
    throw;
  }
  if (m_directory.durable()) {
    posix::sync_fd(stripe_fd, stripe.path);
  }
}

void Buckets::remove_record(const Stripe& stripe) {
  if (::unlinkat(stripe.fd.get(), stripe.bucket.name.c_str(), 0) != 0) {
    fail(errno, stripe.record_path, "remove");
  }
  if (m_directory.durable()) {
    posix::sync_fd(stripe.fd.get(), stripe.path);
  }
}

}  // namespace nxlock::store
