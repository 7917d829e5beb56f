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

/// Microseconds (Triton's unit in configs) as a duration, saturating at duration::max() (a
/// client may send any uint64 as a timeout).
[[nodiscard]] constexpr duration microseconds(std::uint64_t us) noexcept {
  constexpr auto max_us = static_cast<std::uint64_t>(duration::max().count() / 1000);
  return us >= max_us ? duration::max() : duration{static_cast<duration::rep>(us) * 1000};
}

/// `d` after `start`; `never` when that is past what a time_point holds (a configured delay or
/// idle limit may be any uint64 of microseconds, which saturates at duration::max()).
[[nodiscard]] constexpr time_point later_by(time_point start, duration d) noexcept {
  return d >= never - start ? never : start + d;
}

/// `us` microseconds after `start`; `never` when that is past what a time_point holds.
[[nodiscard]] constexpr time_point deadline_after(time_point start, std::uint64_t us) noexcept {
  return later_by(start, microseconds(us));
}

/// Whole nanoseconds between two time points, clamped at zero (for statistics).
[[nodiscard]] constexpr std::uint64_t elapsed_ns(time_point from, time_point to) noexcept {
  return to > from ? static_cast<std::uint64_t>((to - from).count()) : 0;
}

} // namespace servekit
