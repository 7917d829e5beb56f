#pragma once
/// \file
/// Helpers that append JSON text to a std::string: append_json_string, append_integer,
/// append_float and append_shape. The response encoder writes JSON by hand with them (no DOM),
/// reusing the caller's string.

#include <servekit/core/shape.hpp>
#include <servekit/http/detail/utf8.hpp>

#include <fmt/compile.h>
#include <fmt/format.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>

namespace servekit::http::detail {

/// Appends `text` as a JSON string literal. Invalid UTF-8 is replaced by U+FFFD when `strict` is
/// false; when it is true the function stops and returns false instead (BYTES data must not
/// change silently).
inline bool append_json_string(std::string& out, std::string_view text, bool strict = false) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t size = text.size();
  std::size_t run = 0; // start of the pending run of bytes that need no escaping
  std::size_t i = 0;
  while (i < size) {
    const unsigned char c = p[i];
    if (c >= 0x20U && c < 0x80U && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    if (c >= 0x80U) {
      const std::size_t n = utf8_sequence_length(p + i, size - i);
      if (n != 0) {
        i += n;
        continue;
      }
      if (strict) {
        return false;
      }
      out.append(text.data() + run, i - run);
      out += "\\ufffd";
      ++i;
      run = i;
      continue;
    }
    out.append(text.data() + run, i - run);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      out += "\\u00";
      out += hex[c >> 4U];
      out += hex[c & 0xFU];
      break;
    }
    ++i;
    run = i;
  }
  out.append(text.data() + run, size - run);
  out += '"';
  return true;
}

template <class Int>
inline void append_integer(std::string& out, Int value) {
  const fmt::format_int text{value};
  out.append(text.data(), text.size());
}

/// Appends a floating-point value as the shortest text that reads back to the same value, with
/// ".0" on integral values so that JSON readers see a float (as Triton's rapidjson writes them).
/// NaN and infinities are not JSON numbers: they are written as `NaN`, `Infinity` and
/// `-Infinity`, as Triton does (rapidjson's kWriteNanAndInfFlag, triton-inference-server/server
/// PR 3870): Python's json module and Triton's clients read them back.
template <class Float>
inline void append_float(std::string& out, Float value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value < 0 ? "-Infinity" : "Infinity";
    return;
  }
  char text[48];
  char* end = fmt::format_to(text, FMT_COMPILE("{}"), value);
  bool integral = true;
  for (const char* c = text; c != end; ++c) {
    if (*c == '.' || *c == 'e') {
      integral = false;
      break;
    }
  }
  out.append(text, static_cast<std::size_t>(end - text));
  if (integral) {
    out += ".0";
  }
}

inline void append_shape(std::string& out, const shape& s) {
  out += '[';
  for (std::size_t i = 0; i < s.rank(); ++i) {
    if (i != 0) {
      out += ',';
    }
    append_integer(out, s[i]);
  }
  out += ']';
}

} // namespace servekit::http::detail
