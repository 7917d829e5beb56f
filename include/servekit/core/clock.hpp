#pragma once
/// \file
/// Time as the decision cores see it: a steady time point passed in by whoever drives them.
///
/// Cores never read a clock. The threaded shell passes `clock::now()`; the simulated shell
/// passes virtual time points that start at the epoch. Both use these same types.

#include <chrono>
#include <cstdint>

namespace servekit {

using clock = std::chrono::steady_clock;
using time_point = clock::time_point;
using duration = std::chrono::nanoseconds;

/// "No deadline": later than any real or virtual time.
inline constexpr time_point never = time_point::max();

/// Microseconds (Triton's unit in configs) as a duration.
[[nodiscard]] constexpr duration microseconds(std::uint64_t us) noexcept {
  return std::chrono::duration_cast<duration>(
      std::chrono::microseconds{static_cast<std::chrono::microseconds::rep>(us)});
}

/// Whole nanoseconds between two time points, clamped at zero (for statistics).
[[nodiscard]] constexpr std::uint64_t elapsed_ns(time_point from, time_point to) noexcept {
  return to > from ? static_cast<std::uint64_t>((to - from).count()) : 0;
}

} // namespace servekit
