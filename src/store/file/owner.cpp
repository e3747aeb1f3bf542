// Lock owners: a process named by pid, start time and boot id (util/process_identity).
#include "store/file/owner.hpp"

#include <unistd.h>

#include "util/process_identity.hpp"

namespace nxlock::store::owner {

const std::optional<record::Owner>& self() {
  // Read once per process (a forked child is another process: read again).
  static std::optional<record::Owner> me;
  static std::int64_t read_for = 0;
  const auto pid = static_cast<std::int64_t>(::getpid());
  if (read_for != pid) {
    read_for = pid;
    me.reset();
    if (auto process = util::identify_process(pid)) {
      me = record::Owner{process->pid, process->start, std::move(process->boot)};
    }
  }
  return me;
}

const std::string& this_boot() {
  return util::this_boot();
}

bool alive(const record::Owner& owner) {
  return util::still_running({owner.pid, owner.start, owner.boot});
}

bool keeps_held(const record::Entry& entry) {
  return entry.fence && entry.owner && entry.owner != self() && alive(*entry.owner);
}

}  // namespace nxlock::store::owner
