#pragma once
/// \file
/// json_reader<Handler>: a strict, iterative JSON reader (RFC 8259) that drives a SAX handler,
/// with a nesting cap (max_depth). A general JSON tokenizer; nothing in it is KServe-specific.

#include <servekit/http/detail/utf8.hpp>

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>

namespace servekit::http::detail {

/// Why not nlohmann's sax_parse: on an add_sub request its lexer (a virtual-free but
/// character-at-a-time reader that copies every token, then strtod) took about 10 µs of the 13
/// the decode cost; this reader validates the same grammar in one pass, hands strings over
/// without copying when they have no escapes, and reads numbers with std::from_chars.
///
/// It calls the handler as nlohmann's SAX interface does (null, boolean, number_integer for
/// negative integers, number_unsigned for the others, number_float, string, key, start_object,
/// end_object, start_array, end_array), with std::string_view strings that live until the next
/// call; a handler returning false stops it. Syntax errors go to
/// `handler.parse_error(std::string message)`. Integers outside 64 bits are read as floats, a
/// float past double's range is an error and one below it reads as 0, as with nlohmann. Nesting
/// deeper than max_depth is an error (the reader itself uses no recursion).
template <class Handler>
class json_reader {
public:
  static constexpr std::size_t max_depth = 512;

  /// `depth_limit`: the nesting refused (request_limits::max_json_depth), at most max_depth.
  json_reader(std::string_view text, Handler& handler, std::string& unescaped,
              std::size_t depth_limit = max_depth) noexcept
      : p_{text.data()}, begin_{text.data()}, end_{text.data() + text.size()}, handler_{handler},
        unescaped_{unescaped}, depth_limit_{depth_limit < max_depth ? depth_limit : max_depth} {}

  /// Reads the whole text: true when it is one JSON value (plus whitespace) and the handler
  /// accepted every event.
  bool parse() {
    if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) {
      p_ += 3; // a UTF-8 byte order mark, as nlohmann skips it
    }
    skip_whitespace();
    for (;;) {
      // A value is expected here.
      if (p_ == end_) {
        return error("unexpected end of input; expected a value");
      }
      switch (*p_) {
      case '{':
        ++p_;
        if (!open(true) || !handler_.start_object(std::size_t(-1))) {
          return false;
        }
        skip_whitespace();
        if (p_ != end_ && *p_ == '}') {
          ++p_;
          if (!close() || !handler_.end_object()) {
            return false;
          }
          break;
        }
        if (!read_key()) {
          return false;
        }
        continue;
      case '[':
        ++p_;
        if (!open(false) || !handler_.start_array(std::size_t(-1))) {
          return false;
        }
        skip_whitespace();
        if (p_ != end_ && *p_ == ']') {
          ++p_;
          if (!close() || !handler_.end_array()) {
            return false;
          }
          break;
        }
        continue;
      case '"': {
        std::string_view s;
        if (!read_string(s) || !handler_.string(s)) {
          return false;
        }
        break;
      }
      case 't':
        if (!literal("true") || !handler_.boolean(true)) {
          return false;
        }
        break;
      case 'f':
        if (!literal("false") || !handler_.boolean(false)) {
          return false;
        }
        break;
      case 'n':
        if (!literal("null") || !handler_.null()) {
          return false;
        }
        break;
      default:
        if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) {
          if (!read_number()) {
            return false;
          }
          break;
        }
        return error("unexpected character; expected a value");
      }

      // After a value: close containers or move to the next element.
      for (;;) {
        skip_whitespace();
        if (depth_ == 0) {
          if (p_ != end_) {
            return error("unexpected character after the JSON value");
          }
          return true;
        }
        if (p_ == end_) {
          return error("unexpected end of input; expected ',' or a closing bracket");
        }
        const bool object = in_object();
        const char c = *p_++;
        if (c == ',') {
          skip_whitespace();
          if (object && !read_key()) {
            return false;
          }
          break; // the next value
        }
        if (c == (object ? '}' : ']')) {
          if (!close() || !(object ? handler_.end_object() : handler_.end_array())) {
            return false;
          }
          continue;
        }
        --p_;
        return error(object ? "expected ',' or '}'" : "expected ',' or ']'");
      }
    }
  }

private:
  bool error(std::string_view what) {
    (void)handler_.parse_error(
        fmt::format("{} at byte {}", what, static_cast<std::size_t>(p_ - begin_)));
    return false;
  }

  void skip_whitespace() noexcept {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) {
      ++p_;
    }
  }

  [[nodiscard]] bool in_object() const noexcept {
    const std::size_t i = depth_ - 1;
    return (kinds_[i / 64] >> (i % 64) & 1U) != 0;
  }
  bool open(bool object) {
    if (depth_ >= depth_limit_) {
      return error(fmt::format("the JSON is nested too deeply (more than {} levels, the limit "
                               "max_json_depth)",
                               depth_limit_));
    }
    const std::uint64_t mask = std::uint64_t{1} << (depth_ % 64);
    if (object) {
      kinds_[depth_ / 64] |= mask;
    } else {
      kinds_[depth_ / 64] &= ~mask;
    }
    ++depth_;
    return true;
  }
  bool close() noexcept {
    --depth_;
    return true;
  }

  /// At a key (whitespace skipped): reads "key" and the ':' after it.
  bool read_key() {
    if (p_ == end_ || *p_ != '"') {
      return error("expected a string as the object key");
    }
    std::string_view k;
    if (!read_string(k) || !handler_.key(k)) {
      return false;
    }
    skip_whitespace();
    if (p_ == end_ || *p_ != ':') {
      return error("expected ':' after the object key");
    }
    ++p_;
    skip_whitespace();
    return true;
  }

  bool literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      return error("invalid literal");
    }
    p_ += word.size();
    return true;
  }

  /// At the opening quote. Strings without escapes are views of the input.
  bool read_string(std::string_view& out) {
    ++p_;
    const char* start = p_;
    // Fast path: plain ASCII up to the closing quote.
    while (p_ != end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out = std::string_view{start, static_cast<std::size_t>(p_ - start)};
        ++p_;
        return true;
      }
      if (c < 0x20U || c == '\\' || c >= 0x80U) {
        break;
      }
      ++p_;
    }
    bool copied = false; // unescaped_ is needed only once an escape appears
    const char* run = p_;
    while (p_ != end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        if (!copied) {
          out = std::string_view{start, static_cast<std::size_t>(p_ - start)};
        } else {
          unescaped_.append(run, static_cast<std::size_t>(p_ - run));
          out = unescaped_;
        }
        ++p_;
        return true;
      }
      if (c < 0x20U) {
        return error("control character in a string; it must be escaped");
      }
      if (c >= 0x80U) {
        const std::size_t n = utf8_sequence_length(reinterpret_cast<const unsigned char*>(p_),
                                                   static_cast<std::size_t>(end_ - p_));
        if (n == 0) {
          return error("invalid UTF-8 in a string");
        }
        p_ += n;
        continue;
      }
      if (c != '\\') {
        ++p_;
        continue;
      }
      if (!copied) {
        unescaped_.assign(start, static_cast<std::size_t>(p_ - start));
        copied = true;
      } else {
        unescaped_.append(run, static_cast<std::size_t>(p_ - run));
      }
      if (!read_escape()) {
        return false;
      }
      run = p_;
    }
    return error("unexpected end of input in a string");
  }

  /// At a backslash: appends the escaped character to unescaped_.
  bool read_escape() {
    ++p_;
    if (p_ == end_) {
      return error("unexpected end of input in a string");
    }
    const char c = *p_++;
    switch (c) {
    case '"':
    case '\\':
    case '/':
      unescaped_ += c;
      return true;
    case 'b':
      unescaped_ += '\b';
      return true;
    case 'f':
      unescaped_ += '\f';
      return true;
    case 'n':
      unescaped_ += '\n';
      return true;
    case 'r':
      unescaped_ += '\r';
      return true;
    case 't':
      unescaped_ += '\t';
      return true;
    case 'u':
      break;
    default:
      --p_;
      return error("invalid escape in a string");
    }
    std::uint32_t code = 0;
    if (!hex4(code)) {
      return false;
    }
    if (code >= 0xDC00U && code <= 0xDFFFU) {
      return error("a low surrogate \\u escape without a high one");
    }
    if (code >= 0xD800U && code <= 0xDBFFU) {
      std::uint32_t low = 0;
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
        return error("a high surrogate \\u escape without a low one");
      }
      p_ += 2;
      if (!hex4(low)) {
        return false;
      }
      if (low < 0xDC00U || low > 0xDFFFU) {
        return error("a high surrogate \\u escape without a low one");
      }
      code = 0x10000U + ((code - 0xD800U) << 10U) + (low - 0xDC00U);
    }
    // UTF-8 encode.
    if (code < 0x80U) {
      unescaped_ += static_cast<char>(code);
    } else if (code < 0x800U) {
      unescaped_ += static_cast<char>(0xC0U | (code >> 6U));
      unescaped_ += static_cast<char>(0x80U | (code & 0x3FU));
    } else if (code < 0x10000U) {
      unescaped_ += static_cast<char>(0xE0U | (code >> 12U));
      unescaped_ += static_cast<char>(0x80U | ((code >> 6U) & 0x3FU));
      unescaped_ += static_cast<char>(0x80U | (code & 0x3FU));
    } else {
      unescaped_ += static_cast<char>(0xF0U | (code >> 18U));
      unescaped_ += static_cast<char>(0x80U | ((code >> 12U) & 0x3FU));
      unescaped_ += static_cast<char>(0x80U | ((code >> 6U) & 0x3FU));
      unescaped_ += static_cast<char>(0x80U | (code & 0x3FU));
    }
    return true;
  }

  bool hex4(std::uint32_t& out) {
    if (end_ - p_ < 4) {
      return error("unexpected end of input in a \\u escape");
    }
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = *p_++;
      std::uint32_t d = 0;
      if (c >= '0' && c <= '9') {
        d = static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        --p_;
        return error("invalid \\u escape");
      }
      v = (v << 4U) | d;
    }
    out = v;
    return true;
  }

  /// At '-' or a digit: checks the JSON number grammar, then converts.
  bool read_number() {
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) {
      ++p_;
    }
    const auto digit = [this] { return p_ != end_ && *p_ >= '0' && *p_ <= '9'; };
    if (!digit()) {
      return error("invalid number; expected a digit");
    }
    // Leading digits: how many count toward the magnitude (for the out-of-range decision).
    std::int64_t magnitude = 0;
    bool seen_nonzero = false;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (digit()) {
        ++magnitude;
        ++p_;
      }
      seen_nonzero = true;
    }
    if (digit()) {
      return error("invalid number; leading zeros are not allowed");
    }
    bool integral = true;
    if (p_ != end_ && *p_ == '.') {
      integral = false;
      ++p_;
      if (!digit()) {
        return error("invalid number; expected a digit after '.'");
      }
      while (digit()) {
        if (!seen_nonzero) {
          if (*p_ == '0') {
            --magnitude;
          } else {
            seen_nonzero = true;
          }
        }
        ++p_;
      }
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      integral = false;
      ++p_;
      bool exp_negative = false;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) {
        exp_negative = *p_ == '-';
        ++p_;
      }
      if (!digit()) {
        return error("invalid number; expected a digit in the exponent");
      }
      std::int64_t exponent = 0;
      while (digit()) {
        if (exponent < 1'000'000'000) {
          exponent = exponent * 10 + (*p_ - '0');
        }
        ++p_;
      }
      magnitude += exp_negative ? -exponent : exponent;
    }
    const char* last = p_;
    if (integral) {
      if (negative) {
        std::int64_t v = 0;
        const auto r = std::from_chars(start, last, v);
        if (r.ec == std::errc{} && r.ptr == last) {
          return handler_.number_integer(v);
        }
      } else {
        std::uint64_t v = 0;
        const auto r = std::from_chars(start, last, v);
        if (r.ec == std::errc{} && r.ptr == last) {
          return handler_.number_unsigned(v);
        }
      }
      // Too large for 64 bits: read it as a float, as nlohmann does.
    }
    double v = 0;
    const auto r = std::from_chars(start, last, v);
    if (r.ec == std::errc::result_out_of_range) {
      if (seen_nonzero && magnitude > 0) {
        p_ = start;
        return error("number overflow: the value is outside double's range");
      }
      v = negative ? -0.0 : 0.0; // underflow reads as zero
    } else if (r.ec != std::errc{} || r.ptr != last) {
      p_ = start;
      return error("invalid number");
    }
    return handler_.number_float(v);
  }

  const char* p_;
  const char* begin_;
  const char* end_;
  Handler& handler_;
  std::string& unescaped_;
  std::size_t depth_limit_;
  std::size_t depth_ = 0;
  std::array<std::uint64_t, max_depth / 64> kinds_{}; // bit set: the open container is an object
};

} // namespace servekit::http::detail
