#pragma once
/// \file
/// What a generative model (the iteration batcher) reports beside Triton's statistics: the
/// gauges and counters LLM gateways route by, under the names vLLM exposes them (the Kubernetes
/// Gateway API Inference Extension reads vllm:num_requests_waiting, vllm:num_requests_running,
/// vllm:kv_cache_usage_perc and vllm:cache_config_info), and the time-to-first-token and
/// time-per-output-token histograms with vLLM's buckets.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

namespace servekit {

/// Upper bounds (seconds) of vLLM's vllm:time_to_first_token_seconds buckets.
inline constexpr std::array<double, 22> ttft_buckets_seconds{
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
/// Upper bounds (seconds) of vLLM's vllm:time_per_output_token_seconds buckets.
inline constexpr std::array<double, 19> tpot_buckets_seconds{
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
    0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};

/// A histogram as Prometheus exposes one: per-bucket counts (not cumulative; the last entry
/// counts what exceeds every bound), their sum and count.
struct latency_histogram {
  std::span<const double> bounds_seconds;
  std::array<std::uint64_t, 32> buckets{}; ///< [i] for bounds_seconds[i]; [bounds.size()]: +Inf
  double sum_seconds = 0;
  std::uint64_t count = 0;
};

/// A generative model's figures at one moment (each read atomically, not all at one instant).
struct generation_snapshot {
  std::uint64_t num_requests_running = 0; ///< sequences holding KV blocks
  std::uint64_t num_requests_waiting = 0; ///< queued, not yet admitted (or preempted)
  double kv_cache_usage = 0;              ///< referenced blocks / all blocks, in [0, 1]
  std::uint32_t block_size = 0;           ///< tokens per KV block
  std::uint64_t num_blocks = 0;           ///< KV blocks of every instance together
  std::uint64_t prompt_tokens = 0;        ///< prompt tokens of admitted requests
  std::uint64_t generation_tokens = 0;    ///< tokens generated
  std::uint64_t preemptions = 0;
  std::uint64_t prefix_cache_queries = 0; ///< tokens looked up in the prefix cache
  std::uint64_t prefix_cache_hits = 0;    ///< of which found
  std::uint64_t steps = 0;                ///< forward passes
  latency_histogram time_to_first_token{ttft_buckets_seconds};
  latency_histogram time_per_output_token{tpot_buckets_seconds};
};

namespace detail {

/// A histogram written by instance threads with relaxed atomics.
class atomic_histogram {
public:
  explicit atomic_histogram(std::span<const double> bounds) noexcept : bounds_{bounds} {}

  void observe(double seconds) noexcept {
    std::size_t i = 0;
    while (i < bounds_.size() && seconds > bounds_[i]) {
      ++i;
    }
    buckets_[i].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<std::uint64_t>(seconds * 1e9), std::memory_order_relaxed);
  }

  void load_into(latency_histogram& h) const noexcept {
    h.bounds_seconds = bounds_;
    for (std::size_t i = 0; i <= bounds_.size(); ++i) {
      h.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    }
    h.count = count_.load(std::memory_order_relaxed);
    h.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
  }

private:
  std::span<const double> bounds_;
  std::array<std::atomic<std::uint64_t>, 32> buckets_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_ns_{0};
};

} // namespace detail

} // namespace servekit
