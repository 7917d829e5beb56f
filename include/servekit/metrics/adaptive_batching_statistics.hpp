#pragma once
/// \file
/// What a model with the adaptive batcher (`dynamic_batcher<adaptive<...>>`) reports beside
/// Triton's statistics: the controller's current choices, what it has learned, and how requests
/// fare against the objective.

#include <cstdint>

namespace servekit {

/// The adaptive batcher as of a statistics snapshot (docs/adaptive-batching.md).
struct adaptive_batching_snapshot {
  std::uint64_t target_latency_us = 0;    ///< the objective (0: none)
  double target_percentile = 99.0;        ///< share of requests that should meet it, percent
  std::int64_t wait_for = 1;              ///< the batch size it currently waits for
  std::uint64_t max_delay_us = 0;         ///< how long it currently holds a batch open
  std::int64_t at_most = 0;               ///< the largest batch it currently forms
  double fixed_latency_us = 0.0;          ///< learned execution time: the fixed part
  double per_element_latency_us = 0.0;    ///< ... and the part per element
  std::uint64_t profile_samples = 0;      ///< batches the profile learned from
  double arrival_rate = 0.0;              ///< elements per second
  double recent_within_target = 1.0;      ///< share of about the last 1000 requests within it
  std::uint64_t requests = 0;             ///< executed since the model loaded
  std::uint64_t within_target = 0;        ///< ... of which answered within the objective
  std::uint64_t refused_for_deadline = 0; ///< refused by deadline-aware admission
  double controller_value = 0.0; ///< the rule's own knob: latency_target's correction factor,
                                 ///< the hill climb's in-flight limit, AIMD's batch-size cap

  friend bool operator==(const adaptive_batching_snapshot&,
                         const adaptive_batching_snapshot&) = default;
};

} // namespace servekit
