#pragma once
/// \file
/// The adaptive batcher's state as its model's statistics report it.

#include <servekit/core/clock.hpp>
#include <servekit/metrics/adaptive_batching_statistics.hpp>
#include <servekit/schedule/adaptive_batcher.hpp>
#include <servekit/schedule/batching_controllers.hpp>

#include <algorithm>
#include <cstdint>

namespace servekit {

/// `core`'s controller and signals as of `now`: what statistics, the stats endpoint and
/// /metrics show of a model with `dynamic_batcher<adaptive<Controller>>`.
template <batching_controller Controller>
[[nodiscard]] adaptive_batching_snapshot
adaptive_snapshot(const adaptive_batch_core<Controller>& core, time_point now) {
  const batching_signals& s = core.signals();
  const batching_decision& d = core.last_decision();
  adaptive_batching_snapshot out;
  out.target_latency_us = static_cast<std::uint64_t>(s.target.count() / 1000);
  out.target_percentile = s.percentile;
  out.wait_for = d.wait_for;
  out.max_delay_us = static_cast<std::uint64_t>(d.max_delay.count() / 1000);
  out.at_most = std::min(d.at_most, core.max_batch_size());
  out.fixed_latency_us = s.profile.fixed_seconds() * 1e6;
  out.per_element_latency_us = s.profile.per_element_seconds() * 1e6;
  out.profile_samples = s.profile.samples();
  out.arrival_rate = s.rate.per_second(now);
  out.recent_within_target = s.recent_within_target;
  out.requests = s.requests;
  out.within_target = s.within_target;
  out.refused_for_deadline = core.refused_for_deadline();
  out.controller_value = core.controller().value();
  return out;
}

/// Whether `Core` is an adaptive batcher's (has an adaptive_snapshot).
template <class Core>
concept reports_adaptive_batching = requires(const Core& core, time_point now) {
  { adaptive_snapshot(core, now) } -> std::same_as<adaptive_batching_snapshot>;
};

} // namespace servekit
