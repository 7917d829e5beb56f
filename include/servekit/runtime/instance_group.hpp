#pragma once
/// \file
/// The instance-group role: how many backend instances a model runs, each on its own thread.

#include <servekit/backend/instance_context.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/runtime/model_options.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace servekit {

/// Tag naming the instance-group role.
struct instance_group_role {};

/// Policy: run `Count` instances of the backend when the options list no instance_group (the
/// options' `instance_group` entries, e.g. from a Triton config, take precedence). Each instance
/// is its own backend object on its own thread, so instances execute concurrently.
template <std::int32_t Count = 1>
struct instance_group {
  static_assert(Count >= 1, "servekit: instance_group<Count> needs Count >= 1");
  using policy_role = instance_group_role;
  static constexpr std::int32_t default_count = Count;
};

/// One instance to create, after KIND_AUTO and GPU lists are resolved.
struct instance_placement {
  std::string name;
  instance_kind kind = instance_kind::cpu;
  int device_id = 0;
};

/// Expands instance groups into instances, named as Triton names them ("<group>_<index>").
/// Throws config_error for a count below 1 or a GPU group without devices.
[[nodiscard]] inline std::vector<instance_placement>
place_instances(const std::string& model_name, const std::vector<instance_group_options>& groups,
                std::int32_t default_count) {
  std::vector<instance_placement> out;
  if (groups.empty()) {
    for (std::int32_t i = 0; i < default_count; ++i) {
      out.push_back({model_name + "_0_" + std::to_string(i), instance_kind::cpu, 0});
    }
    return out;
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& group = groups[g];
    const std::string path = "/instance_group/" + std::to_string(g);
    const std::string name = group.name.empty() ? model_name + "_" + std::to_string(g) : group.name;
    if (group.count < 1) {
      throw config_error(config_error_code::bad_value, path + "/count",
                         "instance group count must be at least 1");
    }
    const bool gpu = group.kind == instance_group_kind::kind_gpu ||
                     (group.kind == instance_group_kind::kind_auto && !group.gpus.empty());
    if (!gpu && !group.gpus.empty()) {
      throw config_error(config_error_code::bad_value, path + "/gpus",
                         "instance group of kind KIND_CPU or KIND_MODEL must not list gpus");
    }
    if (gpu && group.gpus.empty()) {
      throw config_error(config_error_code::bad_value, path + "/gpus",
                         "instance group of kind KIND_GPU must list its gpus");
    }
    std::int32_t index = 0;
    if (gpu) {
      for (const auto device : group.gpus) {
        for (std::int32_t i = 0; i < group.count; ++i) {
          out.push_back({name + "_" + std::to_string(index++), instance_kind::gpu, device});
        }
      }
    } else {
      const auto kind =
          group.kind == instance_group_kind::kind_model ? instance_kind::model : instance_kind::cpu;
      for (std::int32_t i = 0; i < group.count; ++i) {
        out.push_back({name + "_" + std::to_string(index++), kind, 0});
      }
    }
  }
  return out;
}

} // namespace servekit
