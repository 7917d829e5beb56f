#pragma once
/// \file
/// Definitions for config/model_config_json.hpp: reading ensemble_scheduling,
/// model_transaction_policy, response_cache, model_warmup[], version_policy, parameters and the
/// ModelConfig top level, and load_model_config. Compiled once into servekit::server, or included
/// by model_config_json.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/config/detail/model_config_json.hpp>
#include <servekit/config/model_config_json.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/server_tier.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/schedule/ensemble_scheduling_options.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace servekit {

namespace detail {

// ------------------------------------------------------------------------------------------
// ensemble_scheduling (ModelEnsembling). Only what the config alone decides is checked here;
// the rules that need the composing models (every input mapped, types agreeing, no cycles) are
// the ensemble's to check when it is built.

SERVEKIT_SERVER_DECL void read_ensemble_model_name(const json& value, const std::string& path,
                                                   ensemble_step_options& out) {
  out.model_name = read_string(value, path);
  if (out.model_name.empty()) {
    fail_bad_value(path, "ensemble step model_name must not be empty");
  }
}

/// -1 (the latest version) or a version >= 1; Triton writes int64 as a JSON number or a string.
SERVEKIT_SERVER_DECL void read_ensemble_model_version(const json& value, const std::string& path,
                                                      ensemble_step_options& out) {
  out.model_version = read_integer<std::int64_t>(value, path);
  if (out.model_version < 1 && out.model_version != -1) {
    fail_bad_value(path, "ensemble step model_version must be -1 (the latest version) or a "
                         "version >= 1, got " +
                             std::to_string(out.model_version));
  }
}

/// Triton reserves `model_namespace`; only its default, the empty string, is accepted.
SERVEKIT_SERVER_DECL void read_ensemble_model_namespace(const json& value, const std::string& path,
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

[[nodiscard]] SERVEKIT_SERVER_DECL ensemble_step_options
read_ensemble_step(const json& value, const std::string& path) {
  using options = ensemble_step_options;
  static constexpr field_reader<options> fields[] = {
      {"model_name", read_ensemble_model_name},
      {"model_version", read_ensemble_model_version},
      {"input_map", read_tensor_map_member<&options::input_map>},
      {"output_map", read_tensor_map_member<&options::output_map>},
      {"model_namespace", read_ensemble_model_namespace},
  };
  options out;
  read_fields(value, path, out, fields);
  require_fields(value, path, {"model_name"});
  return out;
}

SERVEKIT_SERVER_DECL void read_ensemble_steps(const json& value, const std::string& path,
                                              ensemble_scheduling_options& out) {
  out.step = read_array<ensemble_step_options>(value, path, read_ensemble_step);
}

[[nodiscard]] SERVEKIT_SERVER_DECL ensemble_scheduling_options
read_ensemble_scheduling(const json& value, const std::string& path) {
  using options = ensemble_scheduling_options;
  static constexpr field_reader<options> fields[] = {
      {"step", read_ensemble_steps},
      {"max_inflight_requests", read_member<&options::max_inflight_requests>},
  };
  options out;
  read_fields(value, path, out, fields);
  if (out.step.empty()) {
    const std::string missing = value.contains("step") ? "" : "required field 'step' is missing; ";
    fail_bad_value(member_path(path, "step"),
                   missing + "ensemble_scheduling needs at least one step");
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// model_transaction_policy (ModelTransactionPolicy) and response_cache (ModelResponseCache)

[[nodiscard]] SERVEKIT_SERVER_DECL model_transaction_policy_options
read_model_transaction_policy(const json& value, const std::string& path) {
  using options = model_transaction_policy_options;
  static constexpr field_reader<options> fields[] = {
      {"decoupled", read_member<&options::decoupled>},
      {"final_response_timeout_microseconds",
       read_member<&options::final_response_timeout_microseconds>},
  };
  options out;
  read_fields(value, path, out, fields);
  return out;
}

SERVEKIT_SERVER_DECL void read_model_transaction_policy_field(const json& value,
                                                              const std::string& path,
                                                              model_options& out) {
  out.model_transaction_policy = read_model_transaction_policy(value, path);
}

SERVEKIT_SERVER_DECL void read_response_cache_field(const json& value, const std::string& path,
                                                    model_options& out) {
  static constexpr field_reader<response_cache_options> fields[] = {
      {"enable", read_member<&response_cache_options::enable>},
  };
  response_cache_options cache;
  read_fields(value, path, cache, fields);
  out.response_cache = cache;
}

// ------------------------------------------------------------------------------------------
// model_warmup[] (ModelWarmup)

SERVEKIT_SERVER_DECL void read_warmup_data_type(const json& value, const std::string& path,
                                                warmup_input_options& out) {
  out.type = read_data_type(value, path);
}

/// A warmup input has a concrete shape: every dimension >= 0, no -1 (the batch dimension is
/// left out; batch_size adds it).
SERVEKIT_SERVER_DECL void read_warmup_dims(const json& value, const std::string& path,
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
[[nodiscard]] SERVEKIT_SERVER_DECL bool read_true_flag(const json& value, const std::string& path,
                                                       std::string_view field) {
  if (!read_bool(value, path)) {
    fail_bad_value(path, "'" + std::string{field} +
                             "' must be true when present (it picks the input's data source)");
  }
  return true;
}

SERVEKIT_SERVER_DECL void read_warmup_zero_data(const json& value, const std::string& path,
                                                warmup_input_options& out) {
  (void)read_true_flag(value, path, "zero_data");
  out.kind = warmup_data_kind::zero_data;
}

SERVEKIT_SERVER_DECL void read_warmup_random_data(const json& value, const std::string& path,
                                                  warmup_input_options& out) {
  (void)read_true_flag(value, path, "random_data");
  out.kind = warmup_data_kind::random_data;
}

/// A file name under `<model>/warmup/`: relative, and never leaving that folder.
SERVEKIT_SERVER_DECL void read_warmup_input_data_file(const json& value, const std::string& path,
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

[[nodiscard]] SERVEKIT_SERVER_DECL warmup_input_options read_warmup_input(const json& value,
                                                                          const std::string& path) {
  static constexpr field_reader<warmup_input_options> fields[] = {
      {"data_type", read_warmup_data_type},
      {"dims", read_warmup_dims},
      {"zero_data", read_warmup_zero_data},
      {"random_data", read_warmup_random_data},
      {"input_data_file", read_warmup_input_data_file},
  };
  expect_object(value, path);
  check_oneof(value, path, "input_data_type", {"zero_data", "random_data", "input_data_file"});
  warmup_input_options out;
  read_fields(value, path, out, fields);
  require_fields(value, path, {"data_type", "dims"});
  if (!value.contains("zero_data") && !value.contains("random_data") &&
      !value.contains("input_data_file")) {
    fail_bad_value(path, "a warmup input needs its data source: set one of 'zero_data', "
                         "'random_data' or 'input_data_file' (the oneof input_data_type)");
  }
  return out;
}

SERVEKIT_SERVER_DECL void read_warmup_inputs(const json& value, const std::string& path,
                                             model_warmup_options& out) {
  expect_object(value, path, "an object of {\"input name\": {data_type, dims, zero_data|...}}");
  for (const auto& [name, input] : value.items()) {
    out.inputs.emplace(name, read_warmup_input(input, member_path(path, name)));
  }
}

[[nodiscard]] SERVEKIT_SERVER_DECL model_warmup_options
read_model_warmup_sample(const json& value, const std::string& path) {
  using options = model_warmup_options;
  static constexpr field_reader<options> fields[] = {
      {"name", read_member<&options::name>},
      {"batch_size", read_member<&options::batch_size>},
      {"inputs", read_warmup_inputs},
      {"count", read_member<&options::count>},
  };
  options out;
  read_fields(value, path, out, fields);
  return out;
}

SERVEKIT_SERVER_DECL void read_model_warmup(const json& value, const std::string& path,
                                            model_options& out) {
  out.model_warmup = read_array<model_warmup_options>(value, path, read_model_warmup_sample);
}

// ------------------------------------------------------------------------------------------
// version_policy (ModelVersionPolicy): oneof latest / all / specific

SERVEKIT_SERVER_DECL void read_num_versions(const json& value, const std::string& path,
                                            version_policy_options& out) {
  out.num_versions = read_integer<std::uint32_t>(value, path);
  if (out.num_versions == 0) {
    fail_bad_value(path, "num_versions must be at least 1");
  }
}

SERVEKIT_SERVER_DECL void read_latest_policy(const json& value, const std::string& path,
                                             version_policy_options& out) {
  static constexpr field_reader<version_policy_options> fields[] = {
      {"num_versions", read_num_versions},
  };
  out.kind = version_policy_options::kind_type::latest;
  read_fields(value, path, out, fields);
}

SERVEKIT_SERVER_DECL void read_all_policy(const json& value, const std::string& path,
                                          version_policy_options& out) {
  out.kind = version_policy_options::kind_type::all;
  read_fields<version_policy_options>(value, path, out, {});
}

[[nodiscard]] SERVEKIT_SERVER_DECL std::int64_t read_version_number(const json& value,
                                                                    const std::string& path) {
  const auto version = read_integer<std::int64_t>(value, path);
  if (version < 1) {
    fail_bad_value(path, "a model version must be >= 1, got " + std::to_string(version));
  }
  return version;
}

SERVEKIT_SERVER_DECL void read_specific_versions(const json& value, const std::string& path,
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

SERVEKIT_SERVER_DECL void read_specific_policy(const json& value, const std::string& path,
                                               version_policy_options& out) {
  static constexpr field_reader<version_policy_options> fields[] = {
      {"versions", read_specific_versions},
  };
  out.kind = version_policy_options::kind_type::specific;
  read_fields(value, path, out, fields);
  if (out.versions.empty()) {
    fail_bad_value(member_path(path, "versions"),
                   "a 'specific' version policy must list at least one version");
  }
}

/// `{}` (no choice) is Triton's default, the latest version.
SERVEKIT_SERVER_DECL void read_version_policy(const json& value, const std::string& path,
                                              model_options& out) {
  static constexpr field_reader<version_policy_options> fields[] = {
      {"latest", read_latest_policy},
      {"all", read_all_policy},
      {"specific", read_specific_policy},
  };
  expect_object(value, path);
  check_oneof(value, path, "policy_choice", {"latest", "all", "specific"});
  version_policy_options policy;
  read_fields(value, path, policy, fields);
  out.version_policy = std::move(policy);
}

// ------------------------------------------------------------------------------------------
// parameters (map<string, ModelParameter>)

SERVEKIT_SERVER_DECL void read_string_value(const json& value, const std::string& path,
                                            std::string& out) {
  out = read_string(value, path);
}

/// `{"string_value": "..."}`; `{}` is the empty string, as in protobuf.
[[nodiscard]] SERVEKIT_SERVER_DECL std::string read_parameter(const json& value,
                                                              const std::string& path) {
  static constexpr field_reader<std::string> fields[] = {{"string_value", read_string_value}};
  expect_object(value, path, "an object {\"string_value\": \"...\"}");
  std::string out;
  read_fields(value, path, out, fields);
  return out;
}

SERVEKIT_SERVER_DECL void read_parameters(const json& value, const std::string& path,
                                          model_options& out) {
  expect_object(value, path, "an object of {\"key\": {\"string_value\": \"...\"}}");
  parameter_map parameters;
  for (const auto& [key, parameter] : value.items()) {
    parameters.emplace(key, read_parameter(parameter, member_path(path, key)));
  }
  out.parameters = std::move(parameters);
}

// ------------------------------------------------------------------------------------------
// ModelConfig top level

SERVEKIT_SERVER_DECL void read_model_name(const json& value, const std::string& path,
                                          model_options& out) {
  out.name = read_string(value, path);
  if (out.name.empty()) {
    fail_bad_value(path, "model name must not be empty");
  }
}

SERVEKIT_SERVER_DECL void read_model_version(const json& value, const std::string& path,
                                             model_options& out) {
  out.version = read_integer<std::int64_t>(value, path);
  if (out.version < 1) {
    fail_bad_value(path, "model version must be >= 1, got " + std::to_string(out.version));
  }
}

SERVEKIT_SERVER_DECL void read_max_batch_size(const json& value, const std::string& path,
                                              model_options& out) {
  const auto size = read_integer<std::int32_t>(value, path);
  if (size < 0) {
    fail_bad_value(path, "'max_batch_size' must be non-negative value");
  }
  out.max_batch_size = size;
}

SERVEKIT_SERVER_DECL void read_dynamic_batching_field(const json& value, const std::string& path,
                                                      model_options& out) {
  out.dynamic_batching = read_dynamic_batching(value, path);
}

SERVEKIT_SERVER_DECL void read_sequence_batching_field(const json& value, const std::string& path,
                                                       model_options& out) {
  out.sequence_batching = read_sequence_batching(value, path);
}

SERVEKIT_SERVER_DECL void read_ensemble_scheduling_field(const json& value, const std::string& path,
                                                         model_options& out) {
  out.ensemble_scheduling = read_ensemble_scheduling(value, path);
}

/// ModelConfig fields servekit refuses by name until it implements them. To add one, write its
/// reader (one small function per message, as above), list it in read_model_config's table and
/// drop it from here.
inline constexpr std::string_view model_config_not_yet_supported[] = {
    "runtime",
    "batch_input",
    "batch_output",
    "optimization",
    "default_model_filename",
    "cc_model_filenames",
    "metric_tags",
    "model_operations",
    "model_repository_agents",
    "model_metrics",
};

[[nodiscard]] SERVEKIT_SERVER_DECL model_options read_model_config(const json& value) {
  static constexpr field_reader<model_options> fields[] = {
      {"name", read_model_name},
      {"version", read_model_version},
      {"backend", read_member<&model_options::backend>},
      {"platform", read_member<&model_options::platform>},
      {"max_batch_size", read_max_batch_size},
      {"input", read_inputs},
      {"output", read_outputs},
      {"dynamic_batching", read_dynamic_batching_field},
      {"sequence_batching", read_sequence_batching_field},
      {"ensemble_scheduling", read_ensemble_scheduling_field},
      {"instance_group", read_instance_groups},
      {"model_transaction_policy", read_model_transaction_policy_field},
      {"response_cache", read_response_cache_field},
      {"model_warmup", read_model_warmup},
      {"version_policy", read_version_policy},
      {"parameters", read_parameters},
  };
  const std::string root;
  expect_object(value, root, "an object (a Triton model config)");
  model_options out;
  read_fields(value, root, out, fields, model_config_not_yet_supported);
  check_model_options(out);
  if (out.ensemble_scheduling && out.platform.empty()) {
    out.platform = ensemble_platform; // as Triton, which requires it
  }
  return out;
}

} // namespace detail

[[nodiscard]] SERVEKIT_SERVER_DECL model_options load_model_config(const nlohmann::json& config) {
  return detail::read_model_config(config);
}

[[nodiscard]] SERVEKIT_SERVER_DECL model_options load_model_config(std::string_view json_text) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(json_text.data(), json_text.data() + json_text.size());
  } catch (const nlohmann::json::exception& e) { // parse_error, or out_of_range for 1e400
    throw config_error(config_error_code::parse_error, "",
                       std::string{"model config is not valid JSON: "} + e.what());
  }
  return load_model_config(config);
}

[[nodiscard]] SERVEKIT_SERVER_DECL model_options load_model_config(const char* json_text) {
  return load_model_config(std::string_view{json_text});
}

[[nodiscard]] SERVEKIT_SERVER_DECL model_options load_model_config(const std::string& json_text) {
  return load_model_config(std::string_view{json_text});
}

} // namespace servekit
