// Option parsing: usage errors are exit 64 (never CLI11's own codes), options in every position.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/app.hpp"
#include "cli/command_table.hpp"
#include "cli/commands.hpp"
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

// A parse sets up only the options its words name or the environment sets
// (OnlyNamedOptions); help and any failure set up all of them.
TEST_F(CliOptions, OnlyTheNamedOptionsAreSetUp) {
  unsetenv("NXLOCK_TTL");
  std::vector<std::string> words = {"nxlock", "lock", "-nq", "--wait=5", "--", "-x"};
  std::vector<char*> argv;
  for (auto& word : words) {
    argv.push_back(word.data());
  }
  {
    const cli::OnlyNamedOptions named(static_cast<int>(argv.size()), argv.data());
    EXPECT_FALSE(named.asks_for_help());
    EXPECT_TRUE(named.names(cli::option_spec("lock", "--nonblock")));  // in a cluster
    EXPECT_TRUE(named.names(cli::option_spec("", "--quiet")));
    EXPECT_TRUE(named.names(cli::option_spec("lock", "--wait")));     // --wait=5
    EXPECT_TRUE(named.names(cli::option_spec("lock", "--exclusive")));  // a key's word: set up too
    EXPECT_FALSE(named.names(cli::option_spec("lock", "--ttl")));
    EXPECT_FALSE(named.names(cli::option_spec("", "--url")));
    setenv("NXLOCK_TTL", "7", 1);
    EXPECT_TRUE(named.names(cli::option_spec("lock", "--ttl")));
    unsetenv("NXLOCK_TTL");
  }
  for (std::vector<std::string> help : {std::vector<std::string>{"nxlock", "lock", "-nh", "k"},
                                        {"nxlock", "--version"},
                                        {"nxlock", "--dump-options"},
                                        {"nxlock", "get", "--help-all"}}) {
    std::vector<char*> help_argv;
    for (auto& word : help) {
      help_argv.push_back(word.data());
    }
    EXPECT_TRUE(cli::OnlyNamedOptions(static_cast<int>(help_argv.size()), help_argv.data())
                    .asks_for_help())
        << help[1];
  }
  // Relations hold between named options, and with those left out.
  EXPECT_EQ(run({"-u", m_url, "lock", "-s", "-x", "k"}), 64);
  EXPECT_EQ(run({"-u", m_url, "lock", "-x", "-n", "k"}), 0);
  EXPECT_EQ(run({"-u", m_url, "--cert", m_dir + "/c.pem", "get", "k"}), 64);  // needs --key
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
