#pragma once
/// \file
/// Definitions for servekit/runtime/instance_group.hpp. Compiled once into servekit::servekit, or
/// included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/instance_group.hpp>

namespace servekit::detail {

[[nodiscard]] SERVEKIT_DECL std::vector<std::int32_t>
group_gpus(const instance_group_options& group, const std::string& path,
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

} // namespace servekit::detail

namespace servekit {

[[nodiscard]] SERVEKIT_DECL std::vector<instance_group_options>
resolve_instance_groups(const std::string& model_name,
                        const std::vector<instance_group_options>& groups,
                        std::int32_t default_count, std::optional<int> visible_gpus) {
  if (groups.empty()) {
    const instance_group_options implicit{.name = model_name + "_0",
                                          .kind = instance_group_kind::kind_auto,
                                          .count = default_count,
                                          .gpus = {},
                                          .rate_limiter = std::nullopt};
    return resolve_instance_groups(model_name, {implicit}, default_count, visible_gpus);
  }
  std::vector<instance_group_options> out;
  out.reserve(groups.size());
  std::int64_t instances = 0; // every instance is a thread (and a backend) made at load
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& group = groups[g];
    const std::string path = "/instance_group/" + std::to_string(g);
    if (group.count < 1) {
      throw config_error(config_error_code::bad_value, path + "/count",
                         "instance group count must be at least 1");
    }
    auto& resolved = out.emplace_back(group);
    if (resolved.name.empty()) {
      resolved.name = model_name + "_" + std::to_string(g);
    }
    resolved.gpus = detail::group_gpus(group, path, visible_gpus);
    const auto devices = static_cast<std::int64_t>(std::max<std::size_t>(resolved.gpus.size(), 1));
    instances += std::int64_t{group.count} * devices;
    if (instances > max_instances_per_model) {
      throw config_error(config_error_code::bad_value, path + "/count",
                         "a model may have at most " + std::to_string(max_instances_per_model) +
                             " instances in all, this instance group makes it " +
                             std::to_string(instances));
    }
    if (!resolved.gpus.empty()) {
      resolved.kind = instance_group_kind::kind_gpu;
    } else if (resolved.kind == instance_group_kind::kind_auto) {
      resolved.kind = instance_group_kind::kind_cpu;
    }
  }
  return out;
}

[[nodiscard]] SERVEKIT_DECL std::vector<instance_placement>
expand_instance_groups(const std::vector<instance_group_options>& resolved) {
  std::vector<instance_placement> out;
  for (std::size_t g = 0; g < resolved.size(); ++g) {
    const auto& group = resolved[g];
    std::int32_t index = 0;
    if (group.kind == instance_group_kind::kind_gpu) {
      for (const auto device : group.gpus) {
        for (std::int32_t i = 0; i < group.count; ++i) {
          out.push_back(
              {group.name + "_" + std::to_string(index++), instance_kind::gpu, device, g});
        }
      }
    } else {
      const auto kind =
          group.kind == instance_group_kind::kind_model ? instance_kind::model : instance_kind::cpu;
      for (std::int32_t i = 0; i < group.count; ++i) {
        out.push_back({group.name + "_" + std::to_string(index++), kind, 0, g});
      }
    }
  }
  return out;
}

} // namespace servekit
