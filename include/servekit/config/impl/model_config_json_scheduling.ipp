#pragma once
/// \file
/// Definitions for config/model_config_json.hpp: input[] and output[], dynamic_batching,
/// sequence_batching and instance_group[] (with their nested messages). Each message has one
/// field list that its reader and its write_message overload both walk; a field's reader
/// carries the checks of that field alone. Compiled once into servekit::server, or included by
/// model_config_json.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/backend/instance_context.hpp>
#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/config/detail/model_config_json.hpp>
#include <servekit/config/model_config_json.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/queue/queue_policy.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/schedule/dynamic_batching_options.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>
#include <servekit/state/state_options.hpp>

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
[[nodiscard]] SERVEKIT_DECL std::int64_t read_dim(const json& value, const std::string& path) {
  const auto dim = read_integer<std::int64_t>(value, path);
  if (dim < 1 && dim != shape::variable) {
    fail_bad_value(path,
                   "dimension must be >= 1, or -1 for a variable size; got " + std::to_string(dim));
  }
  return dim;
}

[[nodiscard]] SERVEKIT_DECL shape read_dims(const json& value, const std::string& path) {
  const auto dims = read_array<std::int64_t>(value, path, read_dim);
  const auto result = shape::from(dims);
  if (!result) {
    fail_bad_value(path, "at most " + std::to_string(shape::max_rank) +
                             " dimensions are supported, got " + std::to_string(dims.size()));
  }
  return *result;
}

SERVEKIT_DECL void read_tensor_name(const json& value, const std::string& path,
                                    tensor_config& out) {
  out.name = read_string(value, path);
  if (out.name.empty()) {
    fail_bad_value(path, "tensor name must not be empty");
  }
}

/// Triton's ModelInput.format: only FORMAT_NONE (the default) is accepted; it changes nothing,
/// so it is never written.
SERVEKIT_DECL void read_input_format(const json& value, const std::string& path, tensor_config&) {
  if (!value.is_string()) {
    fail_wrong_type(path, "a string (FORMAT_NONE)", value);
  }
  if (value.get_ref<const std::string&>() != "FORMAT_NONE") {
    fail_bad_value(path, "only FORMAT_NONE is supported by this build of servekit yet, got " +
                             quoted_json(value));
  }
}

inline constexpr json_field<tensor_config> input_fields[] = {
    {"name", read_tensor_name, write_always<&tensor_config::name>},
    member_field<&tensor_config::type>("data_type", write_rule::always),
    {"format", read_input_format, nullptr},
    member_field<&tensor_config::dims>("dims", write_rule::always),
    member_field<&tensor_config::is_shape_tensor>("is_shape_tensor"),
    member_field<&tensor_config::allow_ragged_batch>("allow_ragged_batch"),
    member_field<&tensor_config::optional>("optional"),
};

/// Outputs also take allow_ragged_batch and optional (servekit's tensor_config has them).
inline constexpr json_field<tensor_config> output_fields[] = {
    {"name", read_tensor_name, write_always<&tensor_config::name>},
    member_field<&tensor_config::type>("data_type", write_rule::always),
    member_field<&tensor_config::dims>("dims", write_rule::always),
    member_field<&tensor_config::is_shape_tensor>("is_shape_tensor"),
    member_field<&tensor_config::allow_ragged_batch>("allow_ragged_batch"),
    member_field<&tensor_config::optional>("optional"),
};

/// Inputs and outputs write the same fields (an input's `format` is only read).
[[nodiscard]] SERVEKIT_DECL json write_message(const tensor_config& tensor) {
  return write_fields(tensor, output_fields);
}

[[nodiscard]] SERVEKIT_DECL tensor_config read_tensor(
    const json& value, const std::string& path, std::span<const json_field<tensor_config>> fields,
    std::span<const std::string_view> not_yet_supported) {
  tensor_config out;
  read_fields(value, path, out, fields, not_yet_supported);
  require_fields(value, path, {"name", "data_type", "dims"});
  return out;
}

[[nodiscard]] SERVEKIT_DECL tensor_config read_input(const json& value, const std::string& path) {
  static constexpr std::string_view not_yet_supported[] = {"reshape", "is_non_linear_format_io"};
  return read_tensor(value, path, input_fields, not_yet_supported);
}

[[nodiscard]] SERVEKIT_DECL tensor_config read_output(const json& value, const std::string& path) {
  static constexpr std::string_view not_yet_supported[] = {"reshape", "label_filename",
                                                           "is_non_linear_format_io"};
  return read_tensor(value, path, output_fields, not_yet_supported);
}

/// Refuses a second tensor with the same name; the error points at the second one's name.
SERVEKIT_DECL void check_unique_tensor_names(const std::vector<tensor_config>& tensors,
                                             const std::string& path, std::string_view role) {
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

SERVEKIT_DECL void read_inputs(const json& value, const std::string& path, model_options& out) {
  out.input = read_array<tensor_config>(value, path, read_input);
  check_unique_tensor_names(out.input, path, "input");
}

SERVEKIT_DECL void read_outputs(const json& value, const std::string& path, model_options& out) {
  out.output = read_array<tensor_config>(value, path, read_output);
  check_unique_tensor_names(out.output, path, "output");
}

// ------------------------------------------------------------------------------------------
// dynamic_batching (ModelDynamicBatching, ModelQueuePolicy)

inline constexpr json_field<queue_policy> queue_policy_fields[] = {
    member_field<&queue_policy::timeout_action>("timeout_action"),
    member_field<&queue_policy::default_timeout_microseconds>("default_timeout_microseconds"),
    member_field<&queue_policy::allow_timeout_override>("allow_timeout_override"),
    member_field<&queue_policy::max_queue_size>("max_queue_size"),
};

[[nodiscard]] SERVEKIT_DECL queue_policy read_queue_policy(const json& value,
                                                           const std::string& path) {
  queue_policy out;
  read_fields(value, path, out, queue_policy_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const queue_policy& policy) {
  return write_fields(policy, queue_policy_fields);
}

/// A map<uint64, ...> key as protobuf writes it: decimal digits, no sign, no leading zero.
[[nodiscard]] SERVEKIT_DECL std::optional<std::uint64_t>
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
SERVEKIT_DECL void read_priority_queue_policy(const json& value, const std::string& path,
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

inline constexpr json_field<adaptive_batching_options> adaptive_batching_fields[] = {
    member_field<&adaptive_batching_options::target_latency_microseconds>(
        "target_latency_microseconds"),
    member_field<&adaptive_batching_options::target_percentile>("target_percentile"),
    member_field<&adaptive_batching_options::max_queue_delay_bound_microseconds>(
        "max_queue_delay_bound_microseconds"),
    member_field<&adaptive_batching_options::rate_window_microseconds>("rate_window_microseconds"),
    member_field<&adaptive_batching_options::deadline_admission>("deadline_admission"),
};

[[nodiscard]] SERVEKIT_DECL adaptive_batching_options
read_adaptive_batching(const json& value, const std::string& path) {
  adaptive_batching_options out;
  read_fields(value, path, out, adaptive_batching_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const adaptive_batching_options& options) {
  return write_fields(options, adaptive_batching_fields);
}

inline constexpr auto dynamic_priority = &dynamic_batching_options::priority;

inline constexpr json_field<dynamic_batching_options> dynamic_batching_fields[] = {
    member_field<&dynamic_batching_options::preferred_batch_size>("preferred_batch_size"),
    member_field<&dynamic_batching_options::max_queue_delay_microseconds>(
        "max_queue_delay_microseconds"),
    member_field<&dynamic_batching_options::preserve_ordering>("preserve_ordering"),
    member_field<dynamic_priority, &priority_options::priority_levels>("priority_levels"),
    member_field<dynamic_priority, &priority_options::default_priority_level>(
        "default_priority_level"),
    {"default_queue_policy",
     read_with<read_queue_policy, dynamic_priority, &priority_options::default_queue_policy>,
     write_unless_default<dynamic_priority, &priority_options::default_queue_policy>},
    {"priority_queue_policy", read_priority_queue_policy,
     write_unless_default<dynamic_priority, &priority_options::priority_queue_policy>},
    {"adaptive", read_with<read_adaptive_batching, &dynamic_batching_options::adaptive>,
     write_unless_default<&dynamic_batching_options::adaptive>},
};

[[nodiscard]] SERVEKIT_DECL dynamic_batching_options
read_dynamic_batching(const json& value, const std::string& path) {
  dynamic_batching_options out;
  read_fields(value, path, out, dynamic_batching_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const dynamic_batching_options& options) {
  return write_fields(options, dynamic_batching_fields);
}

// ------------------------------------------------------------------------------------------
// sequence_batching (ModelSequenceBatching and its nested messages). Rules that span fields
// (exactly two false/true entries, names that must not collide, ...) are validate()'s.

inline constexpr json_field<sequence_control> sequence_control_fields[] = {
    member_field<&sequence_control::kind>("kind", write_rule::always),
    member_field<&sequence_control::int32_false_true>("int32_false_true"),
    member_field<&sequence_control::fp32_false_true>("fp32_false_true"),
    member_field<&sequence_control::bool_false_true>("bool_false_true"),
    member_field<&sequence_control::data_type>("data_type"),
};

[[nodiscard]] SERVEKIT_DECL sequence_control read_sequence_control(const json& value,
                                                                   const std::string& path) {
  sequence_control out;
  read_fields(value, path, out, sequence_control_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const sequence_control& control) {
  return write_fields(control, sequence_control_fields);
}

inline constexpr json_field<control_input> control_input_fields[] = {
    member_field<&control_input::name>("name", write_rule::always),
    {"control", read_with<read_sequence_control, &control_input::control>,
     write_always<&control_input::control>},
};

[[nodiscard]] SERVEKIT_DECL control_input read_control_input(const json& value,
                                                             const std::string& path) {
  control_input out;
  read_fields(value, path, out, control_input_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const control_input& input) {
  return write_fields(input, control_input_fields);
}

/// Protobuf sets the oneof member `zero_data` whatever its value, and Triton then uses zeros even
/// for `false`; servekit refuses `false` rather than guess what was meant.
SERVEKIT_DECL void read_zero_data(const json& value, const std::string& path,
                                  initial_state_options& out) {
  out.zero_data = read_bool(value, path);
  if (!out.zero_data) {
    fail_bad_value(path, "'zero_data' must be true when present (Triton uses zeros whenever the "
                         "field is set, even to false); write true, or leave it out and set "
                         "'data_file'");
  }
}

inline constexpr json_field<initial_state_options> initial_state_fields[] = {
    member_field<&initial_state_options::data_type>("data_type"),
    member_field<&initial_state_options::dims>("dims", write_rule::always),
    member_field<&initial_state_options::name>("name"),
    {"zero_data", read_zero_data, write_unless_default<&initial_state_options::zero_data>},
    member_field<&initial_state_options::data_file>("data_file"),
};

[[nodiscard]] SERVEKIT_DECL initial_state_options read_initial_state(const json& value,
                                                                     const std::string& path) {
  expect_object(value, path);
  check_oneof(value, path, "state_data", {"zero_data", "data_file"});
  initial_state_options out;
  read_fields(value, path, out, initial_state_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const initial_state_options& initial) {
  return write_fields(initial, initial_state_fields);
}

inline constexpr json_field<state_options> state_fields[] = {
    member_field<&state_options::input_name>("input_name", write_rule::always),
    member_field<&state_options::output_name>("output_name", write_rule::always),
    member_field<&state_options::data_type>("data_type"),
    member_field<&state_options::dims>("dims", write_rule::always),
    {"initial_state", read_with<read_initial_state, &state_options::initial_state>,
     write_unless_default<&state_options::initial_state>},
    member_field<&state_options::use_same_buffer_for_input_output>(
        "use_same_buffer_for_input_output"),
    member_field<&state_options::use_growable_memory>("use_growable_memory"),
};

[[nodiscard]] SERVEKIT_DECL state_options read_state(const json& value, const std::string& path) {
  state_options out;
  read_fields(value, path, out, state_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const state_options& state) {
  return write_fields(state, state_fields);
}

inline constexpr json_field<direct_strategy_options> direct_strategy_fields[] = {
    member_field<&direct_strategy_options::max_queue_delay_microseconds>(
        "max_queue_delay_microseconds"),
    member_field<&direct_strategy_options::minimum_slot_utilization>("minimum_slot_utilization"),
};

inline constexpr json_field<oldest_strategy_options> oldest_strategy_fields[] = {
    member_field<&oldest_strategy_options::max_candidate_sequences>("max_candidate_sequences"),
    member_field<&oldest_strategy_options::preferred_batch_size>("preferred_batch_size"),
    member_field<&oldest_strategy_options::max_queue_delay_microseconds>(
        "max_queue_delay_microseconds"),
    member_field<&oldest_strategy_options::preserve_ordering>("preserve_ordering"),
};

SERVEKIT_DECL void read_direct_strategy(const json& value, const std::string& path,
                                        sequence_batching_options& out) {
  out.strategy = sequence_strategy::direct;
  read_fields(value, path, out.direct, direct_strategy_fields);
}

/// Written only when it has settings: direct is the default strategy.
[[nodiscard]] SERVEKIT_DECL std::optional<json>
write_direct_strategy(const sequence_batching_options& options) {
  if (options.strategy != sequence_strategy::direct ||
      options.direct == direct_strategy_options{}) {
    return std::nullopt;
  }
  return write_fields(options.direct, direct_strategy_fields);
}

SERVEKIT_DECL void read_oldest_strategy(const json& value, const std::string& path,
                                        sequence_batching_options& out) {
  out.strategy = sequence_strategy::oldest;
  read_fields(value, path, out.oldest, oldest_strategy_fields);
}

/// Written whenever it is the strategy, even without settings.
[[nodiscard]] SERVEKIT_DECL std::optional<json>
write_oldest_strategy(const sequence_batching_options& options) {
  if (options.strategy != sequence_strategy::oldest) {
    return std::nullopt;
  }
  return write_fields(options.oldest, oldest_strategy_fields);
}

inline constexpr json_field<sequence_batching_options> sequence_batching_fields[] = {
    member_field<&sequence_batching_options::max_sequence_idle_microseconds>(
        "max_sequence_idle_microseconds"),
    {"direct", read_direct_strategy, write_direct_strategy},
    {"oldest", read_oldest_strategy, write_oldest_strategy},
    {"control_input", read_with<read_control_input, &sequence_batching_options::control_input>,
     write_unless_default<&sequence_batching_options::control_input>},
    {"state", read_with<read_state, &sequence_batching_options::state>,
     write_unless_default<&sequence_batching_options::state>},
    member_field<&sequence_batching_options::iterative_sequence>("iterative_sequence"),
};

[[nodiscard]] SERVEKIT_DECL sequence_batching_options
read_sequence_batching(const json& value, const std::string& path) {
  expect_object(value, path);
  check_oneof(value, path, "strategy_choice", {"direct", "oldest"});
  sequence_batching_options out;
  read_fields(value, path, out, sequence_batching_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const sequence_batching_options& options) {
  return write_fields(options, sequence_batching_fields);
}

// ------------------------------------------------------------------------------------------
// instance_group[] (ModelInstanceGroup)

SERVEKIT_DECL void read_instance_count(const json& value, const std::string& path,
                                       instance_group_options& out) {
  out.count = read_integer<std::int32_t>(value, path);
  if (out.count < 1) {
    fail_bad_value(path,
                   "instance group count must be at least 1, got " + std::to_string(out.count));
  }
}

[[nodiscard]] SERVEKIT_DECL std::int32_t read_gpu_id(const json& value, const std::string& path) {
  const auto id = read_integer<std::int32_t>(value, path);
  if (id < 0) {
    fail_bad_value(path, "GPU id must be non-negative, got " + std::to_string(id));
  }
  return id;
}

/// Triton: KIND_CPU and KIND_MODEL groups may not list gpus.
SERVEKIT_DECL void check_gpus_allowed(const instance_group_options& group,
                                      const std::string& path) {
  const bool may_list_gpus =
      group.kind == instance_group_kind::kind_auto || group.kind == instance_group_kind::kind_gpu;
  if (!group.gpus.empty() && !may_list_gpus) {
    fail_bad_value(member_path(path, "gpus"),
                   "an instance group of kind " +
                       enum_spelling(group.kind, enum_names_v<instance_group_kind>) +
                       " must not list gpus (only KIND_AUTO and KIND_GPU groups may)");
  }
}

// instance_group[].rate_limiter (ModelRateLimiter)

SERVEKIT_DECL void read_resource_name(const json& value, const std::string& path,
                                      rate_limiter_resource& out) {
  out.name = read_string(value, path);
  if (out.name.empty()) {
    fail_bad_value(path, "rate limiter resource name must not be empty");
  }
}

inline constexpr json_field<rate_limiter_resource> rate_limiter_resource_fields[] = {
    {"name", read_resource_name, write_always<&rate_limiter_resource::name>},
    member_field<&rate_limiter_resource::global>("global"),
    member_field<&rate_limiter_resource::count>("count", write_rule::always),
};

[[nodiscard]] SERVEKIT_DECL rate_limiter_resource
read_rate_limiter_resource(const json& value, const std::string& path) {
  rate_limiter_resource out;
  read_fields(value, path, out, rate_limiter_resource_fields);
  require_fields(value, path, {"name"});
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const rate_limiter_resource& resource) {
  return write_fields(resource, rate_limiter_resource_fields);
}

/// A resource named twice in one group would be counted twice by Triton's pools (the later
/// entry silently wins); refused so the intent is explicit.
SERVEKIT_DECL void read_rate_limiter_resources(const json& value, const std::string& path,
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

inline constexpr json_field<rate_limiter_options> rate_limiter_fields[] = {
    {"resources", read_rate_limiter_resources,
     write_unless_default<&rate_limiter_options::resources>},
    member_field<&rate_limiter_options::priority>("priority"),
};

[[nodiscard]] SERVEKIT_DECL rate_limiter_options read_rate_limiter(const json& value,
                                                                   const std::string& path) {
  rate_limiter_options out;
  read_fields(value, path, out, rate_limiter_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const rate_limiter_options& limiter) {
  return write_fields(limiter, rate_limiter_fields);
}

inline constexpr json_field<instance_group_options> instance_group_fields[] = {
    member_field<&instance_group_options::name>("name"),
    member_field<&instance_group_options::kind>("kind", write_rule::always),
    {"count", read_instance_count, write_always<&instance_group_options::count>},
    {"gpus", read_with<read_gpu_id, &instance_group_options::gpus>,
     write_unless_default<&instance_group_options::gpus>},
    {"rate_limiter", read_with<read_rate_limiter, &instance_group_options::rate_limiter>,
     write_unless_default<&instance_group_options::rate_limiter>},
};

[[nodiscard]] SERVEKIT_DECL instance_group_options read_instance_group(const json& value,
                                                                       const std::string& path) {
  static constexpr std::string_view not_yet_supported[] = {"secondary_devices", "profile",
                                                           "passive", "host_policy"};
  instance_group_options out;
  read_fields(value, path, out, instance_group_fields, not_yet_supported);
  check_gpus_allowed(out, path);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const instance_group_options& group) {
  return write_fields(group, instance_group_fields);
}

} // namespace servekit::detail
