// The job's environment: the settings nxlock decides, and the whole of it as the watchdog execs it.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace nxlock::run {

// One variable of the job's environment: set to `value`, or removed (none).
struct EnvSetting {
  std::string name;
  std::optional<std::string> value;
};

// The job's environment: the watchdog's own (the job's settings applied), and
// NXLOCK_JOB_PID, which the job fills in itself between vfork and exec, the
// one place its pid is known. A script re-executed under the lock tells by it
// that it is the lock's own job, not a process that merely inherited the
// environment (a daemon the job left behind, a run started from one).
class JobEnvironment {
 public:
  // Taken from the environment as it is now (before the vfork).
  JobEnvironment();
  JobEnvironment(const JobEnvironment&) = delete;
  JobEnvironment& operator=(const JobEnvironment&) = delete;

  // In the vfork child: no allocation, only writes into our own buffer.
  void set_pid(pid_t pid);
  // For execvpe: NULL-terminated.
  char* const* entries() { return m_entries.data(); }

 private:
  char m_pid_entry[40] = {};
  std::vector<char*> m_entries;
};

}  // namespace nxlock::run
