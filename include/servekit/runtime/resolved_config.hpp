#pragma once
/// \file
/// resolved_config: a model's options merged with its backend's declarations and checked, as
/// the shells need them. Both shells build their scheduler from this, so they decide alike.

#include <servekit/backend/backend.hpp>
#include <servekit/backend/batch_compatibility.hpp>
#include <servekit/backend/request_validator.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/config_bounds.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace servekit {

/// Hooks for deterministic tests, as Triton's environment variables provide them.
struct test_hooks {
  /// Hold the batcher until this many requests are queued, once (Triton's
  /// TRITONSERVER_DELAY_SCHEDULER). Unset: read SERVEKIT_DELAY_SCHEDULER from the environment.
  std::optional<std::size_t> delay_scheduler = std::nullopt;
  /// The sequence batcher also holds until this many requests are backlogged, once (Triton's
  /// TRITONSERVER_BACKLOG_DELAY_SCHEDULER). Unset: read SERVEKIT_BACKLOG_DELAY_SCHEDULER.
  std::optional<std::size_t> backlog_delay_scheduler = std::nullopt;

  [[nodiscard]] std::size_t resolved_delay_scheduler() const {
    return delay_scheduler ? *delay_scheduler : from_environment("SERVEKIT_DELAY_SCHEDULER");
  }
  [[nodiscard]] std::size_t resolved_backlog_delay_scheduler() const {
    return backlog_delay_scheduler ? *backlog_delay_scheduler
                                   : from_environment("SERVEKIT_BACKLOG_DELAY_SCHEDULER");
  }

private:
  [[nodiscard]] static std::size_t from_environment(const char* name) {
    const char* env = std::getenv(name); // NOLINT(concurrency-mt-unsafe)
    if (env == nullptr || *env == '\0') {
      return 0;
    }
    char* end = nullptr;
    const unsigned long long n = std::strtoull(env, &end, 10);
    return end != nullptr && *end == '\0' ? static_cast<std::size_t>(n) : 0;
  }
};

/// What a model runs with, after merging and checking.
struct resolved_config {
  std::int32_t max_batch_size = 0;
  std::vector<tensor_config> inputs;
  std::vector<tensor_config> outputs;
  scheduler_settings scheduler;
  /// Decoupled models: a final response overdue this long after execution started is replaced
  /// by a `deadline_exceeded` error (model_transaction_policy's servekit extension). 0: no limit.
  std::uint64_t final_response_timeout_microseconds = 0;
};

namespace detail {
/// Throws config_error unless every tensor of `configured` matches one of `declared` (none
/// declared: anything goes). Names in `state_outputs` (implicit states' outputs) are exempt.
SERVEKIT_DECL void check_declared(const std::vector<tensor_config>& configured,
                                  std::span<const tensor_declaration> declared, const char* field,
                                  std::span<const std::string> state_outputs = {});
} // namespace detail

/// Which scheduler a model type composes, as far as the configuration cares.
enum class scheduler_kind : std::uint8_t {
  default_scheduler, ///< one request per execution
  dynamic_batcher,   ///< `dynamic_batching`
  sequence_direct,   ///< `sequence_batching` with the direct strategy
  sequence_oldest,   ///< `sequence_batching` with the oldest strategy
  iteration,         ///< `sequence_batching { iterative_sequence: true }`: per forward pass
};

/// Merges `options` with backend `B`'s traits for a model whose scheduler is `kind`. Throws
/// config_error naming the field when they conflict or break Triton's rules.
template <class B>
[[nodiscard]] resolved_config resolve_config(const model_options& options, scheduler_kind kind,
                                             const test_hooks& hooks = {}) {
  const bool batching_scheduler = kind == scheduler_kind::dynamic_batcher;
  const bool sequence_scheduler =
      kind == scheduler_kind::sequence_direct || kind == scheduler_kind::sequence_oldest;
  const bool iteration_scheduler = kind == scheduler_kind::iteration;
  using traits = backend_traits<B>;
  resolved_config out;
  out.max_batch_size = options.max_batch_size.value_or(traits::max_batch_size);
  if (out.max_batch_size < 0) {
    throw config_error(config_error_code::bad_value, "/max_batch_size",
                       "'max_batch_size' must be non-negative value");
  }
  if (traits::max_batch_size > 0 && out.max_batch_size > traits::max_batch_size) {
    throw config_error(config_error_code::bad_value, "/max_batch_size",
                       "max_batch_size " + std::to_string(out.max_batch_size) +
                           " exceeds the backend's limit of " +
                           std::to_string(traits::max_batch_size));
  }
  if (!traits::batching && out.max_batch_size > 0) {
    throw config_error(config_error_code::bad_value, "/max_batch_size",
                       "the backend does not support batching, so max_batch_size must be 0");
  }
  detail::check_config_bounds(options, out.max_batch_size);
  detail::check_declared(options.input, traits::inputs, "input");
  std::vector<std::string> state_outputs;
  if (options.sequence_batching) {
    for (const auto& state : options.sequence_batching->state) {
      state_outputs.push_back(state.output_name);
    }
  }
  detail::check_declared(options.output, traits::outputs, "output", state_outputs);
  out.inputs = options.input.empty() ? to_configs(traits::inputs) : options.input;
  out.outputs = options.output.empty() ? to_configs(traits::outputs) : options.output;

  if (options.dynamic_batching && !batching_scheduler) {
    throw config_error(config_error_code::bad_value, "/dynamic_batching",
                       "the config asks for dynamic batching but the model type uses another "
                       "scheduler; compose it with servekit::dynamic_batcher<>");
  }
  const bool iterative = options.sequence_batching && options.sequence_batching->iterative_sequence;
  if (iterative && !iteration_scheduler) {
    // The dynamic and sequence batchers schedule whole requests; a model scheduled per forward
    // pass needs the iteration scheduler.
    throw config_error(config_error_code::bad_value, "/sequence_batching/iterative_sequence",
                       "iterative_sequence asks for the iteration scheduler "
                       "(docs/iteration-batching.md) but the model type uses another scheduler; "
                       "compose a generative backend with servekit::iteration_batcher<>");
  }
  if (options.sequence_batching && !iterative && !sequence_scheduler) {
    throw config_error(config_error_code::bad_value, "/sequence_batching",
                       iteration_scheduler
                           ? "the model type uses the iteration scheduler: its config says "
                             "sequence_batching { iterative_sequence: true } or no "
                             "sequence_batching at all"
                           : "the config asks for sequence batching but the model type uses "
                             "another scheduler; compose it with servekit::sequence_batcher<>");
  }
  if (const auto& policy = options.model_transaction_policy) {
    // Unset, the backend's trait decides; set, it must agree (Triton reads it from the config
    // and a backend checks it; here the backend's type fixes it).
    if (policy->decoupled != traits::decoupled) {
      throw config_error(config_error_code::bad_value, "/model_transaction_policy/decoupled",
                         std::string{"the config says decoupled: "} +
                             (policy->decoupled ? "true" : "false") +
                             " but the backend's traits say decoupled = " +
                             (traits::decoupled ? "true" : "false"));
    }
    if (policy->final_response_timeout_microseconds != 0 && !policy->decoupled) {
      throw config_error(config_error_code::bad_value,
                         "/model_transaction_policy/final_response_timeout_microseconds",
                         "final_response_timeout_microseconds applies only to a decoupled model "
                         "(model_transaction_policy.decoupled: true)");
    }
    out.final_response_timeout_microseconds = policy->final_response_timeout_microseconds;
  }
  out.scheduler.model_name = options.name;
  out.scheduler.max_batch_size = out.max_batch_size;
  if (batching_scheduler) {
    out.scheduler.dynamic_batching = options.dynamic_batching.value_or(dynamic_batching_options{});
    validate(out.scheduler.dynamic_batching, out.max_batch_size);
  }
  if (sequence_scheduler) {
    auto& sequence = out.scheduler.sequence_batching;
    sequence = options.sequence_batching.value_or(sequence_batching_options{});
    const auto wanted = kind == scheduler_kind::sequence_direct ? sequence_strategy::direct
                                                                : sequence_strategy::oldest;
    if (options.sequence_batching && sequence.strategy != wanted) {
      throw config_error(
          config_error_code::bad_value,
          wanted == sequence_strategy::direct ? "/sequence_batching/oldest"
                                              : "/sequence_batching/direct",
          std::string{"the config asks for the "} +
              (wanted == sequence_strategy::direct ? "oldest" : "direct") +
              " strategy but the model type uses servekit::sequence_batcher<" +
              (wanted == sequence_strategy::direct ? "servekit::direct" : "servekit::oldest") +
              ", ...>");
    }
    sequence.strategy = wanted;
    validate(sequence, out.max_batch_size, out.inputs, out.outputs);
    out.scheduler.hold_until_backlogged = hooks.resolved_backlog_delay_scheduler();
  }
  out.scheduler.compatibility = batch_compatibility{out.inputs, out.max_batch_size > 0};
  out.scheduler.hold_until_queued = hooks.resolved_delay_scheduler();
  return out;
}

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/runtime/impl/resolved_config.ipp>
#endif
