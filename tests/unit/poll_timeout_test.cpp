// util::poll_timeout_ms: the one rounding of poll() timeouts (the watchers and the Redis
// connection).
#include <gtest/gtest.h>

#include <climits>

#include "util/time.hpp"

namespace nxlock::util {
namespace {

TEST(PollTimeout, RoundsUpSoAWaitNeverEndsEarly) {
  EXPECT_EQ(poll_timeout_ms(Micros(1)), 1);
  EXPECT_EQ(poll_timeout_ms(Micros(999)), 1);
  EXPECT_EQ(poll_timeout_ms(Micros(1000)), 1);
  EXPECT_EQ(poll_timeout_ms(Micros(1001)), 2);
  EXPECT_EQ(poll_timeout_ms(Micros(200'000)), 200);
}

TEST(PollTimeout, APastDurationIsZero) {
  EXPECT_EQ(poll_timeout_ms(Micros(0)), 0);
  EXPECT_EQ(poll_timeout_ms(Micros(-5)), 0);
  EXPECT_EQ(poll_timeout_ms(Micros::min()), 0);
}

TEST(PollTimeout, AHugeDurationIsCappedNotOverflowed) {
  EXPECT_EQ(poll_timeout_ms(Micros(std::int64_t{INT_MAX} * 1000 + 1)), INT_MAX);
  EXPECT_EQ(poll_timeout_ms(Micros::max()), INT_MAX);
}

}  // namespace
}  // namespace nxlock::util
