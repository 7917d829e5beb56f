#pragma once
/// \file
/// What an adaptive batching controller sees: the signals the adaptive batcher keeps for it,
/// the queue when an instance asks for a batch, each executed batch, and what it decides.

#include <servekit/core/clock.hpp>
#include <servekit/schedule/adaptive_batching_options.hpp>
#include <servekit/schedule/arrival_rate.hpp>
#include <servekit/schedule/latency_profile.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace servekit {

/// Learned online by the adaptive batcher and read by its controller: the backend's latency
/// by batch size, the arrival rate, and how recent requests fared against the objective.
struct batching_signals {
  latency_profile profile;
  arrival_rate rate;
  duration target{};                 ///< the objective (0: none)
  double percentile = 99.0;          ///< share of requests that should meet it, percent
  std::int64_t max_batch_size = 1;   ///< the model's
  std::size_t instances = 1;         ///< executing in parallel
  duration delay_bound{};            ///< the longest a batch may be held open
  double recent_within_target = 1.0; ///< over about the last 1000 requests
  std::uint64_t requests = 0;        ///< executed since load
  std::uint64_t within_target = 0;   ///< of which met the objective

  explicit batching_signals(const adaptive_batching_options& o = {}, std::int64_t max_batch = 1,
                            std::size_t instance_count = 1)
      : rate{microseconds(o.rate_window_microseconds)}, target{microseconds(
                                                            o.target_latency_microseconds)},
        percentile{std::clamp(static_cast<double>(o.target_percentile), 1.0, 100.0)},
        max_batch_size{std::max<std::int64_t>(max_batch, 1)}, instances{std::max<std::size_t>(
                                                                  instance_count, 1)},
        delay_bound{o.max_queue_delay_bound_microseconds != 0
                        ? microseconds(o.max_queue_delay_bound_microseconds)
                        : target} {}

  /// One executed request took `latency` from arrival to response.
  void observe_request(duration latency) noexcept {
    constexpr double keep = 1.0 - 1.0 / 1000.0;
    const bool met = target == duration::zero() || latency <= target;
    recent_within_target = recent_within_target * keep + (met ? 1.0 - keep : 0.0);
    ++requests;
    within_target += met ? 1U : 0U;
  }
};

/// The queue as an instance asks for a batch.
struct batching_view {
  time_point now{};
  std::int64_t queued_elements = 0;  ///< elements waiting, every priority level
  time_point oldest_arrival = never; ///< of the request first in line
  std::size_t in_flight = 0;         ///< batches executing now
};

/// One batch the adaptive batcher formed, once it has executed.
struct batch_observation {
  time_point started{};
  time_point finished{};
  std::int64_t elements = 0;
  std::size_t requests = 0;
  duration worst_latency{}; ///< arrival to response, of the batch's oldest request
};

/// A controller's answer: form a batch once `wait_for` elements are queued or the request
/// first in line has waited `max_delay` (zero: at once), of at most `at_most` elements; or,
/// with `hold`, form none while a batch is executing (an in-flight limit).
struct batching_decision {
  std::int64_t wait_for = 1;
  duration max_delay{};
  std::int64_t at_most = std::numeric_limits<std::int64_t>::max();
  bool hold = false;
};

} // namespace servekit
