#pragma once
/// \file
/// Ensemble statistics: the ensemble's own counters plus one entry per step, shaped like the
/// composing-model statistics Triton reports for an ensemble (perf_analyzer's "Composing
/// models"), counted over the step requests this ensemble sent.

#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/metrics/statistics.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
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
    auto& s = steps_[step];
    if (!ok) {
      add(s.fail, duration_ns);
      return;
    }
    add(s.success, duration_ns);
    add(s.queue, t.queue_ns);
    add(s.compute_input, t.compute_input_ns);
    add(s.compute_infer, t.compute_infer_ns);
    add(s.compute_output, t.compute_output_ns);
  }

  /// A request answered from the response cache at the ensemble's top level: a success with
  /// no queue time; no step ran (Triton's cache_hit).
  void record_cache_hit(std::uint64_t lookup_ns, std::uint64_t request_ns) noexcept {
    add(cache_hit_, lookup_ns);
    add(success_, request_ns);
    queue_.count.fetch_add(1, std::memory_order_relaxed);
  }
  /// A lookup that found nothing; `ns` covers the lookup and the insertion (Triton's cache_miss).
  void record_cache_miss(std::uint64_t ns) noexcept { add(cache_miss_, ns); }

  /// One ensemble request's final response; `steps` is the sum of its steps' timings.
  void record_request(const status& result, std::uint64_t elements, std::uint64_t duration_ns,
                      const request_timing& steps) noexcept {
    if (!result.ok()) {
      add(fail_, duration_ns);
      const auto reason = result.code() == status_code::cancelled ? failure_reason::canceled
                                                                  : failure_reason::other;
      failures_[static_cast<std::size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
      return;
    }
    add(success_, duration_ns);
    add(queue_, steps.queue_ns);
    add(compute_input_, steps.compute_input_ns);
    add(compute_infer_, steps.compute_infer_ns);
    add(compute_output_, steps.compute_output_ns);
    inference_count_.fetch_add(elements, std::memory_order_relaxed);
    execution_count_.fetch_add(1, std::memory_order_relaxed);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    last_inference_ms_.store(static_cast<std::uint64_t>(ms), std::memory_order_relaxed);
  }

  void add_pending(std::int64_t delta) noexcept {
    pending_.fetch_add(static_cast<std::uint64_t>(delta), std::memory_order_relaxed);
  }

  [[nodiscard]] ensemble_statistics snapshot() const {
    ensemble_statistics s;
    s.last_inference_ms = load(last_inference_ms_);
    s.inference_count = load(inference_count_);
    s.execution_count = load(execution_count_);
    s.success = load(success_);
    s.fail = load(fail_);
    s.queue = load(queue_);
    s.compute_input = load(compute_input_);
    s.compute_infer = load(compute_infer_);
    s.compute_output = load(compute_output_);
    s.cache_hit = load(cache_hit_);
    s.cache_miss = load(cache_miss_);
    s.pending_request_count = load(pending_);
    for (std::size_t i = 0; i < failure_reason_count; ++i) {
      s.failures[i] = load(failures_[i]);
    }
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      const auto& c = steps_[i];
      s.steps.push_back({i, info_[i].model_name, info_[i].model_version, load(c.success),
                         load(c.fail), load(c.queue), load(c.compute_input), load(c.compute_infer),
                         load(c.compute_output)});
    }
    return s;
  }

private:
  struct step_counters {
    atomic_duration success, fail, queue, compute_input, compute_infer, compute_output;
  };

  static void add(atomic_duration& d, std::uint64_t ns) noexcept { d.add(ns); }
  static std::uint64_t load(const std::atomic<std::uint64_t>& a) noexcept {
    return a.load(std::memory_order_relaxed);
  }
  static duration_stat load(const atomic_duration& d) noexcept { return d.load(); }

  std::vector<step_info> info_;
  std::vector<step_counters> steps_;
  std::atomic<std::uint64_t> last_inference_ms_{0};
  std::atomic<std::uint64_t> inference_count_{0};
  std::atomic<std::uint64_t> execution_count_{0};
  atomic_duration success_, fail_, queue_, compute_input_, compute_infer_, compute_output_;
  atomic_duration cache_hit_, cache_miss_;
  std::atomic<std::uint64_t> pending_{0};
  std::array<std::atomic<std::uint64_t>, failure_reason_count> failures_{};
};

} // namespace detail
} // namespace servekit
