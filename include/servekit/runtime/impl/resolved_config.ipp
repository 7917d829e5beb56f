#pragma once
/// \file
/// Definitions for servekit/runtime/resolved_config.hpp. Compiled once into servekit::servekit, or
/// included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/resolved_config.hpp>

#include <algorithm>

namespace servekit::detail {

SERVEKIT_DECL void check_declared(const std::vector<tensor_config>& configured,
                                  std::span<const tensor_declaration> declared, const char* field,
                                  std::span<const std::string> state_outputs) {
  if (declared.empty()) {
    return;
  }
  for (std::size_t i = 0; i < configured.size(); ++i) {
    const auto& c = configured[i];
    // An implicit state's output listed as a model output, so that a client may request it
    // (Triton's implicit state): the state store produces it, not the backend's declarations;
    // sequence_batching's validation checks it against the state.
    if (std::find(state_outputs.begin(), state_outputs.end(), c.name) != state_outputs.end()) {
      continue;
    }
    const tensor_declaration* match = nullptr;
    for (const auto& d : declared) {
      if (d.name == c.name) {
        match = &d;
      }
    }
    const std::string path = std::string{"/"} + field + "/" + std::to_string(i);
    if (match == nullptr) {
      throw config_error(config_error_code::bad_value, path + "/name",
                         "the backend declares no " + std::string{field} + " named '" + c.name +
                             "'");
    }
    if (match->type != c.type) {
      throw config_error(config_error_code::bad_value, path + "/data_type",
                         std::string{field} + " '" + c.name + "' is " +
                             std::string{to_config_string(c.type)} +
                             " in the config but the backend declares " +
                             std::string{to_config_string(match->type)});
    }
    if (!match->dims.admits(c.dims) && match->dims != c.dims) {
      throw config_error(config_error_code::bad_value, path + "/dims",
                         std::string{field} + " '" + c.name + "' has dims " + to_string(c.dims) +
                             " in the config but the backend declares " + to_string(match->dims));
    }
  }
}

} // namespace servekit::detail
