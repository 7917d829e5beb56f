#pragma once
/// \file
/// Auto-complete: a backend that reads a model file may fill in what a config leaves out (inputs,
/// outputs, max_batch_size, a scheduler), as Triton's backends do when a model is loaded without
/// `--strict-model-config` (TRITONBACKEND_ModelSetConfig; the Python backend's
/// `auto_complete_config`). The backend declares
///
///     static void auto_complete_config(servekit::model_options& config);
///
/// which is called before anything else reads the config, with `config.directory` (the version
/// folder) set. It fills only what the config leaves unset, and throws config_error naming the
/// file when it cannot read it. Both model<> and backend_list call it, so it must give the same
/// answer when called again on its own output (it then finds nothing to fill).

#include <servekit/runtime/model_options.hpp>

#include <utility>

namespace servekit {

/// Whether `Backend` completes configs from its model files.
template <class Backend>
concept auto_completes_config = requires(model_options& config) {
  Backend::auto_complete_config(config);
};

/// `config` as `Backend` completes it (unchanged for a backend that does not).
template <class Backend>
[[nodiscard]] model_options auto_completed(model_options config) {
  if constexpr (auto_completes_config<Backend>) {
    Backend::auto_complete_config(config);
  }
  return config;
}

} // namespace servekit
