#pragma once
/// \file
/// Definitions for config/model_config_json.hpp: ensemble_scheduling, model_transaction_policy,
/// response_cache, model_warmup[], version_policy, parameters and the ModelConfig top level, and
/// load_model_config and save_model_config. Each message has one field list that its reader and
/// its write_message overload both walk; a field's reader carries the checks of that field alone.
/// Compiled once into servekit::server, or included by model_config_json.hpp with
/// SERVEKIT_HEADER_ONLY.

#include <servekit/config/detail/model_config_json.hpp>
#include <servekit/config/model_config_json.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/schedule/ensemble_scheduling_options.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace servekit {

namespace detail {

// ------------------------------------------------------------------------------------------
// ensemble_scheduling (ModelEnsembling). Only what the config alone decides is checked here;
// the rules that need the composing models (every input mapped, types agreeing, no cycles) are
// the ensemble's to check when it is built.

SERVEKIT_DECL void read_ensemble_model_name(const json& value, const std::string& path,
                                            ensemble_step_options& out) {
  out.model_name = read_string(value, path);
  if (out.model_name.empty()) {
    fail_bad_value(path, "ensemble step model_name must not be empty");
  }
}

/// -1 (the latest version) or a version >= 1; Triton writes int64 as a JSON number or a string.
SERVEKIT_DECL void read_ensemble_model_version(const json& value, const std::string& path,
                                               ensemble_step_options& out) {
  out.model_version = read_integer<std::int64_t>(value, path);
  if (out.model_version < 1 && out.model_version != -1) {
    fail_bad_value(path, "ensemble step model_version must be -1 (the latest version) or a "
                         "version >= 1, got " +
                             std::to_string(out.model_version));
  }
}

/// Triton reserves `model_namespace`; only its default, the empty string, is accepted (and
/// never written).
SERVEKIT_DECL void read_ensemble_model_namespace(const json& value, const std::string& path,
                                                 ensemble_step_options&) {
  if (!read_string(value, path).empty()) {
    fail_bad_value(path, "'model_namespace' is reserved by Triton and must be empty, got " +
                             quoted_json(value));
  }
}

/// `{"model tensor": "ensemble tensor", ...}` (protobuf's map<string, string>).
template <auto Member>
void read_tensor_map_member(const json& value, const std::string& path,
                            member_owner_t<Member>& out) {
  expect_object(value, path, "an object of {\"model tensor\": \"ensemble tensor\"}");
  std::map<std::string, std::string> names;
  for (const auto& [key, name] : value.items()) {
    names.emplace(key, read_string(name, member_path(path, key)));
  }
  out.*Member = std::move(names);
}

/// model_version is always written: left out, protobuf's default 0 would be read by Triton as
/// version 0.
inline constexpr json_field<ensemble_step_options> ensemble_step_fields[] = {
    {"model_name", read_ensemble_model_name, write_always<&ensemble_step_options::model_name>},
    {"model_version", read_ensemble_model_version,
     write_always<&ensemble_step_options::model_version>},
    {"input_map", read_tensor_map_member<&ensemble_step_options::input_map>,
     write_unless_default<&ensemble_step_options::input_map>},
    {"output_map", read_tensor_map_member<&ensemble_step_options::output_map>,
     write_unless_default<&ensemble_step_options::output_map>},
    {"model_namespace", read_ensemble_model_namespace, nullptr},
};

[[nodiscard]] SERVEKIT_DECL ensemble_step_options read_ensemble_step(const json& value,
                                                                     const std::string& path) {
  ensemble_step_options out;
  read_fields(value, path, out, ensemble_step_fields);
  require_fields(value, path, {"model_name"});
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const ensemble_step_options& step) {
  return write_fields(step, ensemble_step_fields);
}

inline constexpr json_field<ensemble_scheduling_options> ensemble_scheduling_fields[] = {
    {"step", read_with<read_ensemble_step, &ensemble_scheduling_options::step>,
     write_always<&ensemble_scheduling_options::step>},
    member_field<&ensemble_scheduling_options::max_inflight_requests>("max_inflight_requests"),
};

[[nodiscard]] SERVEKIT_DECL ensemble_scheduling_options
read_ensemble_scheduling(const json& value, const std::string& path) {
  ensemble_scheduling_options out;
  read_fields(value, path, out, ensemble_scheduling_fields);
  if (out.step.empty()) {
    const std::string missing = value.contains("step") ? "" : "required field 'step' is missing; ";
    fail_bad_value(member_path(path, "step"),
                   missing + "ensemble_scheduling needs at least one step");
  }
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const ensemble_scheduling_options& options) {
  return write_fields(options, ensemble_scheduling_fields);
}

// ------------------------------------------------------------------------------------------
// model_transaction_policy (ModelTransactionPolicy) and response_cache (ModelResponseCache)

inline constexpr json_field<model_transaction_policy_options> model_transaction_policy_fields[] = {
    member_field<&model_transaction_policy_options::decoupled>("decoupled"),
    member_field<&model_transaction_policy_options::final_response_timeout_microseconds>(
        "final_response_timeout_microseconds"),
};

[[nodiscard]] SERVEKIT_DECL model_transaction_policy_options
read_model_transaction_policy(const json& value, const std::string& path) {
  model_transaction_policy_options out;
  read_fields(value, path, out, model_transaction_policy_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const model_transaction_policy_options& policy) {
  return write_fields(policy, model_transaction_policy_fields);
}

inline constexpr json_field<response_cache_options> response_cache_fields[] = {
    member_field<&response_cache_options::enable>("enable"),
};

[[nodiscard]] SERVEKIT_DECL response_cache_options read_response_cache(const json& value,
                                                                       const std::string& path) {
  response_cache_options out;
  read_fields(value, path, out, response_cache_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const response_cache_options& cache) {
  return write_fields(cache, response_cache_fields);
}

// ------------------------------------------------------------------------------------------
// model_warmup[] (ModelWarmup)

/// A warmup input has a concrete shape: every dimension >= 0, no -1 (the batch dimension is
/// left out; batch_size adds it).
SERVEKIT_DECL void read_warmup_dims(const json& value, const std::string& path,
                                    warmup_input_options& out) {
  out.dims = read_array<std::int64_t>(value, path, [](const json& dim, const std::string& at) {
    const auto size = read_integer<std::int64_t>(dim, at);
    if (size < 0) {
      fail_bad_value(at, "warmup dimensions must be >= 0 (a warmup input has a concrete shape; "
                         "-1 is not allowed), got " +
                             std::to_string(size));
    }
    return size;
  });
  if (out.dims.size() > shape::max_rank) {
    fail_bad_value(path, "at most " + std::to_string(shape::max_rank) +
                             " dimensions are supported, got " + std::to_string(out.dims.size()));
  }
}

/// zero_data and random_data are protobuf bools; only `true` says what it means.
[[nodiscard]] SERVEKIT_DECL bool read_true_flag(const json& value, const std::string& path,
                                                std::string_view field) {
  if (!read_bool(value, path)) {
    fail_bad_value(path, "'" + std::string{field} +
                             "' must be true when present (it picks the input's data source)");
  }
  return true;
}

SERVEKIT_DECL void read_warmup_zero_data(const json& value, const std::string& path,
                                         warmup_input_options& out) {
  (void)read_true_flag(value, path, "zero_data");
  out.kind = warmup_data_kind::zero_data;
}

SERVEKIT_DECL void read_warmup_random_data(const json& value, const std::string& path,
                                           warmup_input_options& out) {
  (void)read_true_flag(value, path, "random_data");
  out.kind = warmup_data_kind::random_data;
}

/// A file name under `<model>/warmup/`: relative, and never leaving that folder.
SERVEKIT_DECL void read_warmup_input_data_file(const json& value, const std::string& path,
                                               warmup_input_options& out) {
  out.input_data_file = read_string(value, path);
  const std::string& file = out.input_data_file;
  const bool escapes = file.find("..") != std::string::npos;
  if (file.empty() || file.front() == '/' || escapes) {
    fail_bad_value(path, "input_data_file must name a file under the model's warmup/ folder "
                         "(relative, without '..'), got " +
                             quoted_json(value));
  }
  out.kind = warmup_data_kind::input_data_file;
}

/// The member of the oneof input_data_type that `kind` picks: true for zero_data and
/// random_data, the file name for input_data_file.
template <warmup_data_kind Kind>
[[nodiscard]] std::optional<json> write_warmup_data_source(const warmup_input_options& input) {
  if (input.kind != Kind) {
    return std::nullopt;
  }
  if constexpr (Kind == warmup_data_kind::input_data_file) {
    return json(input.input_data_file);
  } else {
    return json(true);
  }
}

inline constexpr json_field<warmup_input_options> warmup_input_fields[] = {
    member_field<&warmup_input_options::type>("data_type", write_rule::always),
    {"dims", read_warmup_dims, write_always<&warmup_input_options::dims>},
    {"zero_data", read_warmup_zero_data, write_warmup_data_source<warmup_data_kind::zero_data>},
    {"random_data", read_warmup_random_data,
     write_warmup_data_source<warmup_data_kind::random_data>},
    {"input_data_file", read_warmup_input_data_file,
     write_warmup_data_source<warmup_data_kind::input_data_file>},
};

[[nodiscard]] SERVEKIT_DECL warmup_input_options read_warmup_input(const json& value,
                                                                   const std::string& path) {
  expect_object(value, path);
  check_oneof(value, path, "input_data_type", {"zero_data", "random_data", "input_data_file"});
  warmup_input_options out;
  read_fields(value, path, out, warmup_input_fields);
  require_fields(value, path, {"data_type", "dims"});
  if (!value.contains("zero_data") && !value.contains("random_data") &&
      !value.contains("input_data_file")) {
    fail_bad_value(path, "a warmup input needs its data source: set one of 'zero_data', "
                         "'random_data' or 'input_data_file' (the oneof input_data_type)");
  }
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const warmup_input_options& input) {
  return write_fields(input, warmup_input_fields);
}

SERVEKIT_DECL void read_warmup_inputs(const json& value, const std::string& path,
                                      model_warmup_options& out) {
  expect_object(value, path, "an object of {\"input name\": {data_type, dims, zero_data|...}}");
  for (const auto& [name, input] : value.items()) {
    out.inputs.emplace(name, read_warmup_input(input, member_path(path, name)));
  }
}

/// batch_size is always written: left out, Triton would read protobuf's 0 and skip the sample.
inline constexpr json_field<model_warmup_options> model_warmup_fields[] = {
    member_field<&model_warmup_options::name>("name"),
    member_field<&model_warmup_options::batch_size>("batch_size", write_rule::always),
    {"inputs", read_warmup_inputs, write_always<&model_warmup_options::inputs>},
    member_field<&model_warmup_options::count>("count"),
};

[[nodiscard]] SERVEKIT_DECL model_warmup_options read_model_warmup_sample(const json& value,
                                                                          const std::string& path) {
  model_warmup_options out;
  read_fields(value, path, out, model_warmup_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const model_warmup_options& sample) {
  return write_fields(sample, model_warmup_fields);
}

// ------------------------------------------------------------------------------------------
// version_policy (ModelVersionPolicy): oneof latest / all / specific, each a view of
// version_policy_options picked by its kind

SERVEKIT_DECL void read_num_versions(const json& value, const std::string& path,
                                     version_policy_options& out) {
  out.num_versions = read_integer<std::uint32_t>(value, path);
  if (out.num_versions == 0) {
    fail_bad_value(path, "num_versions must be at least 1");
  }
}

inline constexpr json_field<version_policy_options> latest_policy_fields[] = {
    {"num_versions", read_num_versions, write_always<&version_policy_options::num_versions>},
};

[[nodiscard]] SERVEKIT_DECL std::int64_t read_version_number(const json& value,
                                                             const std::string& path) {
  const auto version = read_integer<std::int64_t>(value, path);
  if (version < 1) {
    fail_bad_value(path, "a model version must be >= 1, got " + std::to_string(version));
  }
  return version;
}

SERVEKIT_DECL void read_specific_versions(const json& value, const std::string& path,
                                          version_policy_options& out) {
  out.versions = read_array<std::int64_t>(value, path, read_version_number);
  for (std::size_t i = 1; i < out.versions.size(); ++i) {
    const auto first =
        std::find(out.versions.begin(), out.versions.begin() + static_cast<std::ptrdiff_t>(i),
                  out.versions[i]);
    if (first != out.versions.begin() + static_cast<std::ptrdiff_t>(i)) {
      fail_bad_value(element_path(path, i),
                     "version " + std::to_string(out.versions[i]) + " is listed twice");
    }
  }
}

inline constexpr json_field<version_policy_options> specific_policy_fields[] = {
    {"versions", read_specific_versions, write_always<&version_policy_options::versions>},
};

using version_policy_kind = version_policy_options::kind_type;

/// The fields of the policy `Kind` (`all` has none).
template <version_policy_kind Kind>
[[nodiscard]] std::span<const json_field<version_policy_options>> version_policy_kind_fields() {
  if constexpr (Kind == version_policy_kind::latest) {
    return latest_policy_fields;
  } else if constexpr (Kind == version_policy_kind::specific) {
    return specific_policy_fields;
  } else {
    return {};
  }
}

template <version_policy_kind Kind>
void read_version_policy_kind(const json& value, const std::string& path,
                              version_policy_options& out) {
  out.kind = Kind;
  read_fields(value, path, out, version_policy_kind_fields<Kind>());
  if constexpr (Kind == version_policy_kind::specific) {
    if (out.versions.empty()) {
      fail_bad_value(member_path(path, "versions"),
                     "a 'specific' version policy must list at least one version");
    }
  }
}

/// Written for the policy's kind only; a kind outside the enum is written as latest.
template <version_policy_kind Kind>
[[nodiscard]] std::optional<json> write_version_policy_kind(const version_policy_options& in) {
  const bool latest =
      in.kind != version_policy_kind::all && in.kind != version_policy_kind::specific;
  if (Kind == version_policy_kind::latest ? !latest : in.kind != Kind) {
    return std::nullopt;
  }
  return write_fields(in, version_policy_kind_fields<Kind>());
}

inline constexpr json_field<version_policy_options> version_policy_fields[] = {
    {"latest", read_version_policy_kind<version_policy_kind::latest>,
     write_version_policy_kind<version_policy_kind::latest>},
    {"all", read_version_policy_kind<version_policy_kind::all>,
     write_version_policy_kind<version_policy_kind::all>},
    {"specific", read_version_policy_kind<version_policy_kind::specific>,
     write_version_policy_kind<version_policy_kind::specific>},
};

/// `{}` (no choice) is Triton's default, the latest version.
[[nodiscard]] SERVEKIT_DECL version_policy_options read_version_policy(const json& value,
                                                                       const std::string& path) {
  expect_object(value, path);
  check_oneof(value, path, "policy_choice", {"latest", "all", "specific"});
  version_policy_options out;
  read_fields(value, path, out, version_policy_fields);
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const version_policy_options& policy) {
  return write_fields(policy, version_policy_fields);
}

// ------------------------------------------------------------------------------------------
// parameters (map<string, ModelParameter>)

SERVEKIT_DECL void read_string_value(const json& value, const std::string& path, std::string& out) {
  out = read_string(value, path);
}

[[nodiscard]] SERVEKIT_DECL std::optional<json> write_string_value(const std::string& in) {
  return json(in);
}

inline constexpr json_field<std::string> parameter_fields[] = {
    {"string_value", read_string_value, write_string_value},
};

/// `{"string_value": "..."}`; `{}` is the empty string, as in protobuf.
[[nodiscard]] SERVEKIT_DECL std::string read_parameter(const json& value, const std::string& path) {
  expect_object(value, path, "an object {\"string_value\": \"...\"}");
  std::string out;
  read_fields(value, path, out, parameter_fields);
  return out;
}

SERVEKIT_DECL void read_parameters(const json& value, const std::string& path, model_options& out) {
  expect_object(value, path, "an object of {\"key\": {\"string_value\": \"...\"}}");
  parameter_map parameters;
  for (const auto& [key, parameter] : value.items()) {
    parameters.emplace(key, read_parameter(parameter, member_path(path, key)));
  }
  out.parameters = std::move(parameters);
}

[[nodiscard]] SERVEKIT_DECL std::optional<json> write_parameters(const model_options& in) {
  if (in.parameters.empty()) {
    return std::nullopt;
  }
  json out = json::object();
  const json_teardown_on_throw teardown{out}; // see to_json_value
  for (const auto& [key, value] : in.parameters) {
    json written = write_fields(value, parameter_fields);
    const json_teardown_on_throw written_teardown{written};
    out[key] = std::move(written);
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// ModelConfig top level

SERVEKIT_DECL void read_model_name(const json& value, const std::string& path, model_options& out) {
  out.name = read_string(value, path);
  if (out.name.empty()) {
    fail_bad_value(path, "model name must not be empty");
  }
}

SERVEKIT_DECL void read_model_version(const json& value, const std::string& path,
                                      model_options& out) {
  out.version = read_integer<std::int64_t>(value, path);
  if (out.version < 1) {
    fail_bad_value(path, "model version must be >= 1, got " + std::to_string(out.version));
  }
}

/// An ensemble without a platform is written with Triton's "ensemble", which Triton requires.
[[nodiscard]] SERVEKIT_DECL std::optional<json> write_platform(const model_options& in) {
  if (!in.platform.empty()) {
    return json(in.platform);
  }
  if (in.ensemble_scheduling) {
    return json(std::string{ensemble_platform});
  }
  return std::nullopt;
}

SERVEKIT_DECL void read_max_batch_size(const json& value, const std::string& path,
                                       model_options& out) {
  const auto size = read_integer<std::int32_t>(value, path);
  if (size < 0) {
    fail_bad_value(path, "'max_batch_size' must be non-negative value");
  }
  out.max_batch_size = size;
}

/// ModelConfig fields servekit refuses by name until it implements them. To add one, give its
/// message a field list (as above), add its line to model_config_fields and drop it from here.
inline constexpr std::string_view model_config_not_yet_supported[] = {
    "runtime",
    "batch_input",
    "batch_output",
    "optimization",
    "cc_model_filenames",
    "metric_tags",
    "model_operations",
    "model_repository_agents",
    "model_metrics",
};

/// name and version are always written.
inline constexpr json_field<model_options> model_config_fields[] = {
    {"name", read_model_name, write_always<&model_options::name>},
    {"version", read_model_version, write_always<&model_options::version>},
    member_field<&model_options::backend>("backend"),
    {"platform", read_member<&model_options::platform>, write_platform},
    {"max_batch_size", read_max_batch_size, write_unless_default<&model_options::max_batch_size>},
    {"input", read_inputs, write_unless_default<&model_options::input>},
    {"output", read_outputs, write_unless_default<&model_options::output>},
    {"dynamic_batching", read_with<read_dynamic_batching, &model_options::dynamic_batching>,
     write_unless_default<&model_options::dynamic_batching>},
    {"sequence_batching", read_with<read_sequence_batching, &model_options::sequence_batching>,
     write_unless_default<&model_options::sequence_batching>},
    {"ensemble_scheduling",
     read_with<read_ensemble_scheduling, &model_options::ensemble_scheduling>,
     write_unless_default<&model_options::ensemble_scheduling>},
    {"instance_group", read_with<read_instance_group, &model_options::instance_group>,
     write_unless_default<&model_options::instance_group>},
    {"model_transaction_policy",
     read_with<read_model_transaction_policy, &model_options::model_transaction_policy>,
     write_unless_default<&model_options::model_transaction_policy>},
    {"response_cache", read_with<read_response_cache, &model_options::response_cache>,
     write_unless_default<&model_options::response_cache>},
    {"model_warmup", read_with<read_model_warmup_sample, &model_options::model_warmup>,
     write_unless_default<&model_options::model_warmup>},
    {"version_policy", read_with<read_version_policy, &model_options::version_policy>,
     write_unless_default<&model_options::version_policy>},
    {"parameters", read_parameters, write_parameters},
    member_field<&model_options::default_model_filename>("default_model_filename"),
};

[[nodiscard]] SERVEKIT_DECL model_options read_model_config(const json& value) {
  const std::string root;
  expect_object(value, root, "an object (a Triton model config)");
  model_options out;
  read_fields(value, root, out, model_config_fields, model_config_not_yet_supported);
  check_model_options(out);
  if (out.ensemble_scheduling && out.platform.empty()) {
    out.platform = ensemble_platform; // as Triton, which requires it
  }
  return out;
}

[[nodiscard]] SERVEKIT_DECL json write_message(const model_options& options) {
  return write_fields(options, model_config_fields);
}

} // namespace detail

[[nodiscard]] SERVEKIT_DECL model_options load_model_config(const nlohmann::json& config) {
  return detail::read_model_config(config);
}

[[nodiscard]] SERVEKIT_DECL model_options load_model_config(std::string_view json_text) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(json_text.data(), json_text.data() + json_text.size());
  } catch (const nlohmann::json::exception& e) { // parse_error, or out_of_range for 1e400
    throw config_error(config_error_code::parse_error, "",
                       std::string{"model config is not valid JSON: "} + e.what());
  }
  return load_model_config(config);
}

[[nodiscard]] SERVEKIT_DECL model_options load_model_config(const char* json_text) {
  return load_model_config(std::string_view{json_text});
}

[[nodiscard]] SERVEKIT_DECL model_options load_model_config(const std::string& json_text) {
  return load_model_config(std::string_view{json_text});
}

[[nodiscard]] SERVEKIT_DECL nlohmann::json save_model_config(const model_options& options) {
  return detail::write_message(options);
}

} // namespace servekit
