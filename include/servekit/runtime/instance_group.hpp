#pragma once
/// \file
/// The instance-group role: how many backend instances a model runs, each on its own thread.

#include <servekit/backend/instance_context.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/runtime/model_options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
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

namespace detail {

/// The GPUs of group `g` after resolving Triton's rules; empty: the group runs on the CPU.
/// `visible` is the backend's device count, or nullopt when the backend does not say (then the
/// config is trusted: a GPU group must list its devices, which go unchecked).
[[nodiscard]] inline std::vector<std::int32_t> group_gpus(const instance_group_options& group,
                                                          const std::string& path,
                                                          std::optional<int> visible) {
  const bool gpu_kind = group.kind == instance_group_kind::kind_gpu;
  const bool auto_kind = group.kind == instance_group_kind::kind_auto;
  if (!gpu_kind && !auto_kind) {
    if (!group.gpus.empty()) {
      throw config_error(config_error_code::bad_value, path + "/gpus",
                         "instance group of kind KIND_CPU or KIND_MODEL must not list gpus");
    }
    return {};
  }
  if (!visible) {
    if (gpu_kind && group.gpus.empty()) {
      throw config_error(config_error_code::bad_value, path + "/gpus",
                         "instance group of kind KIND_GPU must list its gpus (the backend does "
                         "not declare device_count(), so servekit cannot find them)");
    }
    return group.gpus;
  }
  if (group.gpus.empty()) {
    if (*visible <= 0 && gpu_kind) {
      throw config_error(config_error_code::bad_value, path + "/kind",
                         "instance group of kind KIND_GPU, but no GPU is visible");
    }
    std::vector<std::int32_t> all(static_cast<std::size_t>(std::max(*visible, 0)));
    std::iota(all.begin(), all.end(), 0);
    return all; // KIND_AUTO without GPUs: empty, the CPU
  }
  for (std::size_t i = 0; i < group.gpus.size(); ++i) {
    if (group.gpus[i] >= *visible) {
      throw config_error(config_error_code::bad_value, path + "/gpus/" + std::to_string(i),
                         "instance group lists GPU " + std::to_string(group.gpus[i]) + ", but " +
                             std::to_string(*visible) + " GPU" + (*visible == 1 ? " is" : "s are") +
                             " visible");
    }
  }
  return group.gpus;
}

} // namespace detail

/// Expands instance groups into instances, named as Triton names them ("<group>_<index>"), with
/// Triton's placement rules: KIND_GPU runs `count` instances on each of its `gpus` (every visible
/// GPU when it lists none), KIND_AUTO is a GPU group when it lists GPUs or when GPUs are visible
/// and a CPU group otherwise, KIND_CPU and KIND_MODEL run `count` instances in all.
///
/// `visible_gpus` is the backend's `device_count()` (backend_traits), or nullopt when the
/// backend does not declare one: then KIND_AUTO means the CPU unless it lists GPUs, and GPU ids
/// go unchecked. Without groups, `default_count` instances run on every visible GPU, or on the
/// CPU. Throws config_error for a count below 1, a GPU group without GPUs, or a GPU that is not
/// visible.
[[nodiscard]] inline std::vector<instance_placement>
place_instances(const std::string& model_name, const std::vector<instance_group_options>& groups,
                std::int32_t default_count, std::optional<int> visible_gpus = std::nullopt) {
  std::vector<instance_placement> out;
  if (groups.empty()) {
    const instance_group_options implicit{.name = model_name + "_0",
                                          .kind = instance_group_kind::kind_auto,
                                          .count = default_count,
                                          .gpus = {}};
    return place_instances(model_name, {implicit}, default_count, visible_gpus);
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& group = groups[g];
    const std::string path = "/instance_group/" + std::to_string(g);
    const std::string name = group.name.empty() ? model_name + "_" + std::to_string(g) : group.name;
    if (group.count < 1) {
      throw config_error(config_error_code::bad_value, path + "/count",
                         "instance group count must be at least 1");
    }
    const auto gpus = detail::group_gpus(group, path, visible_gpus);
    std::int32_t index = 0;
    if (!gpus.empty()) {
      for (const auto device : gpus) {
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
