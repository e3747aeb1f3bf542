// The default store's path: NXLOCK_STORE, else root's, else the user's XDG state directory.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "store/default_store.hpp"

namespace nxlock {
namespace {

// The per-user default, as seen by a user who is not root; a root test run
// checks it in a child that gave up root first.
std::string default_store_path_as_a_user() {
  if (geteuid() != 0) {
    try {
      return store::default_store_path();
    } catch (const std::exception& e) {
      return std::string("error: ") + e.what();
    }
  }
  int fds[2];
  if (pipe(fds) != 0) {
    return "pipe failed";
  }
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    std::string path = "setuid failed";
    if (setgid(65534) == 0 && setuid(65534) == 0) {
      try {
        path = store::default_store_path();
      } catch (const std::exception& e) {
        path = std::string("error: ") + e.what();
      }
    }
    [[maybe_unused]] auto written = write(fds[1], path.data(), path.size());
    _exit(0);
  }
  close(fds[1]);
  std::string path;
  char buffer[512];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) {
    path.append(buffer, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  waitpid(child, nullptr, 0);
  return path;
}

std::optional<std::string> saved(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

TEST(DefaultStorePath, ExplicitThenRootThenTheUsersStateDirectory) {
  const auto store = saved("NXLOCK_STORE");
  const auto state = saved("XDG_STATE_HOME");
  const auto home = saved("HOME");

  setenv("NXLOCK_STORE", "/tmp/somewhere", 1);
  setenv("XDG_STATE_HOME", "/tmp/state", 1);
  setenv("HOME", "/tmp/home", 1);
  EXPECT_EQ(store::default_store_path(), "/tmp/somewhere");
  EXPECT_EQ(default_store_path_as_a_user(), "/tmp/somewhere");
  unsetenv("NXLOCK_STORE");
  if (geteuid() == 0) {
    EXPECT_EQ(store::default_store_path(), "/var/lib/nxlock");
  }
  EXPECT_EQ(default_store_path_as_a_user(), "/tmp/state/nxlock");
  setenv("XDG_STATE_HOME", "relative/state", 1);  // not absolute: ignored, as XDG says
  EXPECT_EQ(default_store_path_as_a_user(), "/tmp/home/.local/state/nxlock");
  unsetenv("XDG_STATE_HOME");
  EXPECT_EQ(default_store_path_as_a_user(), "/tmp/home/.local/state/nxlock");
  unsetenv("HOME");
  EXPECT_EQ(default_store_path_as_a_user().rfind("error: ", 0), 0u);

  for (const auto& [name, value] : {std::pair{"NXLOCK_STORE", store},
                                    std::pair{"XDG_STATE_HOME", state}, std::pair{"HOME", home}}) {
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
}

}  // namespace
}  // namespace nxlock
