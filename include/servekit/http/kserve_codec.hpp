#pragma once
/// \file
/// The KServe v2 (Open Inference Protocol) JSON codec, model-independent and free of I/O:
/// decodes an infer request body into a servekit::request, encodes a servekit::response, and
/// builds the metadata documents. Triton's HTTP front end is the reference for every choice;
/// where servekit differs, the comment at the function says so.
///
///     servekit::http::decoded_infer_request in;
///     if (auto s = servekit::http::decode_infer_request(body, header_length, in); !s.ok()) {
///       reply(servekit::http::http_status_for(s.code()),
///       servekit::http::encode_error(s.message()));
///     }
///     ... model.submit(std::move(in.request), sink) ... then, in the sink:
///     servekit::http::encode_infer_response(response, "add_sub", 1, in, body, header_length);
///
/// The decoder is the server's hot path, so it reads the JSON in one pass with a small strict
/// reader driving a SAX handler (no DOM); the handler writes values into a per-thread scratch and
/// converts them once per input. The encoder writes JSON by hand with fmt into the caller's
/// string, reusing its capacity. nlohmann::json builds only the (cold) metadata documents.

#include <servekit/core/buffer.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/runtime/model_options.hpp>

#include <fmt/compile.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace servekit::http {

/// One entry of the request's "outputs": a name and whether to return it as binary data.
struct requested_output {
  std::string name;
  bool binary_data = false; ///< "parameters": {"binary_data": true}
};

/// What decode_infer_request produces. `request` is ready to submit; `outputs` and
/// `binary_data_output` are what encode_infer_response needs later (it never reads `request`,
/// which the caller has usually moved into the model by then).
struct decoded_infer_request {
  servekit::request request;
  std::vector<requested_output> outputs;
  bool binary_data_output = false; ///< top-level "parameters": {"binary_data_output": true}
};

/// The server name and version reported by server_metadata_json().
inline constexpr std::string_view server_name = "servekit";
inline constexpr std::string_view server_version = "0.1.0";

/// The KServe/Triton extensions the servekit server implements (server metadata "extensions").
inline constexpr std::array<std::string_view, 6> server_extensions = {
    "model_repository", "schedule_policy", "model_configuration",
    "sequence",         "statistics",      "binary_tensor_data",
};

namespace detail {

// ----------------------------------------------------------------------------------------------
// Numbers
// ----------------------------------------------------------------------------------------------

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

/// IEEE binary32 -> binary16, round to nearest even; overflow gives infinity.
[[nodiscard]] inline std::uint16_t float_to_half(float value) noexcept {
  const auto x = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint32_t>((x >> 16U) & 0x8000U);
  std::uint32_t mant = x & 0x7FFFFFU;
  const auto exp = static_cast<int>((x >> 23U) & 0xFFU);
  if (exp == 0xFF) { // infinity or NaN (keep NaN quiet)
    return static_cast<std::uint16_t>(sign | 0x7C00U | (mant != 0 ? 0x200U : 0U));
  }
  const int e = exp - 127 + 15;
  if (e >= 31) {
    return static_cast<std::uint16_t>(sign | 0x7C00U);
  }
  if (e <= 0) { // a half subnormal, or zero
    if (e < -10) {
      return static_cast<std::uint16_t>(sign);
    }
    mant |= 0x800000U;
    const auto shift = static_cast<std::uint32_t>(14 - e);
    std::uint32_t half_mant = mant >> shift;
    const std::uint32_t rest = mant & ((1U << shift) - 1U);
    const std::uint32_t halfway = 1U << (shift - 1U);
    if (rest > halfway || (rest == halfway && (half_mant & 1U) != 0)) {
      ++half_mant; // may carry into the smallest normal: still the right encoding
    }
    return static_cast<std::uint16_t>(sign | half_mant);
  }
  std::uint32_t half = sign | (static_cast<std::uint32_t>(e) << 10U) | (mant >> 13U);
  const std::uint32_t rest = mant & 0x1FFFU;
  if (rest > 0x1000U || (rest == 0x1000U && (half & 1U) != 0)) {
    ++half; // may carry into the exponent, up to infinity: the right rounding
  }
  return static_cast<std::uint16_t>(half);
}

/// IEEE binary16 -> binary32 (exact).
[[nodiscard]] inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000U) << 16U;
  const std::uint32_t exp = (static_cast<std::uint32_t>(h) >> 10U) & 0x1FU;
  const std::uint32_t mant = static_cast<std::uint32_t>(h) & 0x3FFU;
  if (exp == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exp == 31) {
    return std::bit_cast<float>(sign | 0x7F800000U | (mant << 13U));
  }
  return std::bit_cast<float>(sign | ((exp + 112U) << 23U) | (mant << 13U));
}

/// binary32 -> bfloat16, round to nearest even.
[[nodiscard]] inline std::uint16_t float_to_bf16(float value) noexcept {
  const auto x = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) {
    return static_cast<std::uint16_t>((x >> 16U) | 0x40U);
  }
  const std::uint32_t rounding = 0x7FFFU + ((x >> 16U) & 1U);
  return static_cast<std::uint16_t>((x + rounding) >> 16U);
}

[[nodiscard]] inline float bf16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16U);
}

// ----------------------------------------------------------------------------------------------
// JSON text output
// ----------------------------------------------------------------------------------------------

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

// ----------------------------------------------------------------------------------------------
// Request decoding
// ----------------------------------------------------------------------------------------------

/// One JSON scalar as the SAX parser delivered it. Strings keep no payload here: their bytes go
/// straight into the scratch's BYTES serialization.
struct json_scalar {
  enum class kind : std::uint8_t { null, boolean, integer, unsigned_integer, floating, string };
  kind k = kind::null;
  union {
    bool b;
    std::int64_t i;
    std::uint64_t u;
    double d;
  };
  json_scalar() noexcept : u{0} {}
};

/// Per-thread buffers the decoder reuses from request to request, so that a steady stream of
/// requests allocates only the tensors it produces.
struct decode_scratch {
  std::vector<json_scalar> values; ///< the current input's "data" elements, in order
  std::string bytes;               ///< the current input's string elements, BYTES-serialised
  std::string unescaped;           ///< the JSON reader's buffer for strings with escapes

  void clear() noexcept {
    values.clear();
    bytes.clear();
    unescaped.clear();
  }
  /// Gives back memory after an unusually large request.
  void trim() {
    static constexpr std::size_t keep_values = std::size_t{1} << 16U;
    static constexpr std::size_t keep_bytes = std::size_t{1} << 20U;
    if (values.capacity() > keep_values) {
      std::vector<json_scalar>{}.swap(values);
    }
    if (bytes.capacity() > keep_bytes) {
      std::string{}.swap(bytes);
    }
    if (unescaped.capacity() > keep_bytes) {
      std::string{}.swap(unescaped);
    }
  }
};

[[nodiscard]] inline decode_scratch& thread_decode_scratch() {
  thread_local decode_scratch scratch;
  return scratch;
}

[[nodiscard]] inline std::string describe(const json_scalar& s) {
  switch (s.k) {
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
  if (s.k == json_scalar::kind::unsigned_integer) {
    if (!std::in_range<Int>(s.u)) {
      return false;
    }
    out = static_cast<Int>(s.u);
    return true;
  }
  if (s.k == json_scalar::kind::integer) {
    if (!std::in_range<Int>(s.i)) {
      return false;
    }
    out = static_cast<Int>(s.i);
    return true;
  }
  return false;
}

[[nodiscard]] inline bool scalar_to_double(const json_scalar& s, double& out) noexcept {
  switch (s.k) {
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

// ----------------------------------------------------------------------------------------------
// A strict JSON reader (RFC 8259) that drives a SAX handler
// ----------------------------------------------------------------------------------------------

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

  json_reader(std::string_view text, Handler& handler, std::string& unescaped) noexcept
      : p_{text.data()}, begin_{text.data()}, end_{text.data() + text.size()}, handler_{handler},
        unescaped_{unescaped} {}

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
    if (depth_ == max_depth) {
      return error("the JSON is nested too deeply");
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
  std::size_t depth_ = 0;
  std::array<std::uint64_t, max_depth / 64> kinds_{}; // bit set: the open container is an object
};

/// The SAX handler behind decode_infer_request. It follows where it is in the request with a
/// small stack of contexts; a key sets `pending_`, which says what the next value is.
class infer_request_parser {
public:
  infer_request_parser(decode_scratch& scratch, decoded_infer_request& out,
                       std::span<const std::byte> binary) noexcept
      : scratch_{scratch}, out_{out}, binary_{binary} {}

  [[nodiscard]] status take_error() { return std::move(error_); }
  [[nodiscard]] bool failed() const noexcept { return !error_.ok(); }

  /// Checks that run once the whole JSON has been read.
  [[nodiscard]] bool finish() {
    if (binary_used_ != binary_.size()) {
      return fail(fmt::format("the request carries {} bytes of binary data after its JSON "
                              "header, but its inputs' 'binary_data_size' add up to {}",
                              binary_.size(), binary_used_));
    }
    return true;
  }

  // --- SAX interface (json_reader) -------------------------------------------------------------
  bool null() { return value(json_scalar{}, {}); }
  bool boolean(bool v) {
    json_scalar s;
    s.k = json_scalar::kind::boolean;
    s.b = v;
    return value(s, {});
  }
  bool number_integer(std::int64_t v) {
    json_scalar s;
    s.k = json_scalar::kind::integer;
    s.i = v;
    return value(s, {});
  }
  bool number_unsigned(std::uint64_t v) {
    json_scalar s;
    s.k = json_scalar::kind::unsigned_integer;
    s.u = v;
    return value(s, {});
  }
  bool number_float(double v) {
    json_scalar s;
    s.k = json_scalar::kind::floating;
    s.d = v;
    return value(s, {});
  }
  bool string(std::string_view v) {
    json_scalar s;
    s.k = json_scalar::kind::string;
    return value(s, v);
  }
  bool start_object(std::size_t /*unknown size*/) { return start(true); }
  bool start_array(std::size_t /*unknown size*/) { return start(false); }
  bool end_object() { return end(); }
  bool end_array() { return end(); }
  bool key(std::string_view k);
  bool parse_error(std::string message) {
    return fail(fmt::format("failed to parse the request JSON: {}", message));
  }

private:
  enum class ctx : std::uint8_t {
    before_root,
    root,
    params,
    inputs,
    input,
    input_params,
    shape,
    data,
    outputs,
    output,
    output_params,
    skip,
    done,
  };

  enum class field : std::uint8_t {
    none,
    ignore, // a value servekit does not use: skipped whatever its type
    id,
    parameters,
    inputs,
    outputs,
    sequence_id,
    sequence_start,
    sequence_end,
    priority,
    timeout,
    binary_data_output,
    other_parameter,
    name,
    shape,
    datatype,
    data,
    binary_data_size,
    binary_data,
  };

  // Bits of the keys seen in the current object, to refuse duplicates (a DOM would keep the last
  // one silently; two "data" arrays would otherwise be concatenated here).
  static constexpr std::uint32_t bit(field f) noexcept {
    return std::uint32_t{1} << static_cast<unsigned>(f);
  }

  /// The input being read. Its fields may arrive in any order, so "data" is kept as scalars in
  /// the scratch and converted when the object ends.
  struct pending_input {
    std::string name;
    bool has_name = false;
    std::optional<data_type> type;
    servekit::shape dims;
    bool has_shape = false;
    bool has_data = false;
    bool data_is_array = false;
    std::optional<std::uint64_t> binary_size;
    std::uint32_t seen = 0;
    std::uint32_t seen_params = 0;
    // The nesting of "data": depth of the open array (1 = the outermost), the deepest level seen,
    // the length of the first array closed at each level, the count in the open array at each
    // level, and the depth the scalars sit at.
    std::size_t depth = 0;
    std::size_t max_depth = 0;
    std::array<std::int64_t, shape::max_rank> level_len{};
    std::array<std::int64_t, shape::max_rank> level_count{};
    std::size_t leaf_depth = 0;
    bool ragged = false;
  };

  struct pending_output {
    std::string name;
    bool has_name = false;
    bool binary = false;
    std::uint32_t seen = 0;
    std::uint32_t seen_params = 0;
  };

  [[nodiscard]] ctx top() const noexcept { return stack_[depth_ - 1]; }
  bool push(ctx c) {
    if (depth_ == stack_.size()) {
      return fail("the request JSON is nested too deeply"); // unreachable: contexts are bounded
    }
    stack_[depth_++] = c;
    return true;
  }
  void pop() noexcept { --depth_; }

  bool fail(std::string message) {
    if (error_.ok()) {
      error_ = invalid_argument(std::move(message));
    }
    return false;
  }

  [[nodiscard]] std::string input_label() const {
    if (input_.has_name) {
      return fmt::format("input '{}'", input_.name);
    }
    return fmt::format("inputs[{}]", input_index_);
  }
  [[nodiscard]] std::string output_label() const {
    if (output_.has_name) {
      return fmt::format("output '{}'", output_.name);
    }
    return fmt::format("outputs[{}]", output_index_);
  }

  bool mark_seen(std::uint32_t& seen, field f, std::string_view key, std::string_view where) {
    if ((seen & bit(f)) != 0) {
      return fail(fmt::format("duplicate key '{}' in {}", key, where));
    }
    seen |= bit(f);
    pending_ = f;
    return true;
  }

  bool value(const json_scalar& s, std::string_view text);
  bool start(bool object);
  bool end();

  bool root_value(const json_scalar& s, std::string_view text);
  bool parameter_value(const json_scalar& s, std::string_view text);
  bool input_value(const json_scalar& s, std::string_view text);
  bool data_value(const json_scalar& s, std::string_view text);
  bool shape_value(const json_scalar& s);

  void begin_data_array() noexcept {
    input_.has_data = true;
    input_.data_is_array = true;
    input_.depth = 1;
    input_.max_depth = 1;
    input_.level_count[0] = 0;
    input_.level_len.fill(-1);
  }

  bool finish_input();
  bool finish_output();
  bool convert_data(tensor& t, std::size_t count);
  bool element_error(std::size_t index, const json_scalar& s, std::string_view expected) {
    return fail(fmt::format("{}: 'data' element {} must be {}, got {}", input_label(), index,
                            expected, describe(s)));
  }

  decode_scratch& scratch_;
  decoded_infer_request& out_;
  std::span<const std::byte> binary_;
  std::size_t binary_used_ = 0;
  status error_;

  std::array<ctx, 8> stack_{ctx::before_root};
  std::size_t depth_ = 1;
  std::size_t skip_depth_ = 0;
  field pending_ = field::none;
  std::string parameter_name_; // the top-level parameter being read, for messages
  std::uint32_t root_seen_ = 0;
  std::uint32_t params_seen_ = 0;
  bool inputs_seen_ = false;

  pending_input input_;
  std::size_t input_index_ = 0;
  pending_output output_;
  std::size_t output_index_ = 0;
};

inline bool infer_request_parser::key(std::string_view k) {
  switch (top()) {
  case ctx::root:
    if (k == "id") {
      return mark_seen(root_seen_, field::id, k, "the request");
    }
    if (k == "parameters") {
      return mark_seen(root_seen_, field::parameters, k, "the request");
    }
    if (k == "inputs") {
      return mark_seen(root_seen_, field::inputs, k, "the request");
    }
    if (k == "outputs") {
      return mark_seen(root_seen_, field::outputs, k, "the request");
    }
    // Other top-level keys ("model_name", "model_version" some clients send) are ignored, as
    // Triton ignores them.
    pending_ = field::ignore;
    return true;

  case ctx::params: {
    static constexpr std::pair<std::string_view, field> known[] = {
        {"sequence_id", field::sequence_id},   {"sequence_start", field::sequence_start},
        {"sequence_end", field::sequence_end}, {"priority", field::priority},
        {"timeout", field::timeout},           {"binary_data_output", field::binary_data_output},
    };
    for (const auto& [name, f] : known) {
      if (k == name) {
        parameter_name_.assign(k);
        return mark_seen(params_seen_, f, k, "'parameters'");
      }
    }
    if (k.starts_with("triton_")) {
      return fail("parameter keys starting with 'triton_' are reserved for Triton usage and "
                  "should not be specified.");
    }
    // Any other parameter is allowed and, here, ignored: Triton hands such parameters to the
    // backend (TRITONSERVER_InferenceRequestSet*Parameter), and servekit's request has no
    // free-form parameters yet. Triton's type rule still applies (int, bool or string).
    parameter_name_.assign(k);
    pending_ = field::other_parameter;
    return true;
  }

  case ctx::input:
    if (k == "name") {
      return mark_seen(input_.seen, field::name, k, input_label());
    }
    if (k == "shape") {
      return mark_seen(input_.seen, field::shape, k, input_label());
    }
    if (k == "datatype") {
      return mark_seen(input_.seen, field::datatype, k, input_label());
    }
    if (k == "data") {
      return mark_seen(input_.seen, field::data, k, input_label());
    }
    if (k == "parameters") {
      return mark_seen(input_.seen, field::parameters, k, input_label());
    }
    pending_ = field::ignore;
    return true;

  case ctx::input_params:
    if (k == "binary_data_size") {
      return mark_seen(input_.seen_params, field::binary_data_size, k,
                       input_label() + " 'parameters'");
    }
    if (k.starts_with("shared_memory_")) {
      return fail(
          fmt::format("{}: '{}': shared memory is not supported by this server", input_label(), k));
    }
    pending_ = field::ignore;
    return true;

  case ctx::output:
    if (k == "name") {
      return mark_seen(output_.seen, field::name, k, output_label());
    }
    if (k == "parameters") {
      return mark_seen(output_.seen, field::parameters, k, output_label());
    }
    pending_ = field::ignore;
    return true;

  case ctx::output_params:
    if (k == "binary_data") {
      return mark_seen(output_.seen_params, field::binary_data, k,
                       output_label() + " 'parameters'");
    }
    if (k == "classification") {
      return fail(
          fmt::format("{}: 'classification' is not supported by this server", output_label()));
    }
    if (k.starts_with("shared_memory_")) {
      return fail(fmt::format("{}: '{}': shared memory is not supported by this server",
                              output_label(), k));
    }
    pending_ = field::ignore;
    return true;

  case ctx::skip:
    return true;

  default:
    return fail("unexpected key in the request JSON"); // the parser only sends keys in objects
  }
}

inline bool infer_request_parser::value(const json_scalar& s, std::string_view text) {
  switch (top()) {
  case ctx::data:
    return data_value(s, text);
  case ctx::shape:
    return shape_value(s);
  case ctx::skip:
    return true;
  case ctx::before_root:
    return fail("the request body must be a JSON object");
  case ctx::root:
    return root_value(s, text);
  case ctx::params:
    return parameter_value(s, text);
  case ctx::input:
    return input_value(s, text);
  case ctx::input_params: {
    const field f = std::exchange(pending_, field::none);
    if (f == field::binary_data_size) {
      if (s.k != json_scalar::kind::unsigned_integer) {
        return fail(fmt::format("{}: 'binary_data_size' must be a non-negative integer, got {}",
                                input_label(), describe(s)));
      }
      input_.binary_size = s.u;
    }
    return true;
  }
  case ctx::output: {
    const field f = std::exchange(pending_, field::none);
    if (f == field::name) {
      if (s.k != json_scalar::kind::string) {
        return fail(fmt::format("{}: 'name' must be a string", output_label()));
      }
      output_.name.assign(text);
      output_.has_name = true;
    } else if (f == field::parameters) {
      return fail(fmt::format("{}: 'parameters' must be an object", output_label()));
    }
    return true;
  }
  case ctx::output_params: {
    const field f = std::exchange(pending_, field::none);
    if (f == field::binary_data) {
      if (s.k != json_scalar::kind::boolean) {
        return fail(fmt::format("{}: 'binary_data' must be true or false, got {}", output_label(),
                                describe(s)));
      }
      output_.binary = s.b;
    }
    return true;
  }
  case ctx::inputs:
    return fail("'inputs' must be an array of objects");
  case ctx::outputs:
    return fail("'outputs' must be an array of objects");
  case ctx::done:
    break;
  }
  return fail("unexpected value after the request JSON");
}

inline bool infer_request_parser::root_value(const json_scalar& s, std::string_view text) {
  switch (std::exchange(pending_, field::none)) {
  case field::id:
    if (s.k != json_scalar::kind::string) {
      return fail(fmt::format("'id' must be a string, got {}", describe(s)));
    }
    out_.request.id.assign(text);
    return true;
  case field::parameters:
    return fail("'parameters' must be an object");
  case field::inputs:
    return fail("'inputs' must be an array");
  case field::outputs:
    return fail("'outputs' must be an array");
  default:
    return true; // an ignored key
  }
}

inline bool infer_request_parser::parameter_value(const json_scalar& s, std::string_view text) {
  auto& r = out_.request;
  const auto expected = [&](std::string_view what) {
    return fail(fmt::format("Unable to parse '{}': expected {}, got {}", parameter_name_, what,
                            describe(s)));
  };
  switch (std::exchange(pending_, field::none)) {
  case field::sequence_id:
    if (s.k == json_scalar::kind::unsigned_integer) {
      r.sequence_id = correlation_id{s.u};
      return true;
    }
    if (s.k == json_scalar::kind::string) {
      r.sequence_id = correlation_id{std::string{text}};
      return true;
    }
    return expected("an unsigned integer or a string");
  case field::sequence_start:
    if (s.k != json_scalar::kind::boolean) {
      return expected("true or false");
    }
    r.sequence_start = s.b;
    return true;
  case field::sequence_end:
    if (s.k != json_scalar::kind::boolean) {
      return expected("true or false");
    }
    r.sequence_end = s.b;
    return true;
  case field::priority:
    if (s.k != json_scalar::kind::unsigned_integer) {
      return expected("an unsigned integer");
    }
    r.priority = s.u;
    return true;
  case field::timeout:
    if (s.k != json_scalar::kind::unsigned_integer) {
      return expected("an unsigned integer (microseconds)");
    }
    r.timeout_us = s.u;
    return true;
  case field::binary_data_output:
    if (s.k != json_scalar::kind::boolean) {
      return expected("true or false");
    }
    out_.binary_data_output = s.b;
    return true;
  default: // field::other_parameter
    if (s.k == json_scalar::kind::string || s.k == json_scalar::kind::boolean ||
        s.k == json_scalar::kind::integer || s.k == json_scalar::kind::unsigned_integer) {
      return true;
    }
    return fail(fmt::format("parameter '{}' has invalid type. It should be either 'int', "
                            "'bool', or 'string'.",
                            parameter_name_));
  }
}

inline bool infer_request_parser::input_value(const json_scalar& s, std::string_view text) {
  switch (std::exchange(pending_, field::none)) {
  case field::name:
    if (s.k != json_scalar::kind::string) {
      return fail(fmt::format("{}: 'name' must be a string, got {}", input_label(), describe(s)));
    }
    input_.name.assign(text);
    input_.has_name = true;
    return true;
  case field::datatype: {
    if (s.k != json_scalar::kind::string) {
      return fail(
          fmt::format("{}: 'datatype' must be a string, got {}", input_label(), describe(s)));
    }
    // Only the protocol spellings ("FP32"), not the model-config ones ("TYPE_FP32").
    const auto type = parse_data_type(text);
    if (!type || to_string(*type) != text) {
      return fail(fmt::format("{}: unknown datatype '{}'", input_label(), text));
    }
    input_.type = *type;
    return true;
  }
  case field::shape:
    return fail(fmt::format("{}: 'shape' must be an array of non-negative integers, got {}",
                            input_label(), describe(s)));
  case field::data:
    // A bare scalar is one element, as Triton reads it.
    input_.has_data = true;
    input_.data_is_array = false;
    return data_value(s, text);
  case field::parameters:
    return fail(fmt::format("{}: 'parameters' must be an object", input_label()));
  default:
    return true;
  }
}

inline bool infer_request_parser::data_value(const json_scalar& s, std::string_view text) {
  if (input_.data_is_array) {
    const std::size_t d = input_.depth;
    ++input_.level_count[d - 1];
    if (input_.leaf_depth == 0) {
      input_.leaf_depth = d;
    } else if (input_.leaf_depth != d) {
      input_.ragged = true;
    }
  }
  if (s.k == json_scalar::kind::string) {
    if (text.size() > std::numeric_limits<std::uint32_t>::max()) {
      return fail(fmt::format("{}: a BYTES element is longer than 4 GiB", input_label()));
    }
    const auto n = static_cast<std::uint32_t>(text.size());
    const char prefix[4] = {static_cast<char>(n & 0xFFU), static_cast<char>((n >> 8U) & 0xFFU),
                            static_cast<char>((n >> 16U) & 0xFFU),
                            static_cast<char>((n >> 24U) & 0xFFU)};
    scratch_.bytes.append(prefix, 4);
    scratch_.bytes.append(text);
  }
  scratch_.values.push_back(s);
  return true;
}

inline bool infer_request_parser::shape_value(const json_scalar& s) {
  if (s.k != json_scalar::kind::unsigned_integer ||
      s.u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return fail(fmt::format("{}: 'shape' dimensions must be non-negative integers, got {}",
                            input_label(), describe(s)));
  }
  if (input_.dims.rank() == shape::max_rank) {
    return fail(
        fmt::format("{}: 'shape' has more than {} dimensions", input_label(), shape::max_rank));
  }
  input_.dims.push_back(static_cast<std::int64_t>(s.u));
  return true;
}

inline bool infer_request_parser::start(bool object) {
  switch (top()) {
  case ctx::skip:
    ++skip_depth_;
    return true;

  case ctx::data:
    if (object) {
      return fail(fmt::format("{}: 'data' must hold values or arrays, not objects", input_label()));
    }
    if (input_.depth == shape::max_rank) {
      return fail(fmt::format("{}: 'data' is nested deeper than {} levels", input_label(),
                              shape::max_rank));
    }
    ++input_.level_count[input_.depth - 1];
    input_.level_count[input_.depth] = 0;
    ++input_.depth;
    if (input_.depth > input_.max_depth) {
      input_.max_depth = input_.depth;
    }
    return true;

  case ctx::before_root:
    if (!object) {
      return fail("the request body must be a JSON object");
    }
    return push(ctx::root);

  case ctx::root:
    switch (std::exchange(pending_, field::none)) {
    case field::parameters:
      return object ? push(ctx::params) : fail("'parameters' must be an object");
    case field::inputs:
      inputs_seen_ = true;
      return object ? fail("'inputs' must be an array") : push(ctx::inputs);
    case field::outputs:
      return object ? fail("'outputs' must be an array") : push(ctx::outputs);
    case field::id:
      return fail("'id' must be a string");
    default:
      skip_depth_ = 1;
      return push(ctx::skip);
    }

  case ctx::params: {
    const field f = std::exchange(pending_, field::none);
    if (f == field::other_parameter) {
      return fail(fmt::format("parameter '{}' has invalid type. It should be either 'int', "
                              "'bool', or 'string'.",
                              parameter_name_));
    }
    return fail(fmt::format("Unable to parse '{}': expected a value, got {}", parameter_name_,
                            object ? "an object" : "an array"));
  }

  case ctx::inputs:
    if (!object) {
      return fail("'inputs' must be an array of objects");
    }
    input_.name.clear();
    input_.has_name = false;
    input_.type.reset();
    input_.dims = shape{};
    input_.has_shape = false;
    input_.has_data = false;
    input_.data_is_array = false;
    input_.binary_size.reset();
    input_.seen = 0;
    input_.seen_params = 0;
    input_.depth = 0;
    input_.max_depth = 0;
    input_.leaf_depth = 0;
    input_.ragged = false;
    scratch_.clear();
    return push(ctx::input);

  case ctx::input:
    switch (std::exchange(pending_, field::none)) {
    case field::shape:
      if (object) {
        return fail(
            fmt::format("{}: 'shape' must be an array of non-negative integers", input_label()));
      }
      input_.has_shape = true;
      return push(ctx::shape);
    case field::data:
      if (object) {
        return fail(fmt::format("{}: 'data' must be an array", input_label()));
      }
      begin_data_array();
      return push(ctx::data);
    case field::parameters:
      return object ? push(ctx::input_params)
                    : fail(fmt::format("{}: 'parameters' must be an object", input_label()));
    case field::name:
      return fail(fmt::format("{}: 'name' must be a string", input_label()));
    case field::datatype:
      return fail(fmt::format("{}: 'datatype' must be a string", input_label()));
    default:
      skip_depth_ = 1;
      return push(ctx::skip);
    }

  case ctx::input_params:
    if (std::exchange(pending_, field::none) == field::binary_data_size) {
      return fail(
          fmt::format("{}: 'binary_data_size' must be a non-negative integer", input_label()));
    }
    skip_depth_ = 1;
    return push(ctx::skip);

  case ctx::shape:
    return fail(
        fmt::format("{}: 'shape' must be an array of non-negative integers", input_label()));

  case ctx::outputs:
    if (!object) {
      return fail("'outputs' must be an array of objects");
    }
    output_.name.clear();
    output_.has_name = false;
    output_.binary = false;
    output_.seen = 0;
    output_.seen_params = 0;
    return push(ctx::output);

  case ctx::output:
    switch (std::exchange(pending_, field::none)) {
    case field::parameters:
      return object ? push(ctx::output_params)
                    : fail(fmt::format("{}: 'parameters' must be an object", output_label()));
    case field::name:
      return fail(fmt::format("{}: 'name' must be a string", output_label()));
    default:
      skip_depth_ = 1;
      return push(ctx::skip);
    }

  case ctx::output_params:
    if (std::exchange(pending_, field::none) == field::binary_data) {
      return fail(fmt::format("{}: 'binary_data' must be true or false", output_label()));
    }
    skip_depth_ = 1;
    return push(ctx::skip);

  case ctx::done:
    break;
  }
  return fail("unexpected value after the request JSON");
}

inline bool infer_request_parser::end() {
  switch (top()) {
  case ctx::skip:
    if (--skip_depth_ == 0) {
      pop();
    }
    return true;
  case ctx::data: {
    const std::size_t d = input_.depth;
    const std::int64_t len = input_.level_count[d - 1];
    if (input_.level_len[d - 1] < 0) {
      input_.level_len[d - 1] = len;
    } else if (input_.level_len[d - 1] != len) {
      input_.ragged = true;
    }
    if (--input_.depth == 0) {
      pop();
    }
    return true;
  }
  case ctx::input:
    if (!finish_input()) {
      return false;
    }
    ++input_index_;
    pop();
    return true;
  case ctx::output:
    if (!finish_output()) {
      return false;
    }
    ++output_index_;
    pop();
    return true;
  case ctx::root:
    if (!inputs_seen_) {
      return fail("the request has no 'inputs'");
    }
    pop();
    return push(ctx::done);
  default:
    pop();
    return true;
  }
}

inline bool infer_request_parser::finish_input() {
  if (!input_.has_name) {
    return fail(fmt::format("inputs[{}] has no 'name'", input_index_));
  }
  if (!input_.type) {
    return fail(fmt::format("{}: missing 'datatype'", input_label()));
  }
  if (!input_.has_shape) {
    return fail(fmt::format("{}: missing 'shape'", input_label()));
  }
  const bool binary = input_.binary_size.has_value();
  if (input_.has_data == binary) {
    return fail(fmt::format("{}: the input must set exactly one of 'data' and "
                            "'binary_data_size' in 'parameters', but {}",
                            input_label(), binary ? "set both" : "set neither"));
  }
  for (const auto& t : out_.request.inputs) {
    if (t.name == input_.name) {
      return fail(fmt::format("input '{}' appears more than once", input_.name));
    }
  }
  const auto count = checked_element_count(input_.dims);
  if (!count) {
    return fail(
        fmt::format("{}: shape {} has too many elements", input_label(), to_string(input_.dims)));
  }
  const data_type type = *input_.type;

  if (binary) {
    const std::uint64_t n = *input_.binary_size;
    const std::size_t left = binary_.size() - binary_used_;
    if (n > left) {
      return fail(fmt::format("{}: 'binary_data_size' is {} but only {} bytes of binary data "
                              "are left after the JSON header",
                              input_label(), n, left));
    }
    const auto bytes = binary_.subspan(binary_used_, static_cast<std::size_t>(n));
    if (type == data_type::bytes) {
      const auto elements = count_bytes_elements(bytes);
      if (!elements) {
        return fail(fmt::format("{}: the binary BYTES data is not a sequence of "
                                "length-prefixed elements",
                                input_label()));
      }
      if (*elements != *count) {
        return fail(fmt::format("{}: expected {} BYTES elements for shape {}, the binary data "
                                "holds {}",
                                input_label(), *count, to_string(input_.dims), *elements));
      }
    } else {
      const auto expected = checked_bytes(*count, byte_size(type));
      if (!expected || *expected != n) {
        return fail(fmt::format("{}: 'binary_data_size' is {}, but shape {} of {} needs {} bytes",
                                input_label(), n, to_string(input_.dims), to_string(type),
                                expected ? fmt::format("{}", *expected) : "too many"));
      }
    }
    binary_used_ += static_cast<std::size_t>(n);
    out_.request.inputs.push_back(
        tensor{std::move(input_.name), type, input_.dims, buffer::copy_of(bytes)});
    return true;
  }

  // JSON data: nested arrays must have the shape's dims; flat ones only its element count.
  if (input_.data_is_array && input_.max_depth >= 2) {
    if (input_.ragged || (input_.leaf_depth != 0 && input_.leaf_depth != input_.max_depth)) {
      return fail(fmt::format("{}: 'data' is a ragged nested array", input_label()));
    }
    shape nested;
    for (std::size_t i = 0; i < input_.max_depth; ++i) {
      nested.push_back(input_.level_len[i]);
    }
    if (!(nested == input_.dims)) {
      return fail(fmt::format("{}: nested 'data' has shape {}, but 'shape' is {}", input_label(),
                              to_string(nested), to_string(input_.dims)));
    }
  }
  const std::size_t got = scratch_.values.size();
  if (got != *count) {
    return fail(fmt::format("{}: expected {} values for shape {}, got {}", input_label(), *count,
                            to_string(input_.dims), got));
  }
  tensor t;
  t.type = type;
  t.shape = input_.dims;
  if (!convert_data(t, got)) { // before moving the name: its messages name the input
    return false;
  }
  t.name = std::move(input_.name);
  out_.request.inputs.push_back(std::move(t));
  return true;
}

inline bool infer_request_parser::convert_data(tensor& t, std::size_t count) {
  const auto& values = scratch_.values;
  const data_type type = t.type;
  if (type == data_type::bytes) {
    for (std::size_t i = 0; i < count; ++i) {
      if (values[i].k != json_scalar::kind::string) {
        return element_error(i, values[i], "a string for BYTES");
      }
    }
    t.data = buffer::copy_of(std::as_bytes(std::span{scratch_.bytes}));
    return true;
  }
  t.data = buffer::allocate(count * byte_size(type));
  std::byte* base = t.data.data();
  const auto store = [base](std::size_t i, auto v) {
    std::memcpy(base + i * sizeof(v), &v, sizeof(v));
  };
  const auto integers = [&]<class Int>(Int, std::string_view name) {
    for (std::size_t i = 0; i < count; ++i) {
      Int v{};
      if (!scalar_to_integer(values[i], v)) {
        return element_error(i, values[i],
                             fmt::format("an integer in [{}, {}] for {}",
                                         std::numeric_limits<Int>::min(),
                                         std::numeric_limits<Int>::max(), name));
      }
      store(i, v);
    }
    return true;
  };
  switch (type) {
  case data_type::boolean:
    for (std::size_t i = 0; i < count; ++i) {
      if (values[i].k != json_scalar::kind::boolean) {
        return element_error(i, values[i], "true or false for BOOL");
      }
      store(i, static_cast<std::uint8_t>(values[i].b ? 1U : 0U));
    }
    return true;
  case data_type::uint8:
    return integers(std::uint8_t{}, "UINT8");
  case data_type::uint16:
    return integers(std::uint16_t{}, "UINT16");
  case data_type::uint32:
    return integers(std::uint32_t{}, "UINT32");
  case data_type::uint64:
    return integers(std::uint64_t{}, "UINT64");
  case data_type::int8:
    return integers(std::int8_t{}, "INT8");
  case data_type::int16:
    return integers(std::int16_t{}, "INT16");
  case data_type::int32:
    return integers(std::int32_t{}, "INT32");
  case data_type::int64:
    return integers(std::int64_t{}, "INT64");
  case data_type::fp32:
    for (std::size_t i = 0; i < count; ++i) {
      double d = 0;
      float f = 0;
      if (!scalar_to_double(values[i], d)) {
        return element_error(i, values[i], "a number for FP32");
      }
      if (!double_to_float(d, f)) {
        return element_error(i, values[i], "a number within FP32's range");
      }
      store(i, f);
    }
    return true;
  case data_type::fp64:
    for (std::size_t i = 0; i < count; ++i) {
      double d = 0;
      if (!scalar_to_double(values[i], d)) {
        return element_error(i, values[i], "a number for FP64");
      }
      store(i, d);
    }
    return true;
  case data_type::fp16:
  case data_type::bf16: {
    // Triton refuses FP16/BF16 in JSON ("use the binary data format"); servekit converts the
    // numbers, rounding to nearest even, and refuses only values past the type's range.
    const bool half = type == data_type::fp16;
    for (std::size_t i = 0; i < count; ++i) {
      double d = 0;
      float f = 0;
      if (!scalar_to_double(values[i], d)) {
        return element_error(i, values[i], half ? "a number for FP16" : "a number for BF16");
      }
      const bool in_range = double_to_float(d, f);
      const std::uint16_t bits = half ? float_to_half(f) : float_to_bf16(f);
      if (!in_range || (bits & 0x7FFFU) == (half ? 0x7C00U : 0x7F80U)) {
        return element_error(i, values[i],
                             half ? "a number within FP16's range (|x| <= 65504)"
                                  : "a number within BF16's range");
      }
      store(i, bits);
    }
    return true;
  }
  case data_type::bytes:
  case data_type::invalid:
    break;
  }
  return fail(fmt::format("{}: unsupported datatype", input_label()));
}

inline bool infer_request_parser::finish_output() {
  if (!output_.has_name) {
    return fail(fmt::format("outputs[{}] has no 'name'", output_index_));
  }
  for (const auto& o : out_.outputs) {
    if (o.name == output_.name) {
      return fail(fmt::format("output '{}' is requested more than once", output_.name));
    }
  }
  out_.request.requested_outputs.push_back(output_.name);
  out_.outputs.push_back(requested_output{std::move(output_.name), output_.binary});
  return true;
}

/// Checks that an output tensor can be written: host memory, and bytes matching its shape.
[[nodiscard]] inline status check_output(const tensor& t, std::size_t& count) {
  if (!t.data.location().host_accessible()) {
    return internal_error(fmt::format("output '{}' is in device memory", t.name));
  }
  const auto n = checked_element_count(t.shape);
  if (!n) {
    return internal_error(
        fmt::format("output '{}' has an invalid shape {}", t.name, to_string(t.shape)));
  }
  count = *n;
  if (t.type == data_type::invalid) {
    return internal_error(fmt::format("output '{}' has no datatype", t.name));
  }
  if (t.type == data_type::bytes) {
    const auto elements = count_bytes_elements(t.data.bytes());
    if (!elements || *elements != count) {
      return internal_error(
          fmt::format("output tensor shape does not match size of output for '{}'", t.name));
    }
    return {};
  }
  const auto expected = checked_bytes(count, byte_size(t.type));
  if (!expected || *expected != t.data.size()) {
    return internal_error(
        fmt::format("output tensor shape does not match size of output for '{}'", t.name));
  }
  return {};
}

template <class T>
[[nodiscard]] inline T load(const std::byte* base, std::size_t i) noexcept {
  T v;
  std::memcpy(&v, base + i * sizeof(T), sizeof(T));
  return v;
}

/// Writes the "data" array of an output. Fails only for BYTES that are not UTF-8.
[[nodiscard]] inline status append_output_data(std::string& out, const tensor& t,
                                               std::size_t count) {
  const std::byte* base = t.data.data();
  out += '[';
  const auto each = [&](auto write) {
    for (std::size_t i = 0; i < count; ++i) {
      if (i != 0) {
        out += ',';
      }
      write(i);
    }
  };
  switch (t.type) {
  case data_type::boolean:
    each([&](std::size_t i) { out += load<std::uint8_t>(base, i) != 0 ? "true" : "false"; });
    break;
  case data_type::uint8:
    each([&](std::size_t i) { append_integer(out, unsigned{load<std::uint8_t>(base, i)}); });
    break;
  case data_type::uint16:
    each([&](std::size_t i) { append_integer(out, unsigned{load<std::uint16_t>(base, i)}); });
    break;
  case data_type::uint32:
    each([&](std::size_t i) { append_integer(out, load<std::uint32_t>(base, i)); });
    break;
  case data_type::uint64:
    each([&](std::size_t i) { append_integer(out, load<std::uint64_t>(base, i)); });
    break;
  case data_type::int8:
    each([&](std::size_t i) { append_integer(out, int{load<std::int8_t>(base, i)}); });
    break;
  case data_type::int16:
    each([&](std::size_t i) { append_integer(out, int{load<std::int16_t>(base, i)}); });
    break;
  case data_type::int32:
    each([&](std::size_t i) { append_integer(out, load<std::int32_t>(base, i)); });
    break;
  case data_type::int64:
    each([&](std::size_t i) { append_integer(out, load<std::int64_t>(base, i)); });
    break;
  case data_type::fp16:
    // Triton refuses FP16/BF16 outputs in JSON; servekit writes their values as numbers.
    each([&](std::size_t i) { append_float(out, half_to_float(load<std::uint16_t>(base, i))); });
    break;
  case data_type::bf16:
    each([&](std::size_t i) { append_float(out, bf16_to_float(load<std::uint16_t>(base, i))); });
    break;
  case data_type::fp32:
    each([&](std::size_t i) { append_float(out, load<float>(base, i)); });
    break;
  case data_type::fp64:
    each([&](std::size_t i) { append_float(out, load<double>(base, i)); });
    break;
  case data_type::bytes: {
    std::size_t index = 0;
    bool utf8 = true;
    (void)for_each_bytes_element(t.data.bytes(), [&](std::string_view e) {
      if (!utf8) {
        return;
      }
      if (index != 0) {
        out += ',';
      }
      utf8 = append_json_string(out, e, true);
      ++index;
    });
    if (!utf8) {
      return invalid_argument(fmt::format(
          "output '{}': BYTES element {} is not valid UTF-8 and cannot be written as a JSON "
          "string; request the output with \"binary_data\": true",
          t.name, index - 1));
    }
    break;
  }
  case data_type::invalid:
    break;
  }
  out += ']';
  return {};
}

} // namespace detail

/// Decodes a KServe v2 infer request body into `out` (which is reset first).
///
/// `json_header_length` is the Inference-Header-Content-Length header of Triton's binary tensor
/// data extension: when set, body[0, length) is the JSON and the rest is the binary data that the
/// inputs with "parameters": {"binary_data_size": N} take, N bytes each, in input order (for
/// BYTES: the 4-byte-length-prefixed serialisation); all of it must be used. A length of 0 (a
/// Triton "raw binary" request, one unnamed input) is refused.
///
/// Inputs get the shape the client sent: the model checks names, types and shapes against its
/// config at submit. "data" may be flat or nested (nested arrays must have the shape's dims), or
/// a bare scalar for one element. Top-level "parameters": sequence_id (unsigned integer or
/// string), sequence_start, sequence_end, priority, timeout (µs), binary_data_output; keys
/// starting with "triton_" are refused as Triton refuses them; any other parameter of type int,
/// bool or string is accepted and ignored. Every error is invalid_argument with a message naming
/// the input, key or element at fault (resource_exhausted if memory runs out).
///
/// Differences from Triton: FP16 and BF16 are accepted as JSON numbers (Triton requires binary
/// data for them); integer types refuse JSON floats such as 3.0 (Triton too), and out-of-range
/// values are refused rather than truncated (Triton casts); nested "data" must be regular and
/// match "shape" (Triton counts elements only); NaN/Infinity tokens are not accepted (strict JSON
/// grammar; Triton's rapidjson takes them); JSON nested deeper than 512 levels, duplicate keys,
/// shared memory and classification are refused.
[[nodiscard]] inline status decode_infer_request(std::string_view body,
                                                 std::optional<std::size_t> json_header_length,
                                                 decoded_infer_request& out) {
  out.request = servekit::request{};
  out.outputs.clear();
  out.binary_data_output = false;

  std::string_view json = body;
  std::span<const std::byte> binary;
  if (json_header_length) {
    if (*json_header_length == 0) {
      return invalid_argument("Inference-Header-Content-Length 0 (a raw binary request) is not "
                              "supported; send a JSON header");
    }
    if (*json_header_length > body.size()) {
      return invalid_argument(fmt::format("Inference-Header-Content-Length is {} but the body "
                                          "has only {} bytes",
                                          *json_header_length, body.size()));
    }
    json = body.substr(0, *json_header_length);
    binary = std::as_bytes(std::span{body.data(), body.size()}).subspan(*json_header_length);
  }

  auto& scratch = detail::thread_decode_scratch();
  scratch.clear();
  status result;
  try {
    out.request.inputs.reserve(4);
    detail::infer_request_parser parser{scratch, out, binary};
    detail::json_reader<detail::infer_request_parser> reader{json, parser, scratch.unescaped};
    const bool parsed = reader.parse();
    if (!parsed || parser.failed() || !parser.finish()) {
      result = parser.take_error();
      if (result.ok()) {
        result = invalid_argument("failed to parse the request JSON");
      }
    }
  } catch (const std::bad_alloc&) {
    result = resource_exhausted("out of memory while decoding the request");
  } catch (const std::exception& e) {
    result = invalid_argument(fmt::format("failed to decode the request: {}", e.what()));
  }
  scratch.clear();
  scratch.trim();
  return result;
}

/// KServe's error body: {"error":"<message>"} (invalid UTF-8 in the message becomes U+FFFD).
[[nodiscard]] inline std::string encode_error(std::string_view message) {
  std::string out;
  out.reserve(message.size() + 16);
  out += R"({"error":)";
  detail::append_json_string(out, message);
  out += '}';
  return out;
}

/// Writes the KServe v2 response for a successful `r` into `body` (cleared first; its capacity
/// is reused): {"model_name","model_version" (a string),"id" (only when r.id is set),"outputs"}.
///
/// Output selection: when `asked.outputs` lists outputs, only those are written (a model may
/// already have filtered); otherwise all of them. Outputs keep the response's order. An output is
/// sent as binary data when its requested_output says "binary_data" or `asked.binary_data_output`
/// is set: it then has "parameters": {"binary_data_size": N} instead of "data", its bytes follow
/// the JSON in output order, and `json_header_length` is set to the JSON's length (else it is
/// reset). Only `asked.outputs` and `asked.binary_data_output` are read, never `asked.request`.
///
/// Floats are written in their shortest round-trip form; NaN and infinities as `NaN`,
/// `Infinity`, `-Infinity` (Triton's choice; not strict JSON). FP16/BF16 are written as numbers
/// (Triton refuses them in JSON). Like Triton, the response carries no "parameters" (Triton
/// does not echo sequence_id; it writes only parameters a backend sets).
///
/// Failed responses are not encoded here (write encode_error(r.status.message())). The returned
/// status is not ok when an output cannot be written: internal for a tensor whose bytes do not
/// match its shape or that lives in device memory, invalid_argument for BYTES that are not UTF-8
/// in a JSON output; `body` then holds encode_error(message) and `json_header_length` is reset.
inline status encode_infer_response(const servekit::response& r, std::string_view model,
                                    std::int64_t version, const decoded_infer_request& asked,
                                    std::string& body,
                                    std::optional<std::size_t>& json_header_length) {
  body.clear();
  json_header_length.reset();

  const auto binary_for = [&](const tensor& t, bool& binary) {
    if (asked.outputs.empty()) {
      binary = asked.binary_data_output;
      return true;
    }
    for (const auto& o : asked.outputs) {
      if (o.name == t.name) {
        binary = o.binary_data || asked.binary_data_output;
        return true;
      }
    }
    return false;
  };

  // One reservation up front (a no-op when the caller reuses its string): binary data is copied
  // as is; JSON text takes about four characters per byte of FP32 or UINT8 data.
  std::size_t estimate = 64 + model.size() + r.id.size();
  for (const auto& t : r.outputs) {
    bool binary = false;
    if (binary_for(t, binary)) {
      estimate += 96 + t.name.size() + (binary ? 1 : 4) * t.data.size();
    }
  }
  body.reserve(estimate);

  body += R"({"model_name":)";
  detail::append_json_string(body, model);
  body += R"(,"model_version":")";
  detail::append_integer(body, version);
  body += '"';
  if (!r.id.empty()) {
    body += R"(,"id":)";
    detail::append_json_string(body, r.id);
  }
  body += R"(,"outputs":[)";

  bool first = true;
  bool any_binary = false;
  for (const auto& t : r.outputs) {
    bool binary = false;
    if (!binary_for(t, binary)) {
      continue;
    }
    std::size_t count = 0;
    status s = detail::check_output(t, count);
    if (s.ok()) {
      if (!first) {
        body += ',';
      }
      first = false;
      body += R"({"name":)";
      detail::append_json_string(body, t.name);
      body += R"(,"datatype":")";
      body += to_string(t.type);
      body += R"(","shape":)";
      detail::append_shape(body, t.shape);
      if (binary) {
        body += R"(,"parameters":{"binary_data_size":)";
        detail::append_integer(body, t.data.size());
        body += "}}";
        any_binary = true;
        continue;
      }
      body += R"(,"data":)";
      s = detail::append_output_data(body, t, count);
      body += '}';
    }
    if (!s.ok()) {
      body = encode_error(s.message());
      return s;
    }
  }
  body += "]}";

  if (any_binary) {
    json_header_length = body.size();
    for (const auto& t : r.outputs) {
      bool binary = false;
      if (binary_for(t, binary) && binary && !t.data.empty()) {
        body.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
      }
    }
  }
  return {};
}

/// The HTTP status for a status code, as Triton maps them: internal 500, not_found 404,
/// unavailable 503, every other error 400 (and 200 for ok).
[[nodiscard]] constexpr unsigned http_status_for(status_code code) noexcept {
  switch (code) {
  case status_code::ok:
    return 200;
  case status_code::internal:
    return 500;
  case status_code::not_found:
    return 404;
  case status_code::unavailable:
    return 503;
  default:
    return 400;
  }
}

/// KServe model metadata: {"name","versions":["<version>"],"platform","inputs","outputs"}, each
/// tensor {"name","datatype" (KServe spelling, "FP32"),"shape"} with the batch dimension as -1
/// in front when the model batches (max_batch_size > 0), as Triton reports it. "platform" is the
/// config's platform, else its backend. Pass the config as loaded (inputs and outputs listed).
[[nodiscard]] inline nlohmann::json model_metadata_json(const model_options& config) {
  const bool batching = config.max_batch_size.value_or(0) > 0;
  const auto tensors = [batching](const std::vector<tensor_config>& list) {
    auto out = nlohmann::json::array();
    for (const auto& t : list) {
      auto dims = nlohmann::json::array();
      if (batching) {
        dims.push_back(-1);
      }
      for (const auto d : t.dims.dims()) {
        dims.push_back(d);
      }
      out.push_back({{"name", t.name}, {"datatype", to_string(t.type)}, {"shape", dims}});
    }
    return out;
  };
  return {
      {"name", config.name},
      {"versions", nlohmann::json::array({std::to_string(config.version)})},
      {"platform", config.platform.empty() ? config.backend : config.platform},
      {"inputs", tensors(config.input)},
      {"outputs", tensors(config.output)},
  };
}

/// KServe server metadata: {"name":"servekit","version":"0.1.0","extensions":[...]}.
[[nodiscard]] inline nlohmann::json server_metadata_json() {
  auto extensions = nlohmann::json::array();
  for (const auto e : server_extensions) {
    extensions.push_back(e);
  }
  return {{"name", server_name}, {"version", server_version}, {"extensions", extensions}};
}

} // namespace servekit::http
