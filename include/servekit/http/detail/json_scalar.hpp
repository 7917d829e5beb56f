#pragma once
/// \file
/// json_scalar: one JSON scalar as the request decoder keeps it, with the checked conversions to
/// C++ numbers (scalar_to_integer, scalar_to_double, double_to_float) and describe() for error
/// messages.

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace servekit::http::detail {

/// One JSON scalar as the SAX parser delivered it. Strings keep no payload here: their bytes go
/// straight into the scratch's BYTES serialization.
struct json_scalar {
  enum class kind : std::uint8_t { null, boolean, integer, unsigned_integer, floating, string };
  kind tag = kind::null;
  union {
    bool b;
    std::int64_t i;
    std::uint64_t u;
    double d;
  };
  json_scalar() noexcept : u{0} {}
};

[[nodiscard]] inline std::string describe(const json_scalar& s) {
  switch (s.tag) {
  case json_scalar::kind::null:
    return "null";
  case json_scalar::kind::boolean:
    return s.b ? "true" : "false";
  case json_scalar::kind::integer:
    return fmt::format("{}", s.i);
  case json_scalar::kind::unsigned_integer:
    return fmt::format("{}", s.u);
  case json_scalar::kind::floating:
    return fmt::format("{}", s.d);
  case json_scalar::kind::string:
    return "a string";
  }
  return "a value";
}

template <class Int>
[[nodiscard]] inline bool scalar_to_integer(const json_scalar& s, Int& out) noexcept {
  if (s.tag == json_scalar::kind::unsigned_integer) {
    if (!std::in_range<Int>(s.u)) {
      return false;
    }
    out = static_cast<Int>(s.u);
    return true;
  }
  if (s.tag == json_scalar::kind::integer) {
    if (!std::in_range<Int>(s.i)) {
      return false;
    }
    out = static_cast<Int>(s.i);
    return true;
  }
  return false;
}

[[nodiscard]] inline bool scalar_to_double(const json_scalar& s, double& out) noexcept {
  switch (s.tag) {
  case json_scalar::kind::floating:
    out = s.d;
    return true;
  case json_scalar::kind::integer:
    out = static_cast<double>(s.i);
    return true;
  case json_scalar::kind::unsigned_integer:
    out = static_cast<double>(s.u);
    return true;
  default:
    return false;
  }
}

/// A double as a float, or nothing when it is outside float's range (converting it would be
/// undefined behaviour; JSON numbers are always finite).
[[nodiscard]] inline bool double_to_float(double d, float& out) noexcept {
  if (std::fabs(d) > static_cast<double>(std::numeric_limits<float>::max())) {
    return false;
  }
  out = static_cast<float>(d);
  return true;
}

} // namespace servekit::http::detail
