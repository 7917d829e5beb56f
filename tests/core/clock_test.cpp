#include <servekit/core/clock.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace clock_test {

using servekit::deadline_after;
using servekit::duration;
using servekit::microseconds;
using servekit::never;
using servekit::time_point;

TEST(Clock, MicrosecondsConvertExactly) {
  EXPECT_EQ(microseconds(0), duration{0});
  EXPECT_EQ(microseconds(1), duration{1000});
  EXPECT_EQ(microseconds(5'000'000), std::chrono::seconds{5});
}

TEST(Clock, MicrosecondsSaturateInsteadOfOverflowing) {
  // A client may send any uint64 as a request timeout; ×1000 must not wrap around.
  EXPECT_EQ(microseconds(std::numeric_limits<std::uint64_t>::max()), duration::max());
  EXPECT_EQ(microseconds(static_cast<std::uint64_t>(duration::max().count())), duration::max());
  EXPECT_GT(microseconds(9'000'000'000'000'000ULL), duration{0});
}

TEST(Clock, DeadlineAfterIsNeverWhenPastTheRange) {
  const time_point start{std::chrono::hours{1}};
  EXPECT_EQ(deadline_after(start, 10), start + std::chrono::microseconds{10});
  EXPECT_EQ(deadline_after(start, std::numeric_limits<std::uint64_t>::max()), never);
  EXPECT_EQ(deadline_after(start, 9'223'372'036'854'775ULL), never); // at the cap
  EXPECT_GT(deadline_after(start, 1'000'000'000'000ULL), start);     // 11.6 days: representable
}

} // namespace clock_test
