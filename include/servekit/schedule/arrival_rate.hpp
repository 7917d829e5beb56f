#pragma once
/// \file
/// arrival_rate: the rate at which elements arrive, averaged over a sliding time constant.

#include <servekit/core/clock.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace servekit {

/// Exponentially weighted arrival rate: each arrival adds its elements to a sum that decays
/// with time constant `window` (so an arrival `window` ago counts 1/e), and the rate is that sum
/// over `window`. At a steady rate λ the sum settles at λ·window; after a step in the rate the
/// estimate covers 63 % of the step within one window. Driven by the caller's clock.
class arrival_rate {
public:
  explicit arrival_rate(duration window = std::chrono::milliseconds{500}) noexcept
      : window_s_{std::max(static_cast<double>(window.count()) * 1e-9, 1e-6)} {}

  /// `elements` arrived at `at` (not before the previous arrival).
  void observe(time_point at, std::int64_t elements) noexcept {
    decay_to(at);
    sum_ += static_cast<double>(std::max<std::int64_t>(elements, 0));
  }

  /// Elements per second, as of `now` (the sum decays while nothing arrives).
  [[nodiscard]] double per_second(time_point now) const noexcept {
    if (!started_ || now <= last_) {
      return sum_ / window_s_;
    }
    return sum_ * std::exp(-seconds_between(last_, now) / window_s_) / window_s_;
  }

private:
  void decay_to(time_point at) noexcept {
    if (started_ && at > last_) {
      sum_ *= std::exp(-seconds_between(last_, at) / window_s_);
    }
    if (!started_ || at > last_) {
      last_ = at;
    }
    started_ = true;
  }

  [[nodiscard]] static double seconds_between(time_point from, time_point to) noexcept {
    return static_cast<double>((to - from).count()) * 1e-9;
  }

  double window_s_;
  double sum_ = 0.0;
  time_point last_{};
  bool started_ = false;
};

} // namespace servekit
