#pragma once
/// \file
/// The instance-group role: how many backend instances a model runs, each on its own thread.

#include <servekit/backend/instance_context.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/model_options.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
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

namespace detail {
/// `static constexpr std::int32_t default_count = N;` (N >= 1): instances to run when the options
/// list no instance_group.
template <class P>
concept instance_group_policy_declares_default_count = requires {
  requires std::same_as<std::remove_cvref_t<decltype(P::default_count)>, std::int32_t>;
  requires(P::default_count >= 1);
};
} // namespace detail

/// Checks an instance-group policy (the one model<...> finds by `instance_group_role`) with a
/// readable message. model<...> calls it first.
template <class P>
consteval bool check_instance_group_policy() {
  static_assert(detail::instance_group_policy_declares_default_count<P>,
                "servekit: an instance_group policy needs "
                "`static constexpr std::int32_t default_count = N;` with N >= 1");
  return true;
}

/// One instance to create, after KIND_AUTO and GPU lists are resolved.
struct instance_placement {
  std::string name;
  instance_kind kind = instance_kind::cpu;
  int device_id = 0;
  /// Index of its group in the resolved instance_group (its rate_limiter, for one).
  std::size_t group = 0;
};

namespace detail {

/// The GPUs of group `g` after resolving Triton's rules; empty: the group runs on the CPU.
/// `visible` is the backend's device count, or nullopt when the backend does not say (then the
/// config is trusted: a GPU group must list its devices, which go unchecked).
[[nodiscard]] SERVEKIT_DECL std::vector<std::int32_t>
group_gpus(const instance_group_options& group, const std::string& path,
           std::optional<int> visible);

} // namespace detail

/// The most instances a model may have (every instance is a thread and a backend, made when the
/// model loads): a larger instance_group count is a config_error, not an attempt to start them.
inline constexpr std::int64_t max_instances_per_model = 1024;

/// Triton's placement rules applied to a config's instance groups, as Triton's model config
/// endpoint shows them once the model is loaded: every group named ("<model>_<group index>"),
/// KIND_AUTO resolved to KIND_GPU with its GPUs (the listed ones, else every visible one) or to
/// KIND_CPU, and KIND_GPU given every visible GPU when it lists none. No groups: one group of
/// `default_count`, placed as KIND_AUTO.
///
/// `visible_gpus` is the backend's `device_count()` (backend_traits), or nullopt when the
/// backend does not declare one: then KIND_AUTO means the CPU unless it lists GPUs, and GPU ids
/// go unchecked. Throws config_error for a count below 1, more than
/// max_instances_per_model instances in all, a GPU group without GPUs, or a GPU
/// that is not visible. Resolving resolved groups changes nothing.
[[nodiscard]] SERVEKIT_DECL std::vector<instance_group_options>
resolve_instance_groups(const std::string& model_name,
                        const std::vector<instance_group_options>& groups,
                        std::int32_t default_count, std::optional<int> visible_gpus = std::nullopt);

/// The instances of groups already resolved (resolve_instance_groups), named as Triton names
/// them ("<group>_<index in group>"): a GPU group runs `count` instances on each of its GPUs, a
/// CPU or KIND_MODEL group `count` in all.
[[nodiscard]] SERVEKIT_DECL std::vector<instance_placement>
expand_instance_groups(const std::vector<instance_group_options>& resolved);

/// The instances of `groups`: resolve_instance_groups (the rules and the errors), then
/// expand_instance_groups.
[[nodiscard]] inline std::vector<instance_placement>
place_instances(const std::string& model_name, const std::vector<instance_group_options>& groups,
                std::int32_t default_count, std::optional<int> visible_gpus = std::nullopt) {
  return expand_instance_groups(
      resolve_instance_groups(model_name, groups, default_count, visible_gpus));
}

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/runtime/impl/instance_group.ipp>
#endif
