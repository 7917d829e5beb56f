#pragma once
/// \file
/// model_options: a model's run-time configuration, named after Triton's model config fields.
/// config/model_config_json.hpp loads and saves it as Triton's JSON.

#include <servekit/backend/instance_context.hpp>
#include <servekit/backend/tensor_spec.hpp>
#include <servekit/ensemble/ensemble_scheduling_options.hpp>
#include <servekit/schedule/dynamic_batching_options.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace servekit {

/// Triton's instance group kinds. KIND_AUTO resolves to GPU when `gpus` lists devices and to
/// CPU otherwise; KIND_MODEL leaves placement to the backend.
enum class instance_group_kind : std::uint8_t { kind_auto, kind_gpu, kind_cpu, kind_model };

/// One entry of `instance_group`.
struct instance_group_options {
  std::string name; ///< default "<model>_<index of the group>"
  instance_group_kind kind = instance_group_kind::kind_auto;
  std::int32_t count = 1;         ///< per listed GPU for GPU groups, else in total
  std::vector<std::int32_t> gpus; ///< devices for GPU groups
  friend bool operator==(const instance_group_options&, const instance_group_options&) = default;
};

/// Everything that configures a model at run time. Which scheduler runs is a type (a policy of
/// `model<...>`); its numbers are here, with Triton's names.
struct model_options {
  std::string name = "model";
  std::int64_t version = 1;
  std::string backend;  ///< informational: which backend serves the model
  std::string platform; ///< informational ("ensemble" for ensembles)
  /// Largest batch; unset: the backend's declared max_batch_size (or 0).
  std::optional<std::int32_t> max_batch_size;
  /// Declared inputs/outputs; empty: the backend's declared ones.
  std::vector<tensor_config> input;
  std::vector<tensor_config> output;
  /// Dynamic batching settings (used by the dynamic_batcher policy).
  std::optional<dynamic_batching_options> dynamic_batching;
  /// Sequence batching settings (used by the sequence_batcher policy).
  std::optional<sequence_batching_options> sequence_batching;
  /// Ensemble steps (models with `platform: "ensemble"`; see servekit::runtime_ensemble).
  std::optional<ensemble_scheduling_options> ensemble_scheduling;
  /// Instance groups; empty: the instance_group policy's count on the CPU.
  std::vector<instance_group_options> instance_group;
  /// Free-form parameters for the backend.
  parameter_map parameters;
  /// The model's folder (in a model repository), where files the config names are read from,
  /// such as `initial_state/<data_file>`. Not part of the JSON config; empty: the working
  /// directory.
  std::string directory;

  friend bool operator==(const model_options&, const model_options&) = default;
};

} // namespace servekit
