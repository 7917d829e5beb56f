#pragma once
/// \file
/// model_options: a model's run-time configuration, named after Triton's model config fields.
/// config/model_config_json.hpp loads and saves it as Triton's JSON.

#include <servekit/backend/instance_context.hpp>
#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/schedule/dynamic_batching_options.hpp>
#include <servekit/schedule/ensemble_scheduling_options.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace servekit {

/// Triton's instance group kinds. KIND_AUTO resolves to GPU when `gpus` lists devices and to
/// CPU otherwise; KIND_MODEL leaves placement to the backend.
enum class instance_group_kind : std::uint8_t { kind_auto, kind_gpu, kind_cpu, kind_model };

/// One resource an instance needs to execute (Triton's ModelRateLimiter.Resource).
struct rate_limiter_resource {
  std::string name;
  /// One pool shared by every device (true), or one pool per device (false, Triton's default).
  bool global = false;
  std::uint32_t count = 0; ///< how many of the resource one execution holds
  friend bool operator==(const rate_limiter_resource&, const rate_limiter_resource&) = default;
};

/// `instance_group[].rate_limiter` (Triton's ModelRateLimiter). Used only when the server runs
/// a rate limiter (`--rate-limit execution_count`); see servekit::rate_limiter.
struct rate_limiter_options {
  std::vector<rate_limiter_resource> resources;
  /// Scheduling weight: an instance with priority 2 gets about half the chances of one with
  /// priority 1 when they compete. 0 counts as 1, as in Triton.
  std::uint32_t priority = 1;
  friend bool operator==(const rate_limiter_options&, const rate_limiter_options&) = default;
};

/// One entry of `instance_group`.
struct instance_group_options {
  std::string name; ///< default "<model>_<index of the group>"
  instance_group_kind kind = instance_group_kind::kind_auto;
  std::int32_t count = 1;         ///< per listed GPU for GPU groups, else in total
  std::vector<std::int32_t> gpus; ///< devices for GPU groups
  std::optional<rate_limiter_options> rate_limiter;
  friend bool operator==(const instance_group_options&, const instance_group_options&) = default;
};

/// `model_transaction_policy` (Triton's ModelTransactionPolicy).
struct model_transaction_policy_options {
  /// Whether a request may get zero, one or many responses before its final one. Must agree
  /// with the backend's `decoupled` trait.
  bool decoupled = false;
  /// servekit extension: a decoupled request whose final response has not been sent this long
  /// after its execution started gets a `deadline_exceeded` final response, and what the backend
  /// sends later is dropped. 0: no limit.
  std::uint64_t final_response_timeout_microseconds = 0;
  friend bool operator==(const model_transaction_policy_options&,
                         const model_transaction_policy_options&) = default;
};

/// `response_cache` (Triton's ModelResponseCache). Takes effect when the model is given a
/// servekit::response_cache (the server's `--cache-config local,size=N`).
struct response_cache_options {
  bool enable = false;
  friend bool operator==(const response_cache_options&, const response_cache_options&) = default;
};

/// Where a warmup input's data comes from (Triton's ModelWarmup.Input oneof input_data_type).
enum class warmup_data_kind : std::uint8_t { zero_data, random_data, input_data_file };

/// One input of a warmup sample.
struct warmup_input_options {
  data_type type = data_type::invalid;
  std::vector<std::int64_t> dims; ///< without the batch dimension; no -1
  warmup_data_kind kind = warmup_data_kind::zero_data;
  /// For input_data_file: a file under `<model directory>/warmup/`, raw little-endian
  /// elements (BYTES: each element a 4-byte length then its bytes), as Triton reads it.
  std::string input_data_file;
  friend bool operator==(const warmup_input_options&, const warmup_input_options&) = default;
};

/// One `model_warmup` sample (Triton's ModelWarmup): run on every instance before the model
/// is reported ready.
struct model_warmup_options {
  std::string name;
  std::uint32_t batch_size = 1; ///< 1 for models that do not batch
  std::map<std::string, warmup_input_options, std::less<>> inputs;
  std::uint32_t count = 0; ///< executions of this sample; 0 means once, as in Triton
  friend bool operator==(const model_warmup_options&, const model_warmup_options&) = default;
};

/// Which versions of a model are served (Triton's ModelVersionPolicy).
struct version_policy_options {
  enum class kind_type : std::uint8_t { latest, all, specific };
  kind_type kind = kind_type::latest;
  std::uint32_t num_versions = 1;     ///< for latest
  std::vector<std::int64_t> versions; ///< for specific
  friend bool operator==(const version_policy_options&, const version_policy_options&) = default;
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
  /// Decoupled (several responses per request) or not.
  std::optional<model_transaction_policy_options> model_transaction_policy;
  /// Serve repeated byte-identical requests from the response cache.
  std::optional<response_cache_options> response_cache;
  /// Warmup samples run on every instance before the model is ready.
  std::vector<model_warmup_options> model_warmup;
  /// Which version folders of the model a repository serves (unset: the latest one).
  std::optional<version_policy_options> version_policy;
  /// Free-form parameters for the backend.
  parameter_map parameters;
  /// The model file in each version folder, for backends that read one (Triton's field; empty:
  /// the backend's default, such as `model.onnx` or `model.pt`).
  std::string default_model_filename;
  /// The model's folder (in a model repository), where files the config names are read from,
  /// such as `initial_state/<data_file>`. Not part of the JSON config; empty: the working
  /// directory.
  std::string directory;

  friend bool operator==(const model_options&, const model_options&) = default;
};

} // namespace servekit
