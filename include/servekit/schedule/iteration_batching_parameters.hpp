#pragma once
/// \file
/// The iteration scheduler's knobs (iteration_batching_options) from a model config's
/// `parameters`, under the names the engines' Triton backends use, so a config written for one
/// of them reads unchanged:
///
///     sequence_batching { iterative_sequence: true }
///     parameters { key: "batch_scheduler_policy" value: { string_value: "max_utilization" } }
///     parameters { key: "max_num_seqs" value: { string_value: "64" } }
///
/// vLLM's names: max_num_seqs, max_num_batched_tokens, enable_chunked_prefill,
/// long_prefill_token_threshold, block_size, num_gpu_blocks, enable_prefix_caching,
/// max_model_len, scheduling_policy (fcfs | priority | slo_aware). TensorRT-LLM backend's names
/// where they mean the same: batch_scheduler_policy (max_utilization | guaranteed_no_evict |
/// static_batch), enable_chunked_context, enable_kv_cache_reuse, tokens_per_block,
/// max_tokens_in_paged_kv_cache (in tokens: num_gpu_blocks × block_size). servekit's own:
/// ttft_target_ms (the slo_aware order's default target). Other parameters are the backend's
/// and are left alone. Two names of one knob must agree.

#include <servekit/backend/instance_context.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/schedule/iteration_batching_options.hpp>

#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace servekit {

namespace detail {

[[noreturn]] inline void fail_iteration_parameter(std::string_view key, const std::string& why) {
  throw config_error{config_error_code::bad_value, "/parameters/" + std::string{key}, why};
}

/// The value of the first of `keys` present, and which it was; two present must be equal.
[[nodiscard]] inline std::optional<std::pair<std::string_view, std::string>>
iteration_parameter(const parameter_map& p, std::initializer_list<std::string_view> keys) {
  std::optional<std::pair<std::string_view, std::string>> found;
  for (const std::string_view key : keys) {
    const auto it = p.find(key);
    if (it == p.end()) {
      continue;
    }
    if (found && found->second != it->second) {
      fail_iteration_parameter(key, "'" + it->second + "' disagrees with '" +
                                        std::string{found->first} + "' = '" + found->second +
                                        "' (two names of one setting)");
    }
    found.emplace(key, it->second);
  }
  return found;
}

inline void read_iteration_count(const parameter_map& p,
                                 std::initializer_list<std::string_view> keys, std::uint32_t& out) {
  const auto v = iteration_parameter(p, keys);
  if (!v) {
    return;
  }
  std::uint64_t n = 0;
  const auto* end = v->second.data() + v->second.size();
  const auto [ptr, ec] = std::from_chars(v->second.data(), end, n);
  if (ec != std::errc{} || ptr != end || v->second.empty() ||
      n > std::numeric_limits<std::uint32_t>::max()) {
    fail_iteration_parameter(v->first,
                             "expected a non-negative integer below 2^32, got '" + v->second + "'");
  }
  out = static_cast<std::uint32_t>(n);
}

inline void read_iteration_flag(const parameter_map& p,
                                std::initializer_list<std::string_view> keys, bool& out) {
  const auto v = iteration_parameter(p, keys);
  if (!v) {
    return;
  }
  if (v->second == "true" || v->second == "1") {
    out = true;
  } else if (v->second == "false" || v->second == "0") {
    out = false;
  } else {
    fail_iteration_parameter(v->first, "expected true or false, got '" + v->second + "'");
  }
}

/// One of `choices`, by the name to_string gives it (the names configs use).
template <class Enum, std::size_t N>
void read_iteration_choice(const parameter_map& p, std::initializer_list<std::string_view> keys,
                           const std::array<Enum, N>& choices, Enum& out) {
  const auto v = iteration_parameter(p, keys);
  if (!v) {
    return;
  }
  std::string names;
  for (std::size_t i = 0; i < N; ++i) {
    if (to_string(choices[i]) == v->second) {
      out = choices[i];
      return;
    }
    names += std::string{i == 0       ? ""
                         : i + 1 == N ? " or "
                                      : ", "} +
             std::string{to_string(choices[i])};
  }
  fail_iteration_parameter(v->first, "expected " + names + ", got '" + v->second + "'");
}

} // namespace detail

/// The options `parameters` set over `defaults` (num_blocks has no default: a config sets
/// num_gpu_blocks or max_tokens_in_paged_kv_cache, or the backend fills it in from its memory).
/// Throws config_error (bad_value, "/parameters/<key>") for a value that does not parse or two
/// names that disagree; validate() is the caller's, once num_blocks is known.
[[nodiscard]] inline iteration_batching_options
read_iteration_batching(const parameter_map& parameters, iteration_batching_options defaults = {}) {
  using detail::read_iteration_count;
  using detail::read_iteration_flag;
  iteration_batching_options o = defaults;
  read_iteration_count(parameters, {"max_num_seqs"}, o.max_num_seqs);
  read_iteration_count(parameters, {"max_num_batched_tokens"}, o.max_num_batched_tokens);
  read_iteration_flag(parameters, {"enable_chunked_prefill", "enable_chunked_context"},
                      o.enable_chunked_prefill);
  read_iteration_count(parameters, {"long_prefill_token_threshold"},
                       o.long_prefill_token_threshold);
  read_iteration_count(parameters, {"block_size", "tokens_per_block"}, o.block_size);
  read_iteration_count(parameters, {"num_gpu_blocks"}, o.num_blocks);
  if (parameters.contains("max_tokens_in_paged_kv_cache")) {
    std::uint32_t tokens = 0;
    read_iteration_count(parameters, {"max_tokens_in_paged_kv_cache"}, tokens);
    const std::uint32_t blocks = o.block_size == 0 ? 0 : tokens / o.block_size;
    if (parameters.contains("num_gpu_blocks") && blocks != o.num_blocks) {
      detail::fail_iteration_parameter("max_tokens_in_paged_kv_cache",
                                       "'" + std::to_string(tokens) + "' tokens are " +
                                           std::to_string(blocks) + " blocks of " +
                                           std::to_string(o.block_size) + "; num_gpu_blocks says " +
                                           std::to_string(o.num_blocks));
    }
    o.num_blocks = blocks;
  }
  read_iteration_flag(parameters, {"enable_prefix_caching", "enable_kv_cache_reuse"},
                      o.enable_prefix_caching);
  read_iteration_count(parameters, {"max_model_len"}, o.max_model_len);
  detail::read_iteration_choice(parameters, {"batch_scheduler_policy", "capacity_policy"},
                                kv_capacity_policies, o.capacity);
  detail::read_iteration_choice(parameters, {"scheduling_policy"}, iteration_queue_orders, o.order);
  std::uint32_t ttft_ms = 0;
  read_iteration_count(parameters, {"ttft_target_ms"}, ttft_ms);
  if (ttft_ms > 0) {
    o.ttft_target = std::chrono::milliseconds{ttft_ms};
  }
  return o;
}

} // namespace servekit
