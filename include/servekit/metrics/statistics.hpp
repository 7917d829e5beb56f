#pragma once
/// \file
/// Model statistics shaped like Triton's statistics extension, updated lock-free by the shells.

#include <servekit/core/batch_close_reason.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/metrics/adaptive_batching_statistics.hpp>
#include <servekit/metrics/generation_statistics.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace servekit {

/// A count and a total duration, as in Triton's StatisticDuration `{count, ns}`.
struct duration_stat {
  std::uint64_t count = 0;
  std::uint64_t ns = 0;
  friend bool operator==(const duration_stat&, const duration_stat&) = default;
};

/// Executions of one batch size (Triton's InferBatchStatistics).
struct batch_size_stat {
  std::uint64_t batch_size = 0;
  duration_stat compute_input;
  duration_stat compute_infer;
  duration_stat compute_output;
};

/// Why requests failed, as the `reason` label of nv_inference_request_failure.
enum class failure_reason : std::uint8_t {
  rejected, ///< queue full or queue timeout
  canceled, ///< cancelled while queued, or by a cancelling shutdown
  backend,  ///< the backend threw or returned an error
  other,
};
inline constexpr std::size_t failure_reason_count = 4;

[[nodiscard]] constexpr std::string_view to_string(failure_reason r) noexcept {
  switch (r) {
  case failure_reason::rejected:
    return "REJECTED";
  case failure_reason::canceled:
    return "CANCELED";
  case failure_reason::backend:
    return "BACKEND";
  case failure_reason::other:
    return "OTHER";
  }
  return "OTHER";
}

/// The responses of one index of decoupled requests (Triton's InferResponseStatistics, keyed
/// by the response's position among its request's responses: 0 for the first). Durations run
/// from the start of the request's execution to the response.
struct response_index_stat {
  std::uint64_t index = 0;
  duration_stat success;        ///< responses with outputs, or non-final empty ones
  duration_stat fail;           ///< error responses
  duration_stat empty_response; ///< final responses carrying no outputs (flags only)
  friend bool operator==(const response_index_stat&, const response_index_stat&) = default;
};

/// How one response of a decoupled request ended, for response_stats.
enum class response_outcome : std::uint8_t { success, fail, empty };

/// Per-instance counters.
struct instance_stat {
  std::string name;
  std::uint64_t execution_count = 0;
  std::uint64_t inference_count = 0;
  duration_stat compute_infer;
};

/// A consistent-enough copy of a model's statistics (each counter read atomically; counters
/// are not read at one instant, as in Triton).
struct statistics_snapshot {
  std::uint64_t last_inference_ms = 0; ///< ms since the Unix epoch; 0 if none
  std::uint64_t inference_count = 0;   ///< sum of batch sizes of successful requests
  std::uint64_t execution_count = 0;   ///< executions (batches)
  duration_stat success;               ///< request duration of successful requests
  duration_stat fail;                  ///< request duration of failed requests
  duration_stat queue;
  duration_stat compute_input;
  duration_stat compute_infer;
  duration_stat compute_output;
  /// Requests answered from the response cache; ns: the lookup and the copy of the response.
  duration_stat cache_hit;
  /// Requests looked up and not found; ns: the lookup and the insertion of the new response.
  duration_stat cache_miss;
  /// servekit extension: executions that waited for rate-limiter resources, and how long.
  duration_stat rate_limiter_wait;
  /// servekit extension: warmup executions (model_warmup) and their duration. Warmup counts
  /// nowhere else, as in Triton.
  duration_stat warmup;
  std::uint64_t pending_request_count = 0;  ///< accepted, not yet started by a backend
  std::uint64_t padding_elements = 0;       ///< rows backends ran as padding (record_padding)
  std::uint64_t padded_executions = 0;      ///< executions that ran any padding
  std::vector<batch_size_stat> batch_stats; ///< only sizes that executed, ascending
  std::array<std::uint64_t, batch_close_reason_count> close_reasons{};
  std::array<std::uint64_t, failure_reason_count> failures{};
  std::vector<instance_stat> instances;
  /// Decoupled models: per response index, ascending (empty for other models).
  std::vector<response_index_stat> response_stats;
  /// Generative models (the iteration batcher): the scheduler's gauges and token latencies.
  std::optional<generation_snapshot> generation;
  /// Models with the adaptive batcher: its current choices and what it learned.
  std::optional<adaptive_batching_snapshot> adaptive_batching;

  [[nodiscard]] std::uint64_t closed_by(batch_close_reason r) const noexcept {
    return close_reasons[static_cast<std::size_t>(r)];
  }
  [[nodiscard]] std::uint64_t failed_by(failure_reason r) const noexcept {
    return failures[static_cast<std::size_t>(r)];
  }
  [[nodiscard]] const batch_size_stat* batch_size(std::uint64_t size) const noexcept {
    for (const auto& b : batch_stats) {
      if (b.batch_size == size) {
        return &b;
      }
    }
    return nullptr;
  }
};

namespace detail {
/// A `duration_stat` that many threads add to: relaxed atomics, read one counter at a time.
struct atomic_duration {
  std::atomic<std::uint64_t> count{0};
  std::atomic<std::uint64_t> ns{0};

  void add(std::uint64_t duration_ns) noexcept {
    count.fetch_add(1, std::memory_order_relaxed);
    ns.fetch_add(duration_ns, std::memory_order_relaxed);
  }
  [[nodiscard]] duration_stat load() const noexcept {
    return {count.load(std::memory_order_relaxed), ns.load(std::memory_order_relaxed)};
  }
};

[[nodiscard]] inline std::uint64_t load_relaxed(const std::atomic<std::uint64_t>& a) noexcept {
  return a.load(std::memory_order_relaxed);
}

/// How requests ended and where their time went: the durations that statistics_snapshot and
/// an ensemble's composing_statistics both report, under the same names.
struct atomic_timings {
  atomic_duration success;
  atomic_duration fail;
  atomic_duration queue;
  atomic_duration compute_input;
  atomic_duration compute_infer;
  atomic_duration compute_output;

  /// Copies each duration into the field of `Snapshot` that has its name.
  template <class Snapshot>
  void load_into(Snapshot& s) const noexcept {
    s.success = success.load();
    s.fail = fail.load();
    s.queue = queue.load();
    s.compute_input = compute_input.load();
    s.compute_infer = compute_infer.load();
    s.compute_output = compute_output.load();
  }
};

/// The counters a model and an ensemble both keep about the requests they answer, and the one
/// place that copies them into a statistics_snapshot.
struct request_counters {
  std::atomic<std::uint64_t> last_inference_ms{0};
  std::atomic<std::uint64_t> inference_count{0};
  std::atomic<std::uint64_t> execution_count{0};
  atomic_timings timings;
  atomic_duration cache_hit;
  atomic_duration cache_miss;
  std::atomic<std::uint64_t> pending{0};
  std::array<std::atomic<std::uint64_t>, failure_reason_count> failures{};

  /// A request answered from the response cache: it counts as a success (with its queue time,
  /// here none) but not as an inference or an execution, as in Triton.
  void record_cache_hit(std::uint64_t lookup_ns, std::uint64_t request_ns) noexcept {
    cache_hit.add(lookup_ns);
    timings.success.add(request_ns);
    timings.queue.count.fetch_add(1, std::memory_order_relaxed);
  }

  void count_failures(failure_reason reason, std::uint64_t n) noexcept {
    failures[static_cast<std::size_t>(reason)].fetch_add(n, std::memory_order_relaxed);
  }

  void add_pending(std::int64_t delta) noexcept {
    pending.fetch_add(static_cast<std::uint64_t>(delta), std::memory_order_relaxed);
  }

  /// Records now (ms since the Unix epoch) as the time of the last inference.
  void stamp_last_inference() noexcept {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    last_inference_ms.store(static_cast<std::uint64_t>(ms), std::memory_order_relaxed);
  }

  /// Fills the snapshot fields these counters keep; leaves the others as they are.
  void load_into(statistics_snapshot& s) const noexcept {
    s.last_inference_ms = load_relaxed(last_inference_ms);
    s.inference_count = load_relaxed(inference_count);
    s.execution_count = load_relaxed(execution_count);
    timings.load_into(s);
    s.cache_hit = cache_hit.load();
    s.cache_miss = cache_miss.load();
    s.pending_request_count = load_relaxed(pending);
    for (std::size_t i = 0; i < failure_reason_count; ++i) {
      s.failures[i] = load_relaxed(failures[i]);
    }
  }
};
} // namespace detail

/// Live statistics of one model. Writers (instance threads, submitters) use relaxed atomic
/// adds, aggregated per batch so a batch of 32 costs the same as a batch of 1.
class model_statistics {
public:
  /// Batch sizes 1..max_batch_size get their own counters; larger ones are not possible.
  model_statistics(std::size_t max_batch_size, std::vector<std::string> instance_names)
      : batch_sizes_(std::max<std::size_t>(max_batch_size, 1) + 1),
        instances_(instance_names.size()), instance_names_(std::move(instance_names)) {}

  /// Timing of one execution.
  struct execution {
    std::size_t instance = 0;
    std::uint64_t batch_size = 0;       ///< elements executed
    std::uint64_t requests = 0;         ///< requests in the batch
    std::uint64_t ok_requests = 0;      ///< of which succeeded
    std::uint64_t ok_elements = 0;      ///< elements of the requests that succeeded
    std::uint64_t queue_ns = 0;         ///< summed over the successful requests
    std::uint64_t request_ok_ns = 0;    ///< summed request durations, successful requests
    std::uint64_t request_fail_ns = 0;  ///< summed request durations, failed requests
    std::uint64_t compute_input_ns = 0; ///< of the batch (each request is charged this)
    std::uint64_t compute_infer_ns = 0;
    std::uint64_t compute_output_ns = 0;
    std::uint64_t padding_elements = 0; ///< rows run beyond batch_size (batch::record_padding)
    batch_close_reason reason = batch_close_reason::queue_drained;
    bool backend_failed = false;
  };

  void record_execution(const execution& e) noexcept {
    const auto add = [](std::atomic<std::uint64_t>& a, std::uint64_t v) {
      a.fetch_add(v, std::memory_order_relaxed);
    };
    const std::uint64_t failed = e.requests - e.ok_requests;
    auto& t = totals_.timings;
    add(totals_.execution_count, 1);
    add(totals_.inference_count, e.ok_elements);
    add(t.success.count, e.ok_requests);
    add(t.success.ns, e.request_ok_ns);
    add(t.queue.count, e.ok_requests);
    add(t.queue.ns, e.queue_ns);
    add(t.compute_input.count, e.ok_requests);
    add(t.compute_input.ns, e.compute_input_ns * e.ok_requests);
    add(t.compute_infer.count, e.ok_requests);
    add(t.compute_infer.ns, e.compute_infer_ns * e.ok_requests);
    add(t.compute_output.count, e.ok_requests);
    add(t.compute_output.ns, e.compute_output_ns * e.ok_requests);
    if (failed != 0) {
      add(t.fail.count, failed);
      add(t.fail.ns, e.request_fail_ns);
      totals_.count_failures(e.backend_failed ? failure_reason::backend : failure_reason::other,
                             failed);
    }
    add(close_reasons_[static_cast<std::size_t>(e.reason)], 1);
    if (e.padding_elements != 0) {
      add(padding_elements_, e.padding_elements);
      add(padded_executions_, 1);
    }
    if (e.batch_size < batch_sizes_.size()) {
      auto& b = batch_sizes_[e.batch_size];
      add(b.compute_input.count, 1);
      add(b.compute_input.ns, e.compute_input_ns);
      add(b.compute_infer.count, 1);
      add(b.compute_infer.ns, e.compute_infer_ns);
      add(b.compute_output.count, 1);
      add(b.compute_output.ns, e.compute_output_ns);
    }
    if (e.instance < instances_.size()) {
      auto& i = instances_[e.instance];
      add(i.execution_count, 1);
      add(i.inference_count, e.ok_elements);
      add(i.compute_infer.count, 1);
      add(i.compute_infer.ns, e.compute_infer_ns);
    }
    totals_.stamp_last_inference();
  }

  /// A request that failed without executing (timeout, cancellation, shutdown).
  void record_early_failure(failure_reason reason, std::uint64_t request_ns) noexcept {
    totals_.timings.fail.add(request_ns);
    totals_.count_failures(reason, 1);
  }

  /// A request answered from the response cache: it counts as a success (with its queue time,
  /// here none) but not as an inference or an execution, as in Triton.
  void record_cache_hit(std::uint64_t lookup_ns, std::uint64_t request_ns) noexcept {
    totals_.record_cache_hit(lookup_ns, request_ns);
  }

  /// A request looked up in the response cache and not found; `ns` covers the lookup and, once
  /// the response is known, its insertion.
  void record_cache_miss(std::uint64_t ns) noexcept { totals_.cache_miss.add(ns); }

  /// An execution that waited `ns` for rate-limiter resources.
  void record_rate_limiter_wait(std::uint64_t ns) noexcept { rate_limiter_wait_.add(ns); }

  /// One warmup execution (model_warmup) that took `ns`.
  void record_warmup(std::uint64_t ns) noexcept { warmup_.add(ns); }

  /// Response number `index` (0 for the first) of a decoupled request, `ns` after its
  /// execution started. Lock-free for the first `response_index_capacity` indices.
  void record_response(std::uint64_t index, response_outcome outcome, std::uint64_t ns) {
    if (index < response_index_capacity) {
      responses_[index].of(outcome).add(ns);
      return;
    }
    const std::lock_guard lock{late_responses_mutex_};
    auto& stat = late_responses_[index];
    duration_stat& d = outcome == response_outcome::success ? stat.success
                       : outcome == response_outcome::fail  ? stat.fail
                                                            : stat.empty_response;
    ++d.count;
    d.ns += ns;
  }

  /// Response indices counted without a lock; later ones take a mutex.
  static constexpr std::size_t response_index_capacity = 64;

  /// nv_inference_pending_request_count: accepted and not yet started.
  void add_pending(std::int64_t delta) noexcept { totals_.add_pending(delta); }

  [[nodiscard]] statistics_snapshot snapshot() const {
    using detail::load_relaxed;
    statistics_snapshot s;
    totals_.load_into(s);
    s.rate_limiter_wait = rate_limiter_wait_.load();
    s.warmup = warmup_.load();
    s.padding_elements = load_relaxed(padding_elements_);
    s.padded_executions = load_relaxed(padded_executions_);
    for (std::size_t size = 1; size < batch_sizes_.size(); ++size) {
      const auto& b = batch_sizes_[size];
      if (load_relaxed(b.compute_infer.count) != 0) {
        s.batch_stats.push_back(
            {size, b.compute_input.load(), b.compute_infer.load(), b.compute_output.load()});
      }
    }
    for (std::size_t i = 0; i < batch_close_reason_count; ++i) {
      s.close_reasons[i] = load_relaxed(close_reasons_[i]);
    }
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      const auto& in = instances_[i];
      s.instances.push_back({instance_names_[i], load_relaxed(in.execution_count),
                             load_relaxed(in.inference_count), in.compute_infer.load()});
    }
    for (std::size_t i = 0; i < response_index_capacity; ++i) {
      const atomic_response& r = responses_[i];
      response_index_stat stat{i, r.success.load(), r.fail.load(), r.empty_response.load()};
      if (stat.success.count + stat.fail.count + stat.empty_response.count != 0) {
        s.response_stats.push_back(stat);
      }
    }
    {
      const std::lock_guard lock{late_responses_mutex_};
      for (const auto& [index, stat] : late_responses_) {
        response_index_stat copy = stat;
        copy.index = index;
        s.response_stats.push_back(copy);
      }
    }
    return s;
  }

private:
  using atomic_duration = detail::atomic_duration;
  struct atomic_batch_size {
    atomic_duration compute_input;
    atomic_duration compute_infer;
    atomic_duration compute_output;
  };
  struct atomic_response {
    atomic_duration success;
    atomic_duration fail;
    atomic_duration empty_response;
    atomic_duration& of(response_outcome o) noexcept {
      return o == response_outcome::success ? success
             : o == response_outcome::fail  ? fail
                                            : empty_response;
    }
  };
  struct atomic_instance {
    std::atomic<std::uint64_t> execution_count{0};
    std::atomic<std::uint64_t> inference_count{0};
    atomic_duration compute_infer;
  };

  detail::request_counters totals_; // what an ensemble counts too
  atomic_duration rate_limiter_wait_;
  atomic_duration warmup_;
  std::atomic<std::uint64_t> padding_elements_{0};
  std::atomic<std::uint64_t> padded_executions_{0};
  std::array<std::atomic<std::uint64_t>, batch_close_reason_count> close_reasons_{};
  std::vector<atomic_batch_size> batch_sizes_;
  std::vector<atomic_instance> instances_;
  std::vector<std::string> instance_names_;

  // Per response index, for decoupled models (3 KiB; zero for the others).
  std::unique_ptr<atomic_response[]> responses_ =
      std::make_unique<atomic_response[]>(response_index_capacity);
  mutable std::mutex late_responses_mutex_;
  std::map<std::uint64_t, response_index_stat> late_responses_;
};

} // namespace servekit
