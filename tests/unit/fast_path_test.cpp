// The fast path of the command line parses what it accepts exactly as CLI11 does.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/fast_path.hpp"

namespace nxlock {
namespace {

using cli::Context;
using cli::ParsedArgs;
using cli::Runner;

struct Argv {
  explicit Argv(std::vector<std::string> args) : words(std::move(args)) {
    words.insert(words.begin(), "nxlock");
    for (auto& word : words) {
      pointers.push_back(word.data());
    }
    pointers.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(words.size()); }
  char** argv() { return pointers.data(); }
  std::vector<std::string> words;
  std::vector<char*> pointers;
};

struct Parse {
  bool accepted = false;  // the fast path took it / CLI11 parsed it without ending
  Context context;
  ParsedArgs parsed;
};

void fast(const std::vector<std::string>& args, Parse& out) {
  Argv argv(args);
  const auto runner = cli::parse_fast(argv.argc(), argv.argv(), out.context.globals, out.parsed,
                                      out.context.child_command);
  out.accepted = runner.has_value() && *runner;
}

void full(const std::vector<std::string>& args, Parse& out) {
  Argv argv(args);
  Runner runner;
  out.accepted = !cli::parse_with_cli11(argv.argc(), argv.argv(), out.context, out.parsed, runner)
                      .has_value() &&
                 runner;
}

// Every field both parsers can set, compared.
void expect_same(const Parse& a, const Parse& b) {
  const cli::GlobalOptions& g = a.context.globals;
  const cli::GlobalOptions& h = b.context.globals;
  EXPECT_EQ(g.urls, h.urls);
  EXPECT_EQ(g.password_file, h.password_file);
  EXPECT_EQ(g.timeout, h.timeout);
  EXPECT_EQ(g.prefix, h.prefix);
  EXPECT_EQ(g.cacert, h.cacert);
  EXPECT_EQ(g.cacertdir, h.cacertdir);
  EXPECT_EQ(g.cert, h.cert);
  EXPECT_EQ(g.key, h.key);
  EXPECT_EQ(g.sni, h.sni);
  EXPECT_EQ(g.insecure, h.insecure);
  EXPECT_EQ(g.sentinel_password_file, h.sentinel_password_file);
  EXPECT_EQ(g.replicas, h.replicas);
  EXPECT_EQ(g.json, h.json);
  EXPECT_EQ(g.quiet, h.quiet);
  EXPECT_EQ(g.verbose, h.verbose);
  EXPECT_EQ(a.context.child_command, b.context.child_command);
  EXPECT_EQ(a.parsed.command, b.parsed.command);
  ASSERT_EQ(a.parsed.kv == nullptr, b.parsed.kv == nullptr);
  if (a.parsed.kv) {
    EXPECT_EQ(a.parsed.kv->key, b.parsed.kv->key);
    EXPECT_EQ(a.parsed.kv->value, b.parsed.kv->value);
  }
  ASSERT_EQ(a.parsed.run == nullptr, b.parsed.run == nullptr);
  if (a.parsed.run) {
    const cli::RunLockedArgs& r = *a.parsed.run;
    const cli::RunLockedArgs& s = *b.parsed.run;
    EXPECT_EQ(r.key, s.key);
    EXPECT_EQ(r.lock.ttl, s.lock.ttl);
    EXPECT_EQ(r.lock.nonblock, s.lock.nonblock);
    EXPECT_EQ(r.lock.wait, s.lock.wait);
    EXPECT_EQ(r.lock.conflict_exit, s.lock.conflict_exit);
    EXPECT_EQ(r.lock.clock, s.lock.clock);
    EXPECT_EQ(r.no_renew, s.no_renew);
    EXPECT_EQ(r.inherit_credentials, s.inherit_credentials);
    EXPECT_EQ(r.on_lost, s.on_lost);
    EXPECT_EQ(r.kill_after, s.kill_after);
    EXPECT_EQ(r.hold, s.hold);
  }
}

class FastPath : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"NXLOCK_URL", "NXLOCK_PREFIX", "NXLOCK_CACERT", "NXLOCK_CACERTDIR",
                             "NXLOCK_CERT", "NXLOCK_CERT_KEY"}) {
      unsetenv(name);
    }
  }
  void TearDown() override { SetUp(); }

  // Parses `args` both ways: the fast path must take it iff `expect_fast`,
  // and what it takes, CLI11 must parse to the same structures.
  void check(const std::vector<std::string>& args, bool expect_fast) {
    std::string shown;
    for (const auto& word : args) {
      shown += "'" + word + "' ";
    }
    SCOPED_TRACE(shown);
    Parse by_fast;
    fast(args, by_fast);
    ASSERT_EQ(by_fast.accepted, expect_fast);
    if (!expect_fast) {
      // Refused: nothing was touched.
      EXPECT_TRUE(by_fast.context.globals.urls.empty());
      EXPECT_TRUE(by_fast.context.child_command.empty());
      EXPECT_EQ(by_fast.parsed.command, "");
      return;
    }
    Parse by_cli11;
    full(args, by_cli11);
    ASSERT_TRUE(by_cli11.accepted);
    expect_same(by_fast, by_cli11);
  }
};

const char* const k_url = "redis://127.0.0.1:6379";

TEST_F(FastPath, TakesThePlainCommandLinesAsCli11Does) {
  const std::vector<std::vector<std::string>> accepted = {
      {"setnx", "k", "v"},
      {"-u", k_url, "setnx", "k", "v"},
      {"--url", k_url, "setnx", "k", "v w"},
      {"-u", k_url, "-u", "redis://b", "--url", "redis://c", "setnx", "k", "v"},
      {"-u", "redis://a redis://b", "get", "k"},
      {"-u", "setnx", "setnx", "k", "v"},  // a URL that is a command's name
      {"setnx", "setnx", "get"},           // operands that are commands' names
      {"get", "run-locked"},
      {"getset", "k", "0"},
      {"setnx", "k=1", "v=2"},
      {"get", "ключ\n"},
      {"run-locked", "k", "true"},
      {"run-locked", "-n", "k", "true"},
      {"run-locked", "--nonblock", "k", "true"},
      {"-u", k_url, "run-locked", "-n", "k", "sh", "-c", "exit 3"},
      {"run-locked", "-n", "k", "--", "ls", "-l"},
      {"run-locked", "k", "--", "--", "x"},                      // only the first `--` goes
      {"run-locked", "k", "ls", "--help", "-u", "x", "--json"},  // the child's words
      {"run-locked", "run-locked", "run-locked"},
      {"run-locked", "-n", "k", "-n"},
  };
  for (const auto& args : accepted) {
    check(args, true);
  }
}

TEST_F(FastPath, LeavesEverythingElseToCli11) {
  const std::vector<std::vector<std::string>> refused = {
      {},
      {"-u", k_url},
      {"-u"},
      {"-u", "", "get", "k"},
      {"-u", "-q", "get", "k"},
      {"-u" + std::string(k_url), "get", "k"},
      {"--url=" + std::string(k_url), "get", "k"},
      {"-q", "get", "k"},
      {"--json", "get", "k"},
      {"--help"},
      {"-h", "setnx", "k", "v"},
      {"--version"},
      {"setnx", "--help"},
      {"setnx", "k"},
      {"setnx", "k", "v", "w"},
      {"setnx", "k", "-1"},
      {"setnx", "--", "k", "v"},
      {"setnx", "", "v"},
      {"setnx", "k", ""},
      {"get", "-"},
      {"get", "k", "--json"},
      {"get", "k", "-u", k_url},
      {"del", "k"},
      {"lock", "k"},
      {"unlock", "k", "1"},
      {"status", "k"},
      {"renew", "k", "1"},
      {"bogus", "k"},
      {"run-locked"},
      {"run-locked", "k"},
      {"run-locked", "-n", "k"},
      {"run-locked", "k", "--"},
      {"run-locked", "--", "k", "true"},
      {"run-locked", "-n", "-n", "k", "true"},
      {"run-locked", "-w", "5", "k", "true"},
      {"run-locked", "-nE5", "k", "true"},
      {"run-locked", "--ttl=5", "k", "true"},
      {"run-locked", "-n", "-k", "true"},
      {"run-locked", "", "true"},
  };
  for (const auto& args : refused) {
    check(args, false);
  }
}

TEST_F(FastPath, ReadsNxlockUrlAsCli11Does) {
  setenv("NXLOCK_URL", "redis://from-env", 1);
  check({"setnx", "k", "v"}, true);
  check({"-u", k_url, "get", "k"}, true);  // -u wins over the environment
  check({"run-locked", "-n", "k", "true"}, true);
  setenv("NXLOCK_URL", "redis://a redis://b", 1);
  check({"get", "k"}, true);
  setenv("NXLOCK_URL", "", 1);  // CLI11 takes no empty environment value
  check({"get", "k"}, true);
}

TEST_F(FastPath, LeavesOptionsFromTheEnvironmentToCli11) {
  for (const char* name :
       {"NXLOCK_PREFIX", "NXLOCK_CACERT", "NXLOCK_CACERTDIR", "NXLOCK_CERT", "NXLOCK_CERT_KEY"}) {
    SCOPED_TRACE(name);
    setenv(name, "", 1);
    check({"get", "k"}, false);
    unsetenv(name);
  }
}

}  // namespace
}  // namespace nxlock
