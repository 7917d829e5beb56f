#pragma once
/// \file
/// instance_context: what a backend instance is told when it is constructed (and model_context:
/// what a backend's optional model-wide state is told).

#include <servekit/backend/tensor_declaration.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace servekit {

/// Where an instance runs (Triton's instance_group kind, after KIND_AUTO is resolved).
enum class instance_kind : std::uint8_t { cpu, gpu, model };

/// Model parameters: Triton's `parameters` map of `{ "key": { "string_value": "..." } }`.
using parameter_map = std::map<std::string, std::string, std::less<>>;

/// The value of parameter `key` in `parameters` (null: none), if set.
[[nodiscard]] inline std::optional<std::string_view> find_parameter(const parameter_map* parameters,
                                                                    std::string_view key) {
  if (parameters == nullptr) {
    return std::nullopt;
  }
  const auto it = parameters->find(key);
  if (it == parameters->end()) {
    return std::nullopt;
  }
  return std::string_view{it->second};
}

/// Handed to a backend's optional `model_state` constructor: Triton's TRITONBACKEND_Model, as a
/// value. Valid while the model exists.
struct model_context {
  std::string_view model_name;
  std::int64_t model_version = 1;
  std::int32_t max_batch_size = 0; ///< 0: requests carry no batch dimension
  std::span<const tensor_config> inputs;
  std::span<const tensor_config> outputs;
  const parameter_map* parameters = nullptr;
  std::string_view directory; ///< the model's folder in a repository ("" outside one)
  /// The config's `default_model_filename` ("" when it sets none: the backend's own default).
  std::string_view default_model_filename;
  /// Under the sequence batcher, the tensors it adds to every request besides `inputs`: one per
  /// control input (dims [1], one value per request), then each implicit state's input; and
  /// each implicit state's output, which the backend returns besides `outputs`. Empty
  /// otherwise. A backend that maps a model file's arguments onto tensors needs them all.
  std::span<const tensor_config> sequence_inputs;
  std::span<const tensor_config> state_outputs;

  /// A model parameter's string value, if the config sets it.
  [[nodiscard]] std::optional<std::string_view> parameter(std::string_view key) const {
    return find_parameter(parameters, key);
  }
};

/// Handed to every backend constructor: Triton's TRITONBACKEND_ModelInstance, as a value.
struct instance_context {
  std::string_view model_name;
  std::int64_t model_version = 1;
  std::string_view instance_name; ///< "<model>_<group>_<index in group>"
  std::size_t instance_index = 0; ///< 0..instance_count-1 across all groups
  instance_kind kind = instance_kind::cpu;
  int device_id = 0;               ///< the GPU for kind == gpu
  std::int32_t max_batch_size = 0; ///< 0: requests carry no batch dimension
  std::span<const tensor_config> inputs;
  std::span<const tensor_config> outputs;
  const parameter_map* parameters = nullptr;

  /// A model parameter's string value, if the config sets it.
  [[nodiscard]] std::optional<std::string_view> parameter(std::string_view key) const {
    return find_parameter(parameters, key);
  }
};

} // namespace servekit
