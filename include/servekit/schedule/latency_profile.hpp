#pragma once
/// \file
/// latency_profile: a backend's execution time as a function of batch size, learned online.

#include <servekit/core/clock.hpp>

#include <algorithm>
#include <cstdint>

namespace servekit {

/// Fits `execution(b) = fixed + per_element * b` to the batches a model executed, by least
/// squares weighted toward the recent ones: each observation multiplies the weight of the ones
/// before it by `decay` (0.98 remembers about the last 50 batches), so a backend that becomes
/// slower is seen within a few dozen batches.
///
/// While every batch so far had the same size the line has no slope to fit, and the profile
/// assumes the time is all per element (fixed = 0). That is the cautious reading: larger
/// batches are predicted to take proportionally longer, so a controller that wants bigger
/// batches to pay off must first see some. Once a slope was fitted, a stretch of batches of
/// one size (full ones, under overload) keeps it and moves the line through them.
class latency_profile {
public:
  explicit latency_profile(double decay = 0.98) noexcept : decay_{std::clamp(decay, 0.5, 0.9999)} {}

  /// One executed batch of `elements` that took `took`.
  void observe(std::int64_t elements, duration took) noexcept {
    if (elements <= 0) {
      return;
    }
    const double x = static_cast<double>(elements);
    const double y = std::max(seconds_of(took), 0.0);
    w_ = w_ * decay_ + 1.0;
    x_ = x_ * decay_ + x;
    y_ = y_ * decay_ + y;
    xx_ = xx_ * decay_ + x * x;
    xy_ = xy_ * decay_ + x * y;
    ++samples_;
    refit();
  }

  /// Batches observed so far.
  [[nodiscard]] std::uint64_t samples() const noexcept { return samples_; }
  /// Whether the batches seen differ enough in size for the line to have a slope (else the
  /// profile is the cautious all-per-element reading).
  [[nodiscard]] bool has_slope() const noexcept { return sloped_; }
  /// The fitted time of a batch's fixed part, seconds.
  [[nodiscard]] double fixed_seconds() const noexcept { return fixed_; }
  /// The fitted time per element, seconds.
  [[nodiscard]] double per_element_seconds() const noexcept { return per_element_; }
  /// Predicted execution time of a batch of `elements`, seconds (0 before any observation).
  [[nodiscard]] double seconds(std::int64_t elements) const noexcept {
    return fixed_ + per_element_ * static_cast<double>(std::max<std::int64_t>(elements, 0));
  }
  /// The same as a duration.
  [[nodiscard]] duration predict(std::int64_t elements) const noexcept {
    return duration_of(seconds(elements));
  }

  [[nodiscard]] static double seconds_of(duration d) noexcept {
    return static_cast<double>(d.count()) * 1e-9;
  }
  [[nodiscard]] static duration duration_of(double seconds) noexcept {
    return duration{static_cast<duration::rep>(std::max(seconds, 0.0) * 1e9)};
  }

private:
  void refit() noexcept {
    const double mean_x = x_ / w_;
    const double mean_y = y_ / w_;
    const double var_x = xx_ / w_ - mean_x * mean_x;
    // Batch sizes spread by less than about a tenth of an element: no slope to fit.
    if (var_x > 0.01) {
      sloped_ = true;
      const double slope = (xy_ / w_ - mean_x * mean_y) / var_x;
      per_element_ = std::max(slope, 0.0);
      fixed_ = mean_y - per_element_ * mean_x;
      if (fixed_ < 0.0) {
        // The line would cross zero above b = 0: the best line through the origin instead.
        fixed_ = 0.0;
        per_element_ = xy_ / xx_;
      }
    } else if (sloped_) {
      // The sizes stopped varying (a model that only ever sees full batches under overload):
      // keep the slope learned before and move the line through what is seen now.
      fixed_ = std::max(mean_y - per_element_ * mean_x, 0.0);
    } else {
      fixed_ = 0.0;
      per_element_ = mean_y / mean_x;
    }
  }

  double decay_;
  double w_ = 0.0;
  double x_ = 0.0;
  double y_ = 0.0;
  double xx_ = 0.0;
  double xy_ = 0.0;
  double fixed_ = 0.0;
  double per_element_ = 0.0;
  std::uint64_t samples_ = 0;
  bool sloped_ = false;
};

} // namespace servekit
