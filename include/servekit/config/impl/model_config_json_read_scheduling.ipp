#pragma once
/// \file
/// Definitions for config/model_config_json.hpp: reading input[] and output[], dynamic_batching,
/// sequence_batching and instance_group[] (with their nested messages), one small reader per
/// field. Compiled once into servekit::server, or included by model_config_json.hpp with
/// SERVEKIT_HEADER_ONLY.

#include <servekit/backend/instance_context.hpp>
#include <servekit/backend/tensor_spec.hpp>
#include <servekit/config/detail/model_config_json.hpp>
#include <servekit/config/model_config_json.hpp>
#include <servekit/core/detail/server_tier.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/queue/queue_policy.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/schedule/dynamic_batching_options.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace servekit::detail {

// ------------------------------------------------------------------------------------------
// input[] and output[] (ModelInput / ModelOutput)

/// A dimension: >= 1, or -1 for a variable size.
[[nodiscard]] SERVEKIT_SERVER_DECL std::int64_t read_dim(const json& value,
                                                         const std::string& path) {
  const auto dim = read_integer<std::int64_t>(value, path);
  if (dim < 1 && dim != shape::variable) {
    fail_bad_value(path,
                   "dimension must be >= 1, or -1 for a variable size; got " + std::to_string(dim));
  }
  return dim;
}

[[nodiscard]] SERVEKIT_SERVER_DECL shape read_dims(const json& value, const std::string& path) {
  const auto dims = read_array<std::int64_t>(value, path, read_dim);
  const auto result = shape::from(dims);
  if (!result) {
    fail_bad_value(path, "at most " + std::to_string(shape::max_rank) +
                             " dimensions are supported, got " + std::to_string(dims.size()));
  }
  return *result;
}

/// A field reader for a data_type member ("TYPE_FP32").
template <auto Member>
void read_data_type_member(const json& value, const std::string& path,
                           member_owner_t<Member>& out) {
  out.*Member = read_data_type(value, path);
}

/// A field reader for a shape member ([1, -1]).
template <auto Member>
void read_dims_member(const json& value, const std::string& path, member_owner_t<Member>& out) {
  out.*Member = read_dims(value, path);
}

SERVEKIT_SERVER_DECL void read_tensor_name(const json& value, const std::string& path,
                                           tensor_config& out) {
  out.name = read_string(value, path);
  if (out.name.empty()) {
    fail_bad_value(path, "tensor name must not be empty");
  }
}

SERVEKIT_SERVER_DECL void read_tensor_data_type(const json& value, const std::string& path,
                                                tensor_config& out) {
  out.type = read_data_type(value, path);
}

SERVEKIT_SERVER_DECL void read_tensor_dims(const json& value, const std::string& path,
                                           tensor_config& out) {
  out.dims = read_dims(value, path);
}

/// Triton's ModelInput.format: only FORMAT_NONE (the default) is accepted; it changes nothing.
SERVEKIT_SERVER_DECL void read_input_format(const json& value, const std::string& path,
                                            tensor_config&) {
  if (!value.is_string()) {
    fail_wrong_type(path, "a string (FORMAT_NONE)", value);
  }
  if (value.get_ref<const std::string&>() != "FORMAT_NONE") {
    fail_bad_value(path, "only FORMAT_NONE is supported by this build of servekit yet, got " +
                             quoted_json(value));
  }
}

[[nodiscard]] SERVEKIT_SERVER_DECL tensor_config read_tensor(
    const json& value, const std::string& path, std::span<const field_reader<tensor_config>> fields,
    std::span<const std::string_view> not_yet_supported) {
  tensor_config out;
  read_fields(value, path, out, fields, not_yet_supported);
  require_fields(value, path, {"name", "data_type", "dims"});
  return out;
}

[[nodiscard]] SERVEKIT_SERVER_DECL tensor_config read_input(const json& value,
                                                            const std::string& path) {
  static constexpr field_reader<tensor_config> fields[] = {
      {"name", read_tensor_name},
      {"data_type", read_tensor_data_type},
      {"format", read_input_format},
      {"dims", read_tensor_dims},
      {"is_shape_tensor", read_member<&tensor_config::is_shape_tensor>},
      {"allow_ragged_batch", read_member<&tensor_config::allow_ragged_batch>},
      {"optional", read_member<&tensor_config::optional>},
  };
  static constexpr std::string_view not_yet_supported[] = {"reshape", "is_non_linear_format_io"};
  return read_tensor(value, path, fields, not_yet_supported);
}

/// Outputs also take allow_ragged_batch and optional (servekit's tensor_config has them).
[[nodiscard]] SERVEKIT_SERVER_DECL tensor_config read_output(const json& value,
                                                             const std::string& path) {
  static constexpr field_reader<tensor_config> fields[] = {
      {"name", read_tensor_name},
      {"data_type", read_tensor_data_type},
      {"dims", read_tensor_dims},
      {"is_shape_tensor", read_member<&tensor_config::is_shape_tensor>},
      {"allow_ragged_batch", read_member<&tensor_config::allow_ragged_batch>},
      {"optional", read_member<&tensor_config::optional>},
  };
  static constexpr std::string_view not_yet_supported[] = {"reshape", "label_filename",
                                                           "is_non_linear_format_io"};
  return read_tensor(value, path, fields, not_yet_supported);
}

/// Refuses a second tensor with the same name; the error points at the second one's name.
SERVEKIT_SERVER_DECL void check_unique_tensor_names(const std::vector<tensor_config>& tensors,
                                                    const std::string& path,
                                                    std::string_view role) {
  std::map<std::string_view, std::size_t> first_index;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto [it, inserted] = first_index.emplace(tensors[i].name, i);
    if (!inserted) {
      fail_bad_value(member_path(element_path(path, i), "name"),
                     "duplicate " + std::string{role} + " name '" + tensors[i].name +
                         "' (first declared at " + element_path(path, it->second) + ")");
    }
  }
}

SERVEKIT_SERVER_DECL void read_inputs(const json& value, const std::string& path,
                                      model_options& out) {
  out.input = read_array<tensor_config>(value, path, read_input);
  check_unique_tensor_names(out.input, path, "input");
}

SERVEKIT_SERVER_DECL void read_outputs(const json& value, const std::string& path,
                                       model_options& out) {
  out.output = read_array<tensor_config>(value, path, read_output);
  check_unique_tensor_names(out.output, path, "output");
}

// ------------------------------------------------------------------------------------------
// dynamic_batching (ModelDynamicBatching, ModelQueuePolicy)

SERVEKIT_SERVER_DECL void read_timeout_action(const json& value, const std::string& path,
                                              queue_policy& out) {
  out.timeout_action = read_enum(value, path, timeout_action_names);
}

[[nodiscard]] SERVEKIT_SERVER_DECL queue_policy read_queue_policy(const json& value,
                                                                  const std::string& path) {
  static constexpr field_reader<queue_policy> fields[] = {
      {"timeout_action", read_timeout_action},
      {"default_timeout_microseconds", read_member<&queue_policy::default_timeout_microseconds>},
      {"allow_timeout_override", read_member<&queue_policy::allow_timeout_override>},
      {"max_queue_size", read_member<&queue_policy::max_queue_size>},
  };
  queue_policy out;
  read_fields(value, path, out, fields);
  return out;
}

/// A map<uint64, ...> key as protobuf writes it: decimal digits, no sign, no leading zero.
[[nodiscard]] SERVEKIT_SERVER_DECL std::optional<std::uint64_t>
parse_priority_level_key(std::string_view key) {
  if (!is_decimal_digits(key) || (key.size() > 1 && key.front() == '0')) {
    return std::nullopt;
  }
  std::uint64_t level = 0;
  const auto result = std::from_chars(key.data(), key.data() + key.size(), level);
  if (result.ec != std::errc{}) {
    return std::nullopt;
  }
  return level;
}

/// `{"1": {...}, "2": {...}}`: levels are checked against priority_levels by validate().
SERVEKIT_SERVER_DECL void read_priority_queue_policy(const json& value, const std::string& path,
                                                     dynamic_batching_options& out) {
  expect_object(value, path, "an object keyed by priority level (e.g. {\"1\": {...}})");
  std::map<std::uint64_t, queue_policy> policies;
  for (const auto& [key, policy] : value.items()) {
    const std::string policy_path = member_path(path, key);
    const auto level = parse_priority_level_key(key);
    if (!level) {
      fail_bad_value(policy_path, "priority level key must be a decimal integer such as \"1\" "
                                  "(no sign, no leading zeros), got '" +
                                      key + "'");
    }
    policies.emplace(*level, read_queue_policy(policy, policy_path));
  }
  out.priority.priority_queue_policy = std::move(policies);
}

SERVEKIT_SERVER_DECL void read_default_queue_policy(const json& value, const std::string& path,
                                                    dynamic_batching_options& out) {
  out.priority.default_queue_policy = read_queue_policy(value, path);
}

/// A field reader for a plain member of `dynamic_batching_options::priority`.
template <auto Member>
void read_priority_member(const json& value, const std::string& path,
                          dynamic_batching_options& out) {
  out.priority.*Member = read_value<member_value_t<Member>>(value, path);
}

[[nodiscard]] SERVEKIT_SERVER_DECL dynamic_batching_options
read_dynamic_batching(const json& value, const std::string& path) {
  using options = dynamic_batching_options;
  static constexpr field_reader<options> fields[] = {
      {"preferred_batch_size", read_member<&options::preferred_batch_size>},
      {"max_queue_delay_microseconds", read_member<&options::max_queue_delay_microseconds>},
      {"preserve_ordering", read_member<&options::preserve_ordering>},
      {"priority_levels", read_priority_member<&priority_options::priority_levels>},
      {"default_priority_level", read_priority_member<&priority_options::default_priority_level>},
      {"default_queue_policy", read_default_queue_policy},
      {"priority_queue_policy", read_priority_queue_policy},
  };
  options out;
  read_fields(value, path, out, fields);
  return out;
}

// ------------------------------------------------------------------------------------------
// sequence_batching (ModelSequenceBatching and its nested messages). Rules that span fields
// (exactly two false/true entries, names that must not collide, ...) are validate()'s.

SERVEKIT_SERVER_DECL void read_control_kind(const json& value, const std::string& path,
                                            sequence_control& out) {
  out.kind = read_enum(value, path, control_kind_names);
}

[[nodiscard]] SERVEKIT_SERVER_DECL sequence_control read_sequence_control(const json& value,
                                                                          const std::string& path) {
  static constexpr field_reader<sequence_control> fields[] = {
      {"kind", read_control_kind},
      {"int32_false_true", read_member<&sequence_control::int32_false_true>},
      {"fp32_false_true", read_member<&sequence_control::fp32_false_true>},
      {"bool_false_true", read_member<&sequence_control::bool_false_true>},
      {"data_type", read_data_type_member<&sequence_control::data_type>},
  };
  sequence_control out;
  read_fields(value, path, out, fields);
  return out;
}

SERVEKIT_SERVER_DECL void read_controls(const json& value, const std::string& path,
                                        control_input& out) {
  out.control = read_array<sequence_control>(value, path, read_sequence_control);
}

[[nodiscard]] SERVEKIT_SERVER_DECL control_input read_control_input(const json& value,
                                                                    const std::string& path) {
  static constexpr field_reader<control_input> fields[] = {
      {"name", read_member<&control_input::name>},
      {"control", read_controls},
  };
  control_input out;
  read_fields(value, path, out, fields);
  return out;
}

/// Protobuf sets the oneof member `zero_data` whatever its value, and Triton then uses zeros even
/// for `false`; servekit refuses `false` rather than guess what was meant.
SERVEKIT_SERVER_DECL void read_zero_data(const json& value, const std::string& path,
                                         initial_state_options& out) {
  out.zero_data = read_bool(value, path);
  if (!out.zero_data) {
    fail_bad_value(path, "'zero_data' must be true when present (Triton uses zeros whenever the "
                         "field is set, even to false); write true, or leave it out and set "
                         "'data_file'");
  }
}

[[nodiscard]] SERVEKIT_SERVER_DECL initial_state_options
read_initial_state(const json& value, const std::string& path) {
  using options = initial_state_options;
  static constexpr field_reader<options> fields[] = {
      {"data_type", read_data_type_member<&options::data_type>},
      {"dims", read_dims_member<&options::dims>},
      {"name", read_member<&options::name>},
      {"zero_data", read_zero_data},
      {"data_file", read_member<&options::data_file>},
  };
  expect_object(value, path);
  check_oneof(value, path, "state_data", {"zero_data", "data_file"});
  options out;
  read_fields(value, path, out, fields);
  return out;
}

SERVEKIT_SERVER_DECL void read_initial_states(const json& value, const std::string& path,
                                              state_options& out) {
  out.initial_state = read_array<initial_state_options>(value, path, read_initial_state);
}

[[nodiscard]] SERVEKIT_SERVER_DECL state_options read_state(const json& value,
                                                            const std::string& path) {
  using options = state_options;
  static constexpr field_reader<options> fields[] = {
      {"input_name", read_member<&options::input_name>},
      {"output_name", read_member<&options::output_name>},
      {"data_type", read_data_type_member<&options::data_type>},
      {"dims", read_dims_member<&options::dims>},
      {"initial_state", read_initial_states},
      {"use_same_buffer_for_input_output", read_member<&options::use_same_buffer_for_input_output>},
      {"use_growable_memory", read_member<&options::use_growable_memory>},
  };
  options out;
  read_fields(value, path, out, fields);
  return out;
}

SERVEKIT_SERVER_DECL void read_direct_strategy(const json& value, const std::string& path,
                                               sequence_batching_options& out) {
  using options = direct_strategy_options;
  static constexpr field_reader<options> fields[] = {
      {"max_queue_delay_microseconds", read_member<&options::max_queue_delay_microseconds>},
      {"minimum_slot_utilization", read_member<&options::minimum_slot_utilization>},
  };
  out.strategy = sequence_strategy::direct;
  read_fields(value, path, out.direct, fields);
}

SERVEKIT_SERVER_DECL void read_oldest_strategy(const json& value, const std::string& path,
                                               sequence_batching_options& out) {
  using options = oldest_strategy_options;
  static constexpr field_reader<options> fields[] = {
      {"max_candidate_sequences", read_member<&options::max_candidate_sequences>},
      {"preferred_batch_size", read_member<&options::preferred_batch_size>},
      {"max_queue_delay_microseconds", read_member<&options::max_queue_delay_microseconds>},
      {"preserve_ordering", read_member<&options::preserve_ordering>},
  };
  out.strategy = sequence_strategy::oldest;
  read_fields(value, path, out.oldest, fields);
}

SERVEKIT_SERVER_DECL void read_control_inputs(const json& value, const std::string& path,
                                              sequence_batching_options& out) {
  out.control_input = read_array<control_input>(value, path, read_control_input);
}

SERVEKIT_SERVER_DECL void read_states(const json& value, const std::string& path,
                                      sequence_batching_options& out) {
  out.state = read_array<state_options>(value, path, read_state);
}

[[nodiscard]] SERVEKIT_SERVER_DECL sequence_batching_options
read_sequence_batching(const json& value, const std::string& path) {
  using options = sequence_batching_options;
  static constexpr field_reader<options> fields[] = {
      {"max_sequence_idle_microseconds", read_member<&options::max_sequence_idle_microseconds>},
      {"direct", read_direct_strategy},
      {"oldest", read_oldest_strategy},
      {"control_input", read_control_inputs},
      {"state", read_states},
  };
  static constexpr std::string_view not_yet_supported[] = {"iterative_sequence"};
  expect_object(value, path);
  check_oneof(value, path, "strategy_choice", {"direct", "oldest"});
  options out;
  read_fields(value, path, out, fields, not_yet_supported);
  return out;
}

// ------------------------------------------------------------------------------------------
// instance_group[] (ModelInstanceGroup)

SERVEKIT_SERVER_DECL void read_instance_group_kind(const json& value, const std::string& path,
                                                   instance_group_options& out) {
  out.kind = read_enum(value, path, instance_group_kind_names);
}

SERVEKIT_SERVER_DECL void read_instance_count(const json& value, const std::string& path,
                                              instance_group_options& out) {
  out.count = read_integer<std::int32_t>(value, path);
  if (out.count < 1) {
    fail_bad_value(path,
                   "instance group count must be at least 1, got " + std::to_string(out.count));
  }
}

[[nodiscard]] SERVEKIT_SERVER_DECL std::int32_t read_gpu_id(const json& value,
                                                            const std::string& path) {
  const auto id = read_integer<std::int32_t>(value, path);
  if (id < 0) {
    fail_bad_value(path, "GPU id must be non-negative, got " + std::to_string(id));
  }
  return id;
}

SERVEKIT_SERVER_DECL void read_instance_gpus(const json& value, const std::string& path,
                                             instance_group_options& out) {
  out.gpus = read_array<std::int32_t>(value, path, read_gpu_id);
}

/// Triton: KIND_CPU and KIND_MODEL groups may not list gpus.
SERVEKIT_SERVER_DECL void check_gpus_allowed(const instance_group_options& group,
                                             const std::string& path) {
  const bool may_list_gpus =
      group.kind == instance_group_kind::kind_auto || group.kind == instance_group_kind::kind_gpu;
  if (!group.gpus.empty() && !may_list_gpus) {
    fail_bad_value(member_path(path, "gpus"),
                   "an instance group of kind " +
                       enum_spelling(group.kind, instance_group_kind_names) +
                       " must not list gpus (only KIND_AUTO and KIND_GPU groups may)");
  }
}

// instance_group[].rate_limiter (ModelRateLimiter)

SERVEKIT_SERVER_DECL void read_resource_name(const json& value, const std::string& path,
                                             rate_limiter_resource& out) {
  out.name = read_string(value, path);
  if (out.name.empty()) {
    fail_bad_value(path, "rate limiter resource name must not be empty");
  }
}

[[nodiscard]] SERVEKIT_SERVER_DECL rate_limiter_resource
read_rate_limiter_resource(const json& value, const std::string& path) {
  static constexpr field_reader<rate_limiter_resource> fields[] = {
      {"name", read_resource_name},
      {"global", read_member<&rate_limiter_resource::global>},
      {"count", read_member<&rate_limiter_resource::count>},
  };
  rate_limiter_resource out;
  read_fields(value, path, out, fields);
  require_fields(value, path, {"name"});
  return out;
}

/// A resource named twice in one group would be counted twice by Triton's pools (the later
/// entry silently wins); refused so the intent is explicit.
SERVEKIT_SERVER_DECL void read_rate_limiter_resources(const json& value, const std::string& path,
                                                      rate_limiter_options& out) {
  out.resources = read_array<rate_limiter_resource>(value, path, read_rate_limiter_resource);
  std::map<std::string_view, std::size_t> first_index;
  for (std::size_t i = 0; i < out.resources.size(); ++i) {
    const auto [it, inserted] = first_index.emplace(out.resources[i].name, i);
    if (!inserted) {
      fail_bad_value(member_path(element_path(path, i), "name"),
                     "duplicate rate limiter resource '" + out.resources[i].name +
                         "' (first listed at " + element_path(path, it->second) + ")");
    }
  }
}

[[nodiscard]] SERVEKIT_SERVER_DECL rate_limiter_options read_rate_limiter(const json& value,
                                                                          const std::string& path) {
  static constexpr field_reader<rate_limiter_options> fields[] = {
      {"resources", read_rate_limiter_resources},
      {"priority", read_member<&rate_limiter_options::priority>},
  };
  rate_limiter_options out;
  read_fields(value, path, out, fields);
  return out;
}

SERVEKIT_SERVER_DECL void read_instance_rate_limiter(const json& value, const std::string& path,
                                                     instance_group_options& out) {
  out.rate_limiter = read_rate_limiter(value, path);
}

[[nodiscard]] SERVEKIT_SERVER_DECL instance_group_options
read_instance_group(const json& value, const std::string& path) {
  static constexpr field_reader<instance_group_options> fields[] = {
      {"name", read_member<&instance_group_options::name>},
      {"kind", read_instance_group_kind},
      {"count", read_instance_count},
      {"gpus", read_instance_gpus},
      {"rate_limiter", read_instance_rate_limiter},
  };
  static constexpr std::string_view not_yet_supported[] = {"secondary_devices", "profile",
                                                           "passive", "host_policy"};
  instance_group_options out;
  read_fields(value, path, out, fields, not_yet_supported);
  check_gpus_allowed(out, path);
  return out;
}

SERVEKIT_SERVER_DECL void read_instance_groups(const json& value, const std::string& path,
                                               model_options& out) {
  out.instance_group = read_array<instance_group_options>(value, path, read_instance_group);
}

} // namespace servekit::detail
