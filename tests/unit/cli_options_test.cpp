// Option parsing: usage errors are exit 64 (never CLI11's own codes), options in every position.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/app.hpp"
#include "cli/command_table.hpp"
#include "support/test_helpers.hpp"

namespace nxlock {
namespace {

class CliOptions : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = testing::make_temp_dir("nxlock-cli");
    m_url = "file://" + m_dir + "/store";
    unsetenv("NXLOCK_URL");
    unsetenv("NXLOCK_PREFIX");
  }
  void TearDown() override {
    if (!HasFailure()) {
      std::filesystem::remove_all(m_dir);
    } else {
      std::cerr << "kept " << m_dir << "\n";
    }
  }
  int run(std::vector<std::string> args) {
    std::vector<char*> argv;
    std::string name = "nxlock";
    argv.push_back(name.data());
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    return cli::run(static_cast<int>(argv.size() - 1), argv.data());
  }
  std::string m_dir;
  std::string m_url;
};

TEST_F(CliOptions, UsageErrorsAre64) {
  EXPECT_EQ(run({}), 64);
  EXPECT_EQ(run({"bogus"}), 64);
  EXPECT_EQ(run({"-u", m_url, "setnx"}), 64);
  EXPECT_EQ(run({"-u", m_url, "setnx", "k", "v", "extra"}), 64);
  EXPECT_EQ(run({"-u", m_url, "--nope", "get", "k"}), 64);
  EXPECT_EQ(run({"-u", m_url, "lock", "-n", "-w", "1", "k"}), 64);
  EXPECT_EQ(run({"-u", m_url, "lock", "-t", "1.5", "k"}), 64);
  EXPECT_EQ(run({"-u", m_url, "lock", "-t", "0", "k"}), 64);
  EXPECT_EQ(run({"-u", m_url, "lock", "-w", "-1", "k"}), 64);
  EXPECT_EQ(run({"-u", m_url, "run-locked", "--on-lost", "maybe", "k", "true"}), 64);
  EXPECT_EQ(run({"-u", m_url, "run-locked", "k"}), 64);
  EXPECT_EQ(run({"-u", m_url, "get", ""}), 64);
  EXPECT_EQ(run({"-u", "ftp://x", "get", "k"}), 64);
  EXPECT_EQ(run({"-u", m_url, "unlock", "k"}), 64);
  EXPECT_EQ(run({"-u", m_url, "unlock", "k", "not-a-number"}), 64);
}

TEST_F(CliOptions, HelpAndVersionAreZero) {
  EXPECT_EQ(run({"--help"}), 0);
  EXPECT_EQ(run({"--version"}), 0);
  EXPECT_EQ(run({"lock", "--help"}), 0);
}

TEST_F(CliOptions, GlobalOptionsBeforeOrAfterTheCommand) {
  EXPECT_EQ(run({"-u", m_url, "setnx", "k", "v"}), 0);
  EXPECT_EQ(run({"setnx", "-u", m_url, "k", "w"}), 1);
  EXPECT_EQ(run({"get", "k", "-u", m_url}), 0);
  EXPECT_EQ(run({"--prefix", "p:", "-u", m_url, "get", "k"}), 1);
}

TEST_F(CliOptions, DoubleDashAllowsLeadingDashes) {
  EXPECT_EQ(run({"-u", m_url, "setnx", "--", "-k", "-1"}), 0);
  EXPECT_EQ(run({"-u", m_url, "get", "--", "-k"}), 0);
}

TEST_F(CliOptions, RunLockedStopsParsingAtKey) {
  // -n after KEY belongs to the child: `test -n x` is true, so the status is 0.
  EXPECT_EQ(run({"-u", m_url, "run-locked", "-n", "k", "test", "-n", "x"}), 0);
  EXPECT_EQ(run({"-u", m_url, "run-locked", "k", "--", "sh", "-c", "exit 3"}), 3);
  EXPECT_EQ(run({"-u", m_url, "run-locked", "--", "k", "false"}), 1);
  // Global options between run-locked and KEY, their values not taken for KEY.
  EXPECT_EQ(run({"run-locked", "-u", m_url, "--io-timeout", "1", "-n", "k", "sh", "-c", "exit 4"}), 4);
  EXPECT_EQ(run({"run-locked", "--prefix", "p:", "-q", "--url=" + m_url, "k", "true"}), 0);
}

TEST_F(CliOptions, CommandTableIsComplete) {
  std::vector<std::string> names;
  for (const auto& command : cli::command_table()) {
    names.emplace_back(command.name);
    EXPECT_NE(std::string(command.example).find("nxlock"), std::string::npos);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"setnx", "get", "getset", "del", "lock", "unlock",
                                             "renew", "status", "list", "run-locked", "doctor"}));
}

}  // namespace
}  // namespace nxlock
