#pragma once
/// \file
/// Ensemble statistics: the ensemble's own counters plus one entry per step, shaped like the
/// composing-model statistics Triton reports for an ensemble (perf_analyzer's "Composing
/// models"), counted over the step requests this ensemble sent.

#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/metrics/statistics.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace servekit {

/// One step's share: its requests sent by this ensemble, and where their time went.
struct composing_statistics {
  std::size_t step = 0;
  std::string model_name;
  std::int64_t model_version = 1;
  duration_stat success; ///< step requests that succeeded, send to response
  duration_stat fail;
  duration_stat queue; ///< of the successful ones, as the composing model measured them
  duration_stat compute_input;
  duration_stat compute_infer;
  duration_stat compute_output;
};

/// An ensemble's statistics: the ensemble as one model (success, fail, and queue/compute summed
/// over its steps, as Triton aggregates them) plus each step.
struct ensemble_statistics : statistics_snapshot {
  std::vector<composing_statistics> steps;
};

namespace detail {

/// Live counters of an ensemble, written lock-free by whichever thread finishes a step.
class ensemble_counters {
public:
  struct step_info {
    std::string model_name;
    std::int64_t model_version = 1;
  };
  explicit ensemble_counters(std::vector<step_info> steps)
      : info_{std::move(steps)}, steps_(info_.size()) {}

  /// One step request's response.
  void record_step(std::size_t step, bool ok, std::uint64_t duration_ns,
                   const request_timing& t) noexcept {
    record(steps_[step], ok, duration_ns, t);
  }

  /// A request answered from the response cache at the ensemble's top level: a success with
  /// no queue time; no step ran (Triton's cache_hit).
  void record_cache_hit(std::uint64_t lookup_ns, std::uint64_t request_ns) noexcept {
    totals_.record_cache_hit(lookup_ns, request_ns);
  }
  /// A lookup that found nothing; `ns` covers the lookup and the insertion (Triton's cache_miss).
  void record_cache_miss(std::uint64_t ns) noexcept { totals_.cache_miss.add(ns); }

  /// One ensemble request's final response; `steps` is the sum of its steps' timings.
  void record_request(const status& result, std::uint64_t elements, std::uint64_t duration_ns,
                      const request_timing& steps) noexcept {
    record(totals_.timings, result.ok(), duration_ns, steps);
    if (!result.ok()) {
      totals_.count_failures(result.code() == status_code::cancelled ? failure_reason::canceled
                                                                     : failure_reason::other,
                             1);
      return;
    }
    totals_.inference_count.fetch_add(elements, std::memory_order_relaxed);
    totals_.execution_count.fetch_add(1, std::memory_order_relaxed);
    totals_.stamp_last_inference();
  }

  void add_pending(std::int64_t delta) noexcept { totals_.add_pending(delta); }

  [[nodiscard]] ensemble_statistics snapshot() const {
    ensemble_statistics s;
    totals_.load_into(s);
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      composing_statistics& step = s.steps.emplace_back();
      step.step = i;
      step.model_name = info_[i].model_name;
      step.model_version = info_[i].model_version;
      steps_[i].load_into(step);
    }
    return s;
  }

private:
  /// A success adds its duration and where its time went; a failure only its duration.
  static void record(atomic_timings& to, bool ok, std::uint64_t duration_ns,
                     const request_timing& t) noexcept {
    if (!ok) {
      to.fail.add(duration_ns);
      return;
    }
    to.success.add(duration_ns);
    to.queue.add(t.queue_ns);
    to.compute_input.add(t.compute_input_ns);
    to.compute_infer.add(t.compute_infer_ns);
    to.compute_output.add(t.compute_output_ns);
  }

  std::vector<step_info> info_;
  std::vector<atomic_timings> steps_;
  request_counters totals_; // the ensemble as one model
};

} // namespace detail
} // namespace servekit
