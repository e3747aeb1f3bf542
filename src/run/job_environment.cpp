// JobEnvironment: the job's environment, with its own pid in NXLOCK_JOB_PID.
#include "run/job_environment.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace nxlock::run {

namespace {

constexpr const char* k_job_pid_name = "NXLOCK_JOB_PID";

}  // namespace

JobEnvironment::JobEnvironment() {
  unsetenv(k_job_pid_name);  // an outer job's, never ours
  for (char** entry = environ; *entry != nullptr; ++entry) {
    m_entries.push_back(*entry);
  }
  std::strcpy(m_pid_entry, k_job_pid_name);
  std::strcat(m_pid_entry, "=");
  m_entries.push_back(m_pid_entry);
  m_entries.push_back(nullptr);
}

void JobEnvironment::set_pid(pid_t pid) {
  char digits[16];
  int count = 0;
  do {
    digits[count++] = static_cast<char>('0' + pid % 10);
    pid /= 10;
  } while (pid > 0);
  char* at = m_pid_entry + std::strlen(k_job_pid_name) + 1;
  while (count > 0) {
    *at++ = digits[--count];
  }
  *at = '\0';
}

}  // namespace nxlock::run
