#pragma once
/// \file
/// The repository's published models and their index rows (see repository/model_repository.hpp):
/// loaded_model, model_index_entry, model_ready_state.

#include <servekit/repository/any_model.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/model_ref.hpp>
#include <servekit/runtime/shutdown_mode.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit {

/// The index reason of a model unloaded on request (Triton's): readiness does not wait for it.
inline constexpr std::string_view unloaded_reason = "unloaded";

/// A model's state in the repository index (Triton's names).
enum class model_ready_state : std::uint8_t {
  loading,     ///< being built for the first time
  ready,       ///< serving
  unavailable, ///< not serving: failed to load, or unloaded (`reason` says which)
  unloading,   ///< reserved for Triton's state; retired models drain in the background instead
};

/// "LOADING", "READY", "UNAVAILABLE", "UNLOADING", as Triton's repository index spells them.
[[nodiscard]] constexpr std::string_view to_string(model_ready_state s) noexcept {
  switch (s) {
  case model_ready_state::loading:
    return "LOADING";
  case model_ready_state::ready:
    return "READY";
  case model_ready_state::unavailable:
    return "UNAVAILABLE";
  case model_ready_state::unloading:
    return "UNLOADING";
  }
  return "UNKNOWN";
}

/// One row of the repository index: one version of a model (or, when its config cannot be read,
/// the model with version 0).
struct model_index_entry {
  std::string name;
  std::int64_t version = 0; ///< 0 when unknown (e.g. an unreadable config)
  model_ready_state state = model_ready_state::unavailable;
  std::string reason; ///< why it is not ready: "<config.json>: <JSON pointer>: <message>"
  friend bool operator==(const model_index_entry&, const model_index_entry&) = default;
};

class loaded_model;

namespace detail {
template <class T>
class model_reaper; // detail/model_reaper.hpp
using loaded_model_reaper = model_reaper<loaded_model>;
} // namespace detail

/// A model as the repository published it: immutable, shared by `std::shared_ptr<const
/// loaded_model>` with everything using it. Holding one keeps the model serving (a reload or an
/// unload only unpublishes it); when the last holder lets go, the repository's reaper thread
/// drains and destroys it.
class loaded_model {
public:
  /// The configuration as loaded (name, version, backend or platform, inputs, outputs,
  /// scheduling, `directory`), with `instance_group` as placed: KIND_AUTO resolved to KIND_GPU
  /// or KIND_CPU, as Triton's config endpoint shows it.
  [[nodiscard]] const model_options& options() const noexcept { return config_; }
  /// The model: submit, cancel, statistics, name, version, inputs, outputs.
  [[nodiscard]] model_ref model() const noexcept { return servable_.ref(); }
  /// The config.json it was loaded from.
  [[nodiscard]] const std::filesystem::path& config_file() const noexcept { return config_file_; }
  /// Whether it is an ensemble (a runtime_ensemble over composing models).
  [[nodiscard]] bool is_ensemble() const noexcept { return ensemble_; }
  /// For an ensemble, the composing models it runs on (kept alive as long as it is).
  [[nodiscard]] const std::vector<std::shared_ptr<const loaded_model>>&
  composing_models() const noexcept {
    return composing_;
  }
  /// The servable itself (e.g. `servable().get<servekit::model<B, P>>()` in tests).
  [[nodiscard]] const any_model& servable() const noexcept { return servable_; }

  /// Built by model_repository (public for std::make_unique).
  loaded_model(model_options config, std::filesystem::path config_file, any_model servable,
               std::vector<std::shared_ptr<const loaded_model>> composing, bool ensemble)
      : config_{std::move(config)}, config_file_{std::move(config_file)},
        composing_{std::move(composing)}, servable_{std::move(servable)}, ensemble_{ensemble} {
    // Serve the instance groups as placed (KIND_AUTO resolved, GPU lists filled), as Triton's
    // config endpoint does.
    if (const model_options* running = servable_.options(); running != nullptr && !ensemble_) {
      config_.instance_group = running->instance_group;
    }
    complete_from_servable();
  }

  loaded_model(const loaded_model&) = delete;
  loaded_model& operator=(const loaded_model&) = delete;
  ~loaded_model() = default;

private:
  friend class detail::model_reaper<loaded_model>;

  /// What a config may leave to the model's type (inputs, outputs, max_batch_size, the
  /// scheduler, decoupled) filled in from the model as it resolved them, as Triton's
  /// auto-complete does: metadata and the config endpoint then describe the model that serves,
  /// not the file (clients such as perf_analyzer read the tensors from there). A servable
  /// without complete_options (a registered ensemble, say) gives what model_ref knows.
  void complete_from_servable() {
    if (!servable_) {
      return;
    }
    servable_.complete_options(config_);
    const model_ref m = servable_.ref();
    if (config_.input.empty()) {
      const auto inputs = m.inputs();
      config_.input.assign(inputs.begin(), inputs.end());
    }
    if (config_.output.empty()) {
      const auto outputs = m.outputs();
      config_.output.assign(outputs.begin(), outputs.end());
    }
    if (!config_.max_batch_size) {
      config_.max_batch_size = m.max_batch_size();
    }
  }
  friend class model_repository; // shutdown_decoupled_models

  void shutdown(shutdown_mode mode) { servable_.shutdown(mode); }

  model_options config_;
  std::filesystem::path config_file_;
  // Declared before servable_, so destroyed after it: an ensemble drains before the models it
  // submits to may go.
  std::vector<std::shared_ptr<const loaded_model>> composing_;
  any_model servable_;
  bool ensemble_ = false;
  loaded_model* next_retired_ = nullptr; // the reaper's queue link
};

} // namespace servekit
