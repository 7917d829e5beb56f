#pragma once
/// \file
/// Definitions for servekit/core/shape.hpp. Compiled once into servekit::servekit, or included by
/// its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/shape.hpp>

namespace servekit {

[[nodiscard]] SERVEKIT_DECL std::string to_string(const shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.rank(); ++i) {
    if (i != 0) {
      out += ',';
    }
    out += std::to_string(s[i]);
  }
  out += ']';
  return out;
}

} // namespace servekit
