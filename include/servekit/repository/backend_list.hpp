#pragma once
/// \file
/// backend_list: the backends a server can serve, by name, and the composition each model config
/// asks for. This is where compile-time composition meets run-time configuration: every backend
/// is compiled into at most four model types, and the config's `backend` and scheduling fields
/// pick one.
///
///     using bundled = servekit::backend_list<servekit::named_backend<"add_sub", add_sub_backend>,
///                                            servekit::named_backend<"identity", identity>>;
///     servekit::any_model m = bundled::make(servekit::load_model_config(text));

#include <servekit/backend/backend.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/fixed_string.hpp>
#include <servekit/repository/any_model.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_environment.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/resolved_config.hpp>
#include <servekit/schedule/default_scheduler.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>
#include <servekit/schedule/sequence_batcher.hpp>
#include <servekit/state/host_state_store.hpp>
#include <servekit/state/state_store.hpp>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace servekit {

/// A backend type and the name configs give it in their `backend` field, with the state store
/// its models use when a config asks for sequence batching (e.g. servekit::cuda's
/// device_state_store for a backend whose state lives on the GPU).
template <fixed_string Name, class Backend, state_store Store = host_state_store>
struct named_backend {
  static constexpr std::string_view name = Name.view();
  using backend_type = Backend;
  using state_store_type = Store;
};

/// The backend Triton serves a `platform` with when a config names no `backend` (Triton's
/// backend documentation: "pytorch_libtorch" is served by backend "pytorch", and so on); empty
/// for a platform Triton maps to no backend ("ensemble", or one it does not know).
[[nodiscard]] constexpr std::string_view backend_for_platform(std::string_view platform) noexcept {
  constexpr std::array<std::array<std::string_view, 2>, 5> platforms{{
      {"pytorch_libtorch", "pytorch"},
      {"onnxruntime_onnx", "onnxruntime"},
      {"tensorrt_plan", "tensorrt"},
      {"tensorflow_graphdef", "tensorflow"},
      {"tensorflow_savedmodel", "tensorflow"},
  }};
  for (const auto& [from, to] : platforms) {
    if (from == platform) {
      return to;
    }
  }
  return {};
}

/// The name of the backend a config asks for: its `backend`, else the one Triton serves its
/// `platform` with (backend_for_platform).
[[nodiscard]] constexpr std::string_view backend_name(const model_options& config) noexcept {
  return config.backend.empty() ? backend_for_platform(config.platform)
                                : std::string_view{config.backend};
}

/// The model types a backend is served as, one per scheduler a config can ask for. Instance
/// counts are run-time options (`instance_group`), so they need no type of their own.
template <class Backend, class Store = host_state_store>
struct compositions {
  using default_model = model<Backend, default_scheduler>;
  using batching_model = model<Backend, dynamic_batcher<>>;
  using direct_sequence_model = model<Backend, sequence_batcher<direct, Store>>;
  using oldest_sequence_model = model<Backend, sequence_batcher<oldest, Store>>;
};

/// Builds the composition `config` asks for: sequence_batching (by strategy), then
/// dynamic_batching, else the default scheduler. A composition the backend cannot take is a
/// config_error at the field that asks for it, not a compile error.
///
/// This is where a backend's four model types are compiled, and they are most of what a
/// translation unit that names the backend in a backend_list costs to build. To compile them
/// once for a whole program, declare `SERVEKIT_EXTERN_COMPOSITIONS(Backend, Store);` after the
/// backend's definition (every TU that sees it then only calls this function) and put
/// `SERVEKIT_INSTANTIATE_COMPOSITIONS(Backend, Store);` in one .cpp file
/// (examples/server/backends/*.cpp do this for the bundled backends).
template <class Backend, class Store = host_state_store>
[[nodiscard]] any_model make_composition(const model_options& config, const test_hooks& hooks,
                                         const model_environment& environment) {
  using types = compositions<Backend, Store>;
  if (config.sequence_batching) {
    if (config.sequence_batching->strategy == sequence_strategy::oldest) {
      return any_model::make<typename types::oldest_sequence_model>(config, hooks, environment);
    }
    return any_model::make<typename types::direct_sequence_model>(config, hooks, environment);
  }
  if (config.dynamic_batching) {
    if constexpr (backend_traits<Backend>::batching) {
      return any_model::make<typename types::batching_model>(config, hooks, environment);
    } else {
      throw config_error(config_error_code::bad_value, "/dynamic_batching",
                         "backend '" + config.backend +
                             "' does not support batching (its `batching` is false), so model '" +
                             config.name + "' cannot use dynamic_batching");
    }
  }
  return any_model::make<typename types::default_model>(config, hooks, environment);
}

/// Backends by name (`named_backend<"name", Backend[, Store]>...`), and the factory a model
/// repository builds its models with.
template <class... Named>
struct backend_list {
  static_assert(sizeof...(Named) > 0, "servekit: backend_list needs at least one named_backend");

  /// The names, in the order given.
  static constexpr std::array<std::string_view, sizeof...(Named)> names{Named::name...};

  /// Builds the model `config` describes: the backend named by `config.backend` (or, without
  /// one, the backend Triton serves `config.platform` with: backend_name), composed with the
  /// scheduler its `sequence_batching` (direct or oldest) or `dynamic_batching` asks for, else
  /// the default scheduler, with the instance counts of its `instance_group`. Throws
  /// config_error at "/backend" for an unknown backend (listing the known ones), and whatever the
  /// model's constructor throws (config_error naming the field; a backend constructor's
  /// failure as config_error at "/instance_group").
  [[nodiscard]] static any_model make(const model_options& config, const test_hooks& hooks = {},
                                      const model_environment& environment = {}) {
    const std::string_view name = backend_name(config);
    any_model out;
    const bool found =
        ((name == Named::name ? (out = make_composition<typename Named::backend_type,
                                                        typename Named::state_store_type>(
                                     config, hooks, environment),
                                 true)
                              : false) ||
         ...);
    if (!found) {
      std::string what;
      if (!config.backend.empty()) {
        what = "unknown backend '" + config.backend + "'";
      } else if (!name.empty()) {
        what = "platform '" + config.platform + "' is served by backend '" + std::string{name} +
               "', which this server does not have";
      } else if (!config.platform.empty()) {
        what = "model '" + config.name + "' names no backend, and platform '" + config.platform +
               "' names none either";
      } else {
        what = "model '" + config.name + "' names no backend";
      }
      throw config_error(config_error_code::bad_value, "/backend",
                         what + "; known backends: " + known_names());
    }
    return out;
  }

  /// Whether `name` is one of `names`.
  [[nodiscard]] static constexpr bool contains(std::string_view name) noexcept {
    for (const auto n : names) {
      if (n == name) {
        return true;
      }
    }
    return false;
  }

private:
  [[nodiscard]] static std::string known_names() {
    std::string out;
    for (const auto n : names) {
      if (!out.empty()) {
        out += ", ";
      }
      out += n;
    }
    return out;
  }
};

} // namespace servekit

/// Declares that `make_composition<Backend, Store>` (the backend's models) is compiled in some
/// other translation unit, which uses SERVEKIT_INSTANTIATE_COMPOSITIONS. At global scope.
#define SERVEKIT_EXTERN_COMPOSITIONS(Backend, Store)                                               \
  extern template ::servekit::any_model servekit::make_composition<Backend, Store>(                \
      const ::servekit::model_options&, const ::servekit::test_hooks&,                             \
      const ::servekit::model_environment&)

/// Compiles `make_composition<Backend, Store>` (the backend's models) in this translation unit,
/// for the ones that declared SERVEKIT_EXTERN_COMPOSITIONS. At global scope, in one .cpp.
#define SERVEKIT_INSTANTIATE_COMPOSITIONS(Backend, Store)                                          \
  template ::servekit::any_model servekit::make_composition<Backend, Store>(                       \
      const ::servekit::model_options&, const ::servekit::test_hooks&,                             \
      const ::servekit::model_environment&)
