#pragma once
/// \file
/// utf8_sequence_length: the UTF-8 well-formedness check the JSON reader and writer share.

#include <cstddef>

namespace servekit::http::detail {

/// Length of the well-formed UTF-8 sequence at p (1-4), or 0 if it is not one (overlong forms,
/// surrogates and code points past U+10FFFF are not).
[[nodiscard]] inline std::size_t utf8_sequence_length(const unsigned char* p,
                                                      std::size_t available) noexcept {
  const unsigned char c = p[0];
  if (c < 0x80U) {
    return 1;
  }
  std::size_t n = 0;
  unsigned char lo = 0x80U;
  unsigned char hi = 0xBFU;
  if (c >= 0xC2U && c <= 0xDFU) {
    n = 2;
  } else if (c >= 0xE0U && c <= 0xEFU) {
    n = 3;
    if (c == 0xE0U) {
      lo = 0xA0U;
    } else if (c == 0xEDU) {
      hi = 0x9FU;
    }
  } else if (c >= 0xF0U && c <= 0xF4U) {
    n = 4;
    if (c == 0xF0U) {
      lo = 0x90U;
    } else if (c == 0xF4U) {
      hi = 0x8FU;
    }
  } else {
    return 0;
  }
  if (available < n || p[1] < lo || p[1] > hi) {
    return 0;
  }
  for (std::size_t i = 2; i < n; ++i) {
    if (p[i] < 0x80U || p[i] > 0xBFU) {
      return 0;
    }
  }
  return n;
}

} // namespace servekit::http::detail
