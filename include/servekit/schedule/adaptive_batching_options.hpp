#pragma once
/// \file
/// The settings of adaptive dynamic batching (a servekit extension of `dynamic_batching`).

#include <cstdint>

namespace servekit {

/// What the adaptive batcher (`dynamic_batcher<adaptive<Controller>>`) aims at and may choose.
/// Instead of a fixed max_queue_delay_microseconds and preferred sizes, a controller picks the
/// batch size to wait for and how long to wait, from the arrival rate and the batch latencies
/// it observes, so that `target_percentile` percent of requests finish within
/// `target_latency_microseconds` of their arrival.
///
/// In a model config: `dynamic_batching { adaptive { target_latency_microseconds: 50000 } }`
/// (config.pbtxt) or `"dynamic_batching": {"adaptive": {...}}` (config.json), a servekit
/// extension. The policy itself is chosen where the model is composed
/// (`dynamic_batcher<adaptive<...>>`); other batchers ignore these settings.
struct adaptive_batching_options {
  /// The latency objective, arrival to response. 0: none (the controllers then batch greedily:
  /// whatever is queued when an instance is free).
  std::uint64_t target_latency_microseconds = 0;
  /// The share of requests, in percent, that should meet the objective (99: the p99 latency).
  float target_percentile = 99.0F;
  /// The longest the controller may hold a batch open; 0: the objective bounds it.
  std::uint64_t max_queue_delay_bound_microseconds = 0;
  /// Time constant of the arrival-rate estimate: shorter follows bursts sooner, longer is
  /// steadier.
  std::uint64_t rate_window_microseconds = 500'000;
  /// Refuse a request at once (`unavailable`, saying why) when the work queued ahead of it,
  /// at the latencies learned so far, would make it miss its deadline: its queue timeout, or the
  /// objective when it has none. Off: such a request waits and times out, or finishes late.
  bool deadline_admission = false;

  friend bool operator==(const adaptive_batching_options&,
                         const adaptive_batching_options&) = default;
};

} // namespace servekit
