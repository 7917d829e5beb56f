#pragma once
/// \file
/// checked_element_count and checked_bytes: a tensor's element and byte counts from numbers a
/// client sent, or nothing where the product would overflow std::size_t.

#include <servekit/core/shape.hpp>

#include <cstddef>
#include <limits>
#include <optional>

namespace servekit::http::detail {

/// Elements of a shape whose dims are all >= 0, or nothing on overflow (a client may send
/// [1e18, 1e18]; shape::element_count would overflow, which is undefined behaviour).
[[nodiscard]] inline std::optional<std::size_t> checked_element_count(const shape& s) noexcept {
  std::size_t n = 1;
  bool overflow = false;
  for (const auto d : s.dims()) {
    if (d < 0) {
      return std::nullopt;
    }
    if (d == 0) {
      return std::size_t{0}; // any zero dim makes the tensor empty, whatever the others are
    }
    const auto u = static_cast<std::size_t>(d);
    if (n > std::numeric_limits<std::size_t>::max() / u) {
      overflow = true; // keep scanning: a later zero dim still makes it empty
    } else {
      n *= u;
    }
  }
  if (overflow) {
    return std::nullopt;
  }
  return n;
}

/// `count * size`, or nothing on overflow.
[[nodiscard]] inline std::optional<std::size_t> checked_bytes(std::size_t count,
                                                              std::size_t size) noexcept {
  if (size != 0 && count > std::numeric_limits<std::size_t>::max() / size) {
    return std::nullopt;
  }
  return count * size;
}

} // namespace servekit::http::detail
