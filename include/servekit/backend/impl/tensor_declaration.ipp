#pragma once
/// \file
/// Definitions for servekit/backend/tensor_declaration.hpp. Compiled once into servekit::servekit,
/// or included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/detail/linkage.hpp>

namespace servekit {

[[nodiscard]] SERVEKIT_DECL std::vector<tensor_config>
to_configs(std::span<const tensor_declaration> specs) {
  std::vector<tensor_config> out;
  out.reserve(specs.size());
  for (const auto& s : specs) {
    out.push_back(tensor_config::from(s));
  }
  return out;
}

} // namespace servekit
