#pragma once
/// \file
/// backend_list: the backends a server can serve, by name, and the composition each model config
/// asks for. This is where compile-time composition meets run-time configuration: every backend
/// is compiled into at most five model types, and the config's `backend` and scheduling fields
/// pick one.
///
///     using bundled = servekit::backend_list<servekit::named_backend<"add_sub", add_sub_backend>,
///                                            servekit::named_backend<"identity", identity>>;
///     servekit::any_model m = bundled::make(servekit::load_model_config(text));

#include <servekit/backend/backend.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/fixed_string.hpp>
#include <servekit/repository/any_model.hpp>
#include <servekit/runtime/auto_complete.hpp>
#include <servekit/runtime/generative_backend.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_environment.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/resolved_config.hpp>
#include <servekit/schedule/adaptive_batcher.hpp>
#include <servekit/schedule/default_scheduler.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>
#include <servekit/schedule/iteration_batcher.hpp>
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

/// The model types a backend is served as, one per scheduler a config can ask for. Instance
/// counts are run-time options (`instance_group`), so they need no type of their own.
template <class Backend, class Store = host_state_store>
struct compositions {
  using default_model = model<Backend, default_scheduler>;
  using batching_model = model<Backend, dynamic_batcher<>>;
  /// `dynamic_batching { adaptive { target_latency_microseconds: ... } }`.
  using adaptive_batching_model = model<Backend, dynamic_batcher<adaptive<latency_target>>>;
  using direct_sequence_model = model<Backend, sequence_batcher<direct, Store>>;
  using oldest_sequence_model = model<Backend, sequence_batcher<oldest, Store>>;
};

/// make_composition for a batch backend (one with `execute(batch&)`).
template <class Backend, class Store>
[[nodiscard]] any_model make_request_composition(const model_options& given,
                                                 const test_hooks& hooks,
                                                 const model_environment& environment) {
  using types = compositions<Backend, Store>;
  // A backend that reads its model file may add the scheduler too (runtime/auto_complete.hpp).
  const model_options config = auto_completed<Backend>(given);
  if (config.sequence_batching) {
    if (config.sequence_batching->strategy == sequence_strategy::oldest) {
      return any_model::make<typename types::oldest_sequence_model>(config, hooks, environment);
    }
    return any_model::make<typename types::direct_sequence_model>(config, hooks, environment);
  }
  if (config.dynamic_batching) {
    if constexpr (backend_traits<Backend>::batching) {
      if (config.dynamic_batching->adaptive.target_latency_microseconds != 0) {
        return any_model::make<typename types::adaptive_batching_model>(config, hooks, environment);
      }
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

/// Builds the composition `config` asks for: for a generative backend, the iteration batcher;
/// otherwise sequence_batching (by strategy), then dynamic_batching (adaptive, with
/// latency_target, when it sets an objective), else the default scheduler. A composition the
/// backend cannot take is a config_error at the field that asks for it, not a compile error.
///
/// This is where a backend's five model types are compiled, and they are most of what a
/// translation unit that names the backend in a backend_list costs to build. To compile them
/// once for a whole program, declare `SERVEKIT_EXTERN_COMPOSITIONS(Backend, Store);` after the
/// backend's definition (every TU that sees it then only calls this function) and put
/// `SERVEKIT_INSTANTIATE_COMPOSITIONS(Backend, Store);` in one .cpp file
/// (examples/server/backends/*.cpp do this for the bundled backends).
template <class Backend, class Store = host_state_store>
[[nodiscard]] any_model make_composition(const model_options& given, const test_hooks& hooks,
                                         const model_environment& environment) {
  if constexpr (generative_backend<Backend>) {
    // A generative backend is served per step, whatever the config asks for: its model checks
    // that the config's scheduler is `sequence_batching { iterative_sequence: true }` or none.
    return any_model::make<model<Backend, iteration_batcher<>>>(given, hooks, environment);
  } else {
    return make_request_composition<Backend, Store>(given, hooks, environment);
  }
}

/// The backend name a config asks for: its `backend`, or where it names none, the backend its
/// Triton `platform` implies. Triton's names for the file formats servekit serves under names
/// of its own are translated: platform `onnxruntime_onnx` and backend `onnxruntime` ask for
/// `onnx`; platform `pytorch_libtorch` asks for `pytorch`.
[[nodiscard]] inline std::string_view requested_backend(const model_options& config) noexcept {
  if (config.backend == "onnxruntime") {
    return "onnx";
  }
  if (!config.backend.empty()) {
    return config.backend;
  }
  if (config.platform == "onnxruntime_onnx") {
    return "onnx";
  }
  if (config.platform == "pytorch_libtorch") {
    return "pytorch";
  }
  return {};
}

/// Backends by name (`named_backend<"name", Backend[, Store]>...`), and the factory a model
/// repository builds its models with.
template <class... Named>
struct backend_list {
  static_assert(sizeof...(Named) > 0, "servekit: backend_list needs at least one named_backend");

  /// The names, in the order given.
  static constexpr std::array<std::string_view, sizeof...(Named)> names{Named::name...};

  /// This list with `More` after its own (for backends a build may leave out).
  template <class... More>
  using with = backend_list<Named..., More...>;

  /// Builds the model `config` describes: the backend `requested_backend(config)` names (its
  /// `backend`, or the one its Triton `platform` implies), composed with
  /// the scheduler its `sequence_batching` (direct or oldest) or `dynamic_batching` asks for,
  /// else the default scheduler, with the instance counts of its `instance_group`. Throws
  /// config_error at "/backend" for an unknown backend (listing the known ones), and whatever the
  /// model's constructor throws (config_error naming the field; a backend constructor's
  /// failure as config_error at "/instance_group").
  [[nodiscard]] static any_model make(const model_options& config, const test_hooks& hooks = {},
                                      const model_environment& environment = {}) {
    any_model out;
    const std::string_view wanted = requested_backend(config);
    const bool found =
        ((wanted == Named::name ? (out = make_composition<typename Named::backend_type,
                                                          typename Named::state_store_type>(
                                       config, hooks, environment),
                                   true)
                                : false) ||
         ...);
    if (!found) {
      throw config_error(config_error_code::bad_value, "/backend",
                         (wanted.empty()
                              ? "model '" + config.name + "' names no backend" +
                                    (config.platform.empty()
                                         ? std::string{}
                                         : " (platform '" + config.platform + "' implies none)")
                              : "unknown backend '" + std::string{wanted} + "'") +
                             "; known backends: " + known_names());
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
