#pragma once
/// \file
/// fixed_string: a string literal usable as a template argument (`servekit::in<"IMAGE", "x">`).

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace servekit {

/// A string literal as a structural type, so that names can be template arguments. Compilers
/// print it as `fixed_string<6>{"IMAGE"}`, which keeps compile errors readable.
template <std::size_t N>
struct fixed_string {
  char value[N]{};

  constexpr fixed_string(const char (&literal)[N]) noexcept { // NOLINT: implicit by design
    std::copy_n(literal, N, value);
  }
  [[nodiscard]] constexpr std::string_view view() const noexcept { return {value, N - 1}; }
  [[nodiscard]] constexpr operator std::string_view() const noexcept { return view(); }
};

} // namespace servekit
