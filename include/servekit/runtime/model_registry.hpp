#pragma once
/// \file
/// model_registry: servables by name and version, for what is wired up at run time (configured
/// ensembles, the example server's model repository).

#include <servekit/core/config_error.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servekit {

/// Non-owning: the registered servables must outlive the registry and what was built from it.
/// Filled at load, then read; not synchronised for concurrent `add`.
class model_registry {
public:
  /// Registers `m` under its name and version. Throws config_error if that pair is taken.
  void add(model_ref m) {
    if (find(m.name(), m.version())) {
      throw config_error(config_error_code::bad_value, "/name",
                         "model '" + std::string{m.name()} + "' version " +
                             std::to_string(m.version()) + " is already registered");
    }
    models_.push_back(m);
  }

  /// The model `name` at `version`; -1 (Triton's model_version default) means the latest.
  [[nodiscard]] std::optional<model_ref> find(std::string_view name,
                                              std::int64_t version = -1) const {
    std::optional<model_ref> found;
    for (const auto& m : models_) {
      if (m.name() != name) {
        continue;
      }
      if (m.version() == version) {
        return m;
      }
      if (version == -1 && (!found || m.version() > found->version())) {
        found = m;
      }
    }
    return found;
  }

  [[nodiscard]] const std::vector<model_ref>& models() const noexcept { return models_; }

private:
  std::vector<model_ref> models_;
};

} // namespace servekit
