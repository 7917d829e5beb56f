#pragma once
/// \file
/// Rules that size and time batches from what the adaptive batcher observes: servekit's
/// latency_target, and for comparison TF Serving's in-flight hill climb and Clipper's AIMD.

#include <servekit/core/clock.hpp>
#include <servekit/schedule/batching_signals.hpp>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>

namespace servekit {

/// A batching controller: default-constructible (everything it reads is in the signals),
/// `decide` when an instance asks for a batch, `observe` each executed batch, and `value()`, its
/// own knob, for statistics.
template <class C>
concept batching_controller = std::default_initializable<C> &&
    requires(C& c, const C& cc, const batching_view& v, const batching_signals& s,
             const batch_observation& o) {
  { cc.decide(v, s) } -> std::same_as<batching_decision>;
  c.observe(o, s);
  { cc.value() } -> std::convertible_to<double>;
};

/// servekit's rule: the smallest batch that keeps up, waited for no longer than the objective
/// allows.
///
/// From the arrival rate λ and the learned latency `a + c·b` of a batch of b on n instances, the
/// batch that keeps the instances `utilisation` busy is b = λ·a / (utilisation·n − λ·c): 1 at
/// low load (no waiting at all), growing as the load nears capacity, and max_batch_size when
/// nothing smaller keeps up. It waits for b elements at most the time they take to arrive,
/// (b − 1)/λ, and never longer than the objective leaves once two executions are paid for (the
/// one ahead of the batch and its own), nor the configured bound.
///
/// Feedback corrects what the model misses (latency noise, bursts): while fewer than the
/// target share of recent requests meet the objective, the objective it plans with shrinks by
/// 2 % a batch (down to a quarter); otherwise it recovers by 0.2 % a batch. value() is that
/// factor.
class latency_target {
public:
  static constexpr double utilisation = 0.8;

  [[nodiscard]] batching_decision decide(const batching_view& v,
                                         const batching_signals& s) const noexcept {
    const latency_profile& p = s.profile;
    if (p.samples() == 0 || s.target == duration::zero()) {
      return {}; // nothing learned (or nothing to aim at) yet: batch what is there, at once
    }
    const double lambda = s.rate.per_second(v.now);
    const double largest = static_cast<double>(s.max_batch_size);
    const double room =
        utilisation * static_cast<double>(s.instances) - lambda * p.per_element_seconds();
    const double b = room <= 0.0
                         ? largest
                         : std::clamp(std::ceil(lambda * p.fixed_seconds() / room), 1.0, largest);
    if (b <= 1.0) {
      return {};
    }
    const double budget = latency_profile::seconds_of(s.target) * correction_ -
                          2.0 * p.seconds(static_cast<std::int64_t>(b));
    const double fill = (b - 1.0) / std::max(lambda, 1e-9);
    const double delay =
        std::clamp(std::min(fill, budget), 0.0, latency_profile::seconds_of(s.delay_bound));
    batching_decision d;
    d.wait_for = static_cast<std::int64_t>(b);
    d.max_delay = latency_profile::duration_of(delay);
    return d;
  }

  void observe(const batch_observation&, const batching_signals& s) noexcept {
    if (s.recent_within_target < s.percentile / 100.0) {
      correction_ = std::max(0.25, correction_ * 0.98);
    } else {
      correction_ = std::min(1.0, correction_ * 1.002);
    }
  }

  [[nodiscard]] double value() const noexcept { return correction_; }

private:
  double correction_ = 1.0;
};

/// After TF Serving's AdaptiveSharedBatchScheduler: batches never wait (an instance takes what
/// is queued), but at most `limit` of them execute at once, so that while they do the next
/// batch grows (a fractional limit lets that share of the batches past its whole part). The limit
/// hill-climbs on the mean request latency: every `window` batches it steps by a tenth of itself,
/// and reverses direction when the mean got worse. Between 1 and the instance count; value() is the
/// limit.
class in_flight_hill_climb {
public:
  static constexpr std::size_t window = 64;

  [[nodiscard]] batching_decision decide(const batching_view& v,
                                         const batching_signals& s) const noexcept {
    batching_decision d;
    // Until the first batch is seen the limit is the instance count (observe starts it there).
    const double limit = started_ ? std::min(limit_, static_cast<double>(s.instances))
                                  : static_cast<double>(s.instances);
    const double whole = std::floor(limit + 1e-9);
    const auto running = static_cast<double>(v.in_flight);
    if (v.in_flight == 0 || running < whole) {
      return d;
    }
    // At the limit's whole part, the fractional part is the share of batches let through (TF
    // Serving draws it at random; here it is spread evenly, so the rule stays deterministic).
    if (running > whole + 1e-9) {
      d.hold = true;
      return d;
    }
    carry_ += limit - whole;
    d.hold = carry_ < 1.0;
    if (!d.hold) {
      carry_ -= 1.0;
    }
    return d;
  }

  void observe(const batch_observation& o, const batching_signals& s) noexcept {
    if (!started_) {
      limit_ = static_cast<double>(s.instances);
      started_ = true;
    }
    // The batch's mean latency, approximated by its oldest and a request arriving as it started.
    const double oldest = latency_profile::seconds_of(o.worst_latency);
    const double newest = latency_profile::seconds_of(o.finished - o.started);
    sum_ += (oldest + newest) / 2.0 * static_cast<double>(o.requests);
    count_ += o.requests;
    if (++batches_ < window) {
      return;
    }
    const double mean = count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_);
    if (previous_ > 0.0 && mean > previous_) {
      direction_ = -direction_;
    }
    previous_ = mean;
    limit_ = std::clamp(limit_ + direction_ * std::max(limit_ / 10.0, 0.1), 1.0,
                        static_cast<double>(s.instances));
    batches_ = 0;
    count_ = 0;
    sum_ = 0.0;
  }

  [[nodiscard]] double value() const noexcept { return limit_; }

private:
  double limit_ = 1.0;
  mutable double carry_ = 0.0; // the fractional part's share, spread over decisions
  double direction_ = -1.0;
  double previous_ = 0.0;
  double sum_ = 0.0;
  std::size_t count_ = 0;
  std::size_t batches_ = 0;
  bool started_ = false;
};

/// After Clipper's adaptive batching: batches never wait, and their size is capped by additive
/// increase, multiplicative decrease on the objective: a batch that used the whole cap and
/// executed within the objective raises it by one, one that took longer cuts it by 10 %.
/// Starts at 1; value() is the cap.
class clipper_aimd {
public:
  [[nodiscard]] batching_decision decide(const batching_view&,
                                         const batching_signals&) const noexcept {
    batching_decision d;
    d.at_most = std::max<std::int64_t>(static_cast<std::int64_t>(cap_), 1);
    return d;
  }

  void observe(const batch_observation& o, const batching_signals& s) noexcept {
    if (s.target == duration::zero()) {
      return;
    }
    if (o.finished - o.started > s.target) {
      cap_ = std::max(1.0, cap_ * 0.9);
    } else if (o.elements >= static_cast<std::int64_t>(cap_)) {
      cap_ = std::min(static_cast<double>(s.max_batch_size), cap_ + 1.0);
    }
  }

  [[nodiscard]] double value() const noexcept { return cap_; }

private:
  double cap_ = 1.0;
};

} // namespace servekit
