// util::locked_rewrite: the old content in, the new one atomically out, nothing left beside it.
#include "util/locked_rewrite.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "util/error.hpp"

namespace nxlock::util {
namespace {

namespace fs = std::filesystem;

class LockedRewrite : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "nxlock-rewrite-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    m_dir = pattern;
  }
  void TearDown() override {
    if (!HasFailure()) {
      fs::remove_all(m_dir);
    }
  }
  std::string content(const std::string& name) const {
    std::ifstream in(m_dir + "/" + name);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::string m_dir;
};

TEST_F(LockedRewrite, GivesTheOldContentAndLeavesOnlyTheFileAndItsLock) {
  std::vector<std::optional<std::string>> seen;
  const Rewrite append = [&](const std::optional<std::string>& old) {
    seen.push_back(old);
    return old.value_or("") + "x";
  };
  locked_rewrite(m_dir, "f.prom", ".lock", append);
  locked_rewrite(m_dir, "f.prom", ".lock", append);
  ASSERT_EQ(seen.size(), 2U);
  EXPECT_FALSE(seen[0].has_value());
  EXPECT_EQ(seen[1], std::optional<std::string>("x"));
  EXPECT_EQ(content("f.prom"), "xx");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(m_dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{".lock", "f.prom"}));
}

TEST_F(LockedRewrite, ConcurrentWritersLoseNoUpdate) {
  const Rewrite count = [](const std::optional<std::string>& old) {
    return std::to_string(old ? std::stoi(*old) + 1 : 1);
  };
  std::vector<std::thread> writers;
  for (int i = 0; i < 8; ++i) {
    writers.emplace_back([&] {
      for (int j = 0; j < 25; ++j) {
        locked_rewrite(m_dir, "n", ".lock", count);
      }
    });
  }
  for (auto& writer : writers) {
    writer.join();
  }
  EXPECT_EQ(content("n"), "200");
}

TEST_F(LockedRewrite, AMissingDirectoryThrowsNamingThePath) {
  try {
    locked_rewrite(m_dir + "/missing", "f", ".lock", [](const auto&) { return std::string(); });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.subject().find("/missing"), std::string::npos);
  }
}

}  // namespace
}  // namespace nxlock::util
