#pragma once
/// \file
/// Definitions for config/model_config_json.hpp: save_model_config, writing model_options as
/// Triton model-configuration JSON. Compiled once into servekit::server, or included by
/// model_config_json.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/config/detail/model_config_json.hpp>
#include <servekit/config/model_config_json.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/server_tier.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/runtime/model_options.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace servekit {

namespace detail {

// ------------------------------------------------------------------------------------------
// Saving: Triton's spelling; fields at their default value are left out

[[nodiscard]] SERVEKIT_SERVER_DECL json write_dims(const shape& dims) {
  json out = json::array();
  for (const auto dim : dims.dims()) {
    out.push_back(dim);
  }
  return out;
}

SERVEKIT_SERVER_DECL void write_flag_if_set(json& out, const char* key, bool flag) {
  if (flag) {
    out[key] = true;
  }
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_tensor(const tensor_config& tensor) {
  json out = json::object();
  out["name"] = tensor.name;
  out["data_type"] = std::string{to_config_string(tensor.type)};
  out["dims"] = write_dims(tensor.dims);
  write_flag_if_set(out, "is_shape_tensor", tensor.is_shape_tensor);
  write_flag_if_set(out, "allow_ragged_batch", tensor.allow_ragged_batch);
  write_flag_if_set(out, "optional", tensor.optional);
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_tensors(const std::vector<tensor_config>& tensors) {
  json out = json::array();
  for (const auto& tensor : tensors) {
    out.push_back(write_tensor(tensor));
  }
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_queue_policy(const queue_policy& policy) {
  const queue_policy defaults;
  json out = json::object();
  if (policy.timeout_action != defaults.timeout_action) {
    out["timeout_action"] = enum_spelling(policy.timeout_action, timeout_action_names);
  }
  if (policy.default_timeout_microseconds != defaults.default_timeout_microseconds) {
    out["default_timeout_microseconds"] = policy.default_timeout_microseconds;
  }
  write_flag_if_set(out, "allow_timeout_override", policy.allow_timeout_override);
  if (policy.max_queue_size != defaults.max_queue_size) {
    out["max_queue_size"] = policy.max_queue_size;
  }
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json
write_dynamic_batching(const dynamic_batching_options& options) {
  const auto& priority = options.priority;
  json out = json::object();
  if (!options.preferred_batch_size.empty()) {
    out["preferred_batch_size"] = options.preferred_batch_size;
  }
  if (options.max_queue_delay_microseconds != 0) {
    out["max_queue_delay_microseconds"] = options.max_queue_delay_microseconds;
  }
  write_flag_if_set(out, "preserve_ordering", options.preserve_ordering);
  if (priority.priority_levels != 0) {
    out["priority_levels"] = priority.priority_levels;
  }
  if (priority.default_priority_level != 0) {
    out["default_priority_level"] = priority.default_priority_level;
  }
  if (priority.default_queue_policy != queue_policy{}) {
    out["default_queue_policy"] = write_queue_policy(priority.default_queue_policy);
  }
  if (!priority.priority_queue_policy.empty()) {
    json policies = json::object();
    for (const auto& [level, policy] : priority.priority_queue_policy) {
      policies[std::to_string(level)] = write_queue_policy(policy);
    }
    out["priority_queue_policy"] = std::move(policies);
  }
  return out;
}

/// Protobuf's JSON spelling: a number, or "NaN", "Infinity", "-Infinity" (JSON has none of them).
[[nodiscard]] SERVEKIT_SERVER_DECL json write_float(float value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "Infinity" : "-Infinity";
  }
  return value;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_sequence_control(const sequence_control& control) {
  json out = json::object();
  out["kind"] = enum_spelling(control.kind, control_kind_names);
  if (!control.int32_false_true.empty()) {
    out["int32_false_true"] = control.int32_false_true;
  }
  if (!control.fp32_false_true.empty()) {
    json values = json::array();
    for (const float value : control.fp32_false_true) {
      values.push_back(write_float(value));
    }
    out["fp32_false_true"] = std::move(values);
  }
  if (!control.bool_false_true.empty()) {
    out["bool_false_true"] = control.bool_false_true;
  }
  if (control.data_type != data_type::invalid) {
    out["data_type"] = std::string{to_config_string(control.data_type)};
  }
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_control_input(const control_input& input) {
  json controls = json::array();
  for (const auto& control : input.control) {
    controls.push_back(write_sequence_control(control));
  }
  return json{{"name", input.name}, {"control", std::move(controls)}};
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_initial_state(const initial_state_options& initial) {
  json out = json::object();
  if (initial.data_type != data_type::invalid) {
    out["data_type"] = std::string{to_config_string(initial.data_type)};
  }
  out["dims"] = write_dims(initial.dims);
  if (!initial.name.empty()) {
    out["name"] = initial.name;
  }
  write_flag_if_set(out, "zero_data", initial.zero_data);
  if (!initial.data_file.empty()) {
    out["data_file"] = initial.data_file;
  }
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_state(const state_options& state) {
  json out = json::object();
  out["input_name"] = state.input_name;
  out["output_name"] = state.output_name;
  if (state.data_type != data_type::invalid) {
    out["data_type"] = std::string{to_config_string(state.data_type)};
  }
  out["dims"] = write_dims(state.dims);
  if (!state.initial_state.empty()) {
    json initial = json::array();
    for (const auto& entry : state.initial_state) {
      initial.push_back(write_initial_state(entry));
    }
    out["initial_state"] = std::move(initial);
  }
  write_flag_if_set(out, "use_same_buffer_for_input_output",
                    state.use_same_buffer_for_input_output);
  write_flag_if_set(out, "use_growable_memory", state.use_growable_memory);
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json
write_oldest_strategy(const oldest_strategy_options& oldest) {
  json out = json::object();
  if (oldest.max_candidate_sequences != 0) {
    out["max_candidate_sequences"] = oldest.max_candidate_sequences;
  }
  if (!oldest.preferred_batch_size.empty()) {
    out["preferred_batch_size"] = oldest.preferred_batch_size;
  }
  if (oldest.max_queue_delay_microseconds != 0) {
    out["max_queue_delay_microseconds"] = oldest.max_queue_delay_microseconds;
  }
  write_flag_if_set(out, "preserve_ordering", oldest.preserve_ordering);
  return out;
}

/// Writes `oldest` whenever it is the strategy, and `direct` only when it has settings (it is
/// the default).
[[nodiscard]] SERVEKIT_SERVER_DECL json
write_sequence_batching(const sequence_batching_options& options) {
  json out = json::object();
  if (options.max_sequence_idle_microseconds !=
      sequence_batching_options{}.max_sequence_idle_microseconds) {
    out["max_sequence_idle_microseconds"] = options.max_sequence_idle_microseconds;
  }
  if (options.strategy == sequence_strategy::oldest) {
    out["oldest"] = write_oldest_strategy(options.oldest);
  } else if (options.direct != direct_strategy_options{}) {
    json direct = json::object();
    if (options.direct.max_queue_delay_microseconds != 0) {
      direct["max_queue_delay_microseconds"] = options.direct.max_queue_delay_microseconds;
    }
    if (options.direct.minimum_slot_utilization != 0.0F) {
      direct["minimum_slot_utilization"] = write_float(options.direct.minimum_slot_utilization);
    }
    out["direct"] = std::move(direct);
  }
  if (!options.control_input.empty()) {
    json inputs = json::array();
    for (const auto& input : options.control_input) {
      inputs.push_back(write_control_input(input));
    }
    out["control_input"] = std::move(inputs);
  }
  if (!options.state.empty()) {
    json states = json::array();
    for (const auto& state : options.state) {
      states.push_back(write_state(state));
    }
    out["state"] = std::move(states);
  }
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_ensemble_step(const ensemble_step_options& step) {
  json out = json::object();
  out["model_name"] = step.model_name;
  // Always written: left out, protobuf's default 0 would be read by Triton as version 0.
  out["model_version"] = step.model_version;
  if (!step.input_map.empty()) {
    out["input_map"] = step.input_map;
  }
  if (!step.output_map.empty()) {
    out["output_map"] = step.output_map;
  }
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json
write_ensemble_scheduling(const ensemble_scheduling_options& options) {
  json steps = json::array();
  for (const auto& step : options.step) {
    steps.push_back(write_ensemble_step(step));
  }
  json out = json::object();
  out["step"] = std::move(steps);
  if (options.max_inflight_requests != 0) {
    out["max_inflight_requests"] = options.max_inflight_requests;
  }
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_rate_limiter(const rate_limiter_options& limiter) {
  json resources = json::array();
  for (const auto& resource : limiter.resources) {
    json entry = json::object();
    entry["name"] = resource.name;
    write_flag_if_set(entry, "global", resource.global);
    entry["count"] = resource.count;
    resources.push_back(std::move(entry));
  }
  json out = json::object();
  if (!limiter.resources.empty()) {
    out["resources"] = std::move(resources);
  }
  if (limiter.priority != rate_limiter_options{}.priority) {
    out["priority"] = limiter.priority;
  }
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_instance_group(const instance_group_options& group) {
  json out = json::object();
  if (!group.name.empty()) {
    out["name"] = group.name;
  }
  out["kind"] = enum_spelling(group.kind, instance_group_kind_names);
  out["count"] = group.count;
  if (!group.gpus.empty()) {
    out["gpus"] = group.gpus;
  }
  if (group.rate_limiter) {
    out["rate_limiter"] = write_rate_limiter(*group.rate_limiter);
  }
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json
write_model_transaction_policy(const model_transaction_policy_options& policy) {
  json out = json::object();
  write_flag_if_set(out, "decoupled", policy.decoupled);
  if (policy.final_response_timeout_microseconds != 0) {
    out["final_response_timeout_microseconds"] = policy.final_response_timeout_microseconds;
  }
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_response_cache(const response_cache_options& cache) {
  json out = json::object();
  write_flag_if_set(out, "enable", cache.enable);
  return out;
}

inline constexpr enum_name<warmup_data_kind> warmup_data_kind_names[] = {
    {warmup_data_kind::zero_data, "zero_data"},
    {warmup_data_kind::random_data, "random_data"},
    {warmup_data_kind::input_data_file, "input_data_file"},
};

[[nodiscard]] SERVEKIT_SERVER_DECL json write_warmup_input(const warmup_input_options& input) {
  json out = json::object();
  out["data_type"] = std::string{to_config_string(input.type)};
  out["dims"] = input.dims;
  if (input.kind == warmup_data_kind::input_data_file) {
    out["input_data_file"] = input.input_data_file;
  } else {
    out[enum_spelling(input.kind, warmup_data_kind_names)] = true;
  }
  return out;
}

/// batch_size is always written: left out, Triton would read protobuf's 0 and skip the sample.
[[nodiscard]] SERVEKIT_SERVER_DECL json
write_model_warmup_sample(const model_warmup_options& sample) {
  json out = json::object();
  if (!sample.name.empty()) {
    out["name"] = sample.name;
  }
  out["batch_size"] = sample.batch_size;
  json inputs = json::object();
  for (const auto& [name, input] : sample.inputs) {
    inputs[name] = write_warmup_input(input);
  }
  out["inputs"] = std::move(inputs);
  if (sample.count != 0) {
    out["count"] = sample.count;
  }
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_version_policy(const version_policy_options& policy) {
  using kind = version_policy_options::kind_type;
  switch (policy.kind) {
  case kind::all:
    return json{{"all", json::object()}};
  case kind::specific:
    return json{{"specific", json{{"versions", policy.versions}}}};
  case kind::latest:
    break;
  }
  return json{{"latest", json{{"num_versions", policy.num_versions}}}};
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_parameters(const parameter_map& parameters) {
  json out = json::object();
  for (const auto& [key, value] : parameters) {
    out[key] = json{{"string_value", value}};
  }
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL json write_model_config(const model_options& options) {
  json out = json::object();
  out["name"] = options.name;
  out["version"] = options.version;
  if (!options.backend.empty()) {
    out["backend"] = options.backend;
  }
  if (!options.platform.empty()) {
    out["platform"] = options.platform;
  } else if (options.ensemble_scheduling) {
    out["platform"] = std::string{ensemble_platform}; // Triton requires it for ensembles
  }
  if (options.max_batch_size) {
    out["max_batch_size"] = *options.max_batch_size;
  }
  if (!options.input.empty()) {
    out["input"] = write_tensors(options.input);
  }
  if (!options.output.empty()) {
    out["output"] = write_tensors(options.output);
  }
  if (options.dynamic_batching) {
    out["dynamic_batching"] = write_dynamic_batching(*options.dynamic_batching);
  }
  if (options.sequence_batching) {
    out["sequence_batching"] = write_sequence_batching(*options.sequence_batching);
  }
  if (options.ensemble_scheduling) {
    out["ensemble_scheduling"] = write_ensemble_scheduling(*options.ensemble_scheduling);
  }
  if (!options.instance_group.empty()) {
    json groups = json::array();
    for (const auto& group : options.instance_group) {
      groups.push_back(write_instance_group(group));
    }
    out["instance_group"] = std::move(groups);
  }
  if (options.model_transaction_policy) {
    out["model_transaction_policy"] =
        write_model_transaction_policy(*options.model_transaction_policy);
  }
  if (options.response_cache) {
    out["response_cache"] = write_response_cache(*options.response_cache);
  }
  if (!options.model_warmup.empty()) {
    json samples = json::array();
    for (const auto& sample : options.model_warmup) {
      samples.push_back(write_model_warmup_sample(sample));
    }
    out["model_warmup"] = std::move(samples);
  }
  if (options.version_policy) {
    out["version_policy"] = write_version_policy(*options.version_policy);
  }
  if (!options.parameters.empty()) {
    out["parameters"] = write_parameters(options.parameters);
  }
  return out;
}

} // namespace detail

[[nodiscard]] SERVEKIT_SERVER_DECL nlohmann::json save_model_config(const model_options& options) {
  return detail::write_model_config(options);
}

} // namespace servekit
