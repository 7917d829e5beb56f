#pragma once
/// \file
/// The knobs of iteration-level (continuous) batching, named after the engines they reproduce:
/// vLLM's scheduler config (max_num_seqs, max_num_batched_tokens, enable_chunked_prefill,
/// long_prefill_token_threshold, block_size, enable_prefix_caching), TensorRT-LLM's capacity
/// policies (GUARANTEED_NO_EVICT, MAX_UTILIZATION, STATIC_BATCH) and queue orders.

#include <servekit/core/clock.hpp>
#include <servekit/core/config_error.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace servekit {

/// Which sequences may hold KV blocks (TensorRT-LLM's CapacitySchedulerPolicy).
enum class kv_capacity_policy : std::uint8_t {
  /// Admit a sequence only when the blocks of its whole life (prompt + max_new_tokens) are free
  /// beside those every running sequence may still need; never preempt. TensorRT-LLM's default,
  /// and TGI's behaviour.
  guaranteed_no_evict,
  /// Admit while the blocks of this step fit; when a running sequence cannot grow, preempt
  /// (recompute) the last admitted one (or, ordered by priority, the least urgent). vLLM v1.
  max_utilization,
  /// Admit only when nothing runs; then as guaranteed_no_evict (request-level batching).
  static_batch,
};

/// The order of the waiting queue.
enum class iteration_queue_order : std::uint8_t {
  fcfs,     ///< arrival order; a preempted sequence goes back to the head (vLLM's `fcfs`)
  priority, ///< smaller `priority` first, then arrival (vLLM's `priority`)
  /// servekit's: earliest time-to-first-token deadline first (arrival + ttft_target), and a
  /// sequence that can no longer meet it after every one that still can (it no longer counts
  /// for goodput; serving it first would make others miss too). Preempted ones go first.
  slo_aware,
};

struct iteration_batching_options {
  std::uint32_t max_num_seqs = 128;            ///< running sequences at most
  std::uint32_t max_num_batched_tokens = 2048; ///< tokens of one step at most (the budget)
  /// Split a prompt over several steps when it does not fit the budget. Without it, a prompt
  /// that does not fit stops admission for this step.
  bool enable_chunked_prefill = true;
  /// When > 0, a sequence gets at most this many tokens per step (keeps long prompts from
  /// starving decodes). vLLM's long_prefill_token_threshold.
  std::uint32_t long_prefill_token_threshold = 0;
  kv_capacity_policy capacity = kv_capacity_policy::max_utilization;
  iteration_queue_order order = iteration_queue_order::fcfs;
  std::uint32_t block_size = 16; ///< tokens per KV block
  std::uint32_t num_blocks = 0;  ///< KV blocks of the cache (required)
  bool enable_prefix_caching = true;
  std::uint32_t max_model_len = 2048; ///< tokens of a sequence (prompt + generated) at most
  /// slo_aware: the time-to-first-token target of a sequence that gives none.
  duration ttft_target = std::chrono::milliseconds{450};

  friend bool operator==(const iteration_batching_options&,
                         const iteration_batching_options&) = default;
};

/// Names as configs spell them ("guaranteed_no_evict", "max_utilization", "static_batch";
/// "fcfs", "priority", "slo_aware").
[[nodiscard]] constexpr std::string_view to_string(kv_capacity_policy p) noexcept {
  switch (p) {
  case kv_capacity_policy::guaranteed_no_evict:
    return "guaranteed_no_evict";
  case kv_capacity_policy::max_utilization:
    return "max_utilization";
  case kv_capacity_policy::static_batch:
    return "static_batch";
  }
  return "?";
}
[[nodiscard]] constexpr std::string_view to_string(iteration_queue_order o) noexcept {
  switch (o) {
  case iteration_queue_order::fcfs:
    return "fcfs";
  case iteration_queue_order::priority:
    return "priority";
  case iteration_queue_order::slo_aware:
    return "slo_aware";
  }
  return "?";
}

/// Every value of each, in declaration order (for parsers and tests).
inline constexpr std::array kv_capacity_policies{kv_capacity_policy::guaranteed_no_evict,
                                                 kv_capacity_policy::max_utilization,
                                                 kv_capacity_policy::static_batch};
inline constexpr std::array iteration_queue_orders{
    iteration_queue_order::fcfs, iteration_queue_order::priority, iteration_queue_order::slo_aware};

/// Throws config_error (bad_value, with the JSON pointer of the field under `path`) when `o`
/// breaks a rule: every count at least 1, num_blocks given, max_num_batched_tokens ≥
/// max_num_seqs (as vLLM checks), and, unless prompts may be chunked, a budget that holds a whole
/// max_model_len prompt.
inline void validate(const iteration_batching_options& o,
                     std::string_view path = "/sequence_batching/iteration_batching") {
  auto fail = [&](std::string_view field, const std::string& message) {
    throw config_error{config_error_code::bad_value, std::string{path} + "/" + std::string{field},
                       message};
  };
  if (o.max_num_seqs == 0) {
    fail("max_num_seqs", "must be at least 1");
  }
  if (o.max_num_batched_tokens < o.max_num_seqs) {
    fail("max_num_batched_tokens", "must be at least max_num_seqs (" +
                                       std::to_string(o.max_num_seqs) + "), got " +
                                       std::to_string(o.max_num_batched_tokens));
  }
  if (o.block_size == 0) {
    fail("block_size", "must be at least 1");
  }
  if (o.num_blocks == 0) {
    fail("num_blocks", "must be at least 1 (the KV cache's size in blocks)");
  }
  if (o.max_model_len < 2) {
    fail("max_model_len", "must be at least 2 (a prompt token and a generated one)");
  }
  if (!o.enable_chunked_prefill && o.max_num_batched_tokens < o.max_model_len) {
    fail("max_num_batched_tokens", "without enable_chunked_prefill it must hold a max_model_len (" +
                                       std::to_string(o.max_model_len) + ") prompt, got " +
                                       std::to_string(o.max_num_batched_tokens));
  }
}

} // namespace servekit
