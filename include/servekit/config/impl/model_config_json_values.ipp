#pragma once
/// \file
/// Definitions for config/model_config_json.hpp: JSON pointers, the error messages (values
/// described, "did you mean" hints), reading JSON values (objects, arrays, booleans, strings,
/// integers, floats, data types) into C++ values, and writing floats and dims. Compiled once into
/// servekit::server, or included by model_config_json.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/config/detail/model_config_json.hpp>
#include <servekit/config/model_config_json.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/shape.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace servekit {

[[nodiscard]] SERVEKIT_DECL std::string to_json_pointer_escaped(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (const char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

namespace detail {

// ------------------------------------------------------------------------------------------
// JSON pointers

[[nodiscard]] SERVEKIT_DECL std::string member_path(const std::string& parent,
                                                    std::string_view key) {
  return parent + '/' + to_json_pointer_escaped(key);
}

[[nodiscard]] SERVEKIT_DECL std::string element_path(const std::string& parent, std::size_t index) {
  return parent + '/' + std::to_string(index);
}

// ------------------------------------------------------------------------------------------
// Describing values and names in messages

inline constexpr std::size_t max_quoted_length = 64;

[[nodiscard]] SERVEKIT_DECL std::string quoted_json(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() <= max_quoted_length) {
    return text;
  }
  std::size_t cut = max_quoted_length - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) {
    --cut;
  }
  text.resize(cut);
  return text + "...";
}

[[nodiscard]] SERVEKIT_DECL std::string describe_json(const json& value) {
  if (value.is_null() || value.is_array() || value.is_object()) {
    return value.type_name();
  }
  return std::string{value.type_name()} + ' ' + quoted_json(value);
}

/// Levenshtein distance, for "did you mean" hints.
[[nodiscard]] SERVEKIT_DECL std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const std::size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0U : 1U);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitution});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// "maxBatchSize" -> "max_batch_size" (protobuf's JSON camelCase spelling, which we do not accept).
[[nodiscard]] SERVEKIT_DECL std::string camel_to_snake(std::string_view name) {
  std::string out;
  for (const char c : name) {
    if (c >= 'A' && c <= 'Z') {
      out += '_';
      out += static_cast<char>(c - 'A' + 'a');
    } else {
      out += c;
    }
  }
  return out;
}

inline constexpr std::size_t max_suggestion_distance = 2;

/// The known name `key` most likely meant (camelCase spelling or a small typo), or "".
[[nodiscard]] SERVEKIT_DECL std::string_view closest_name(std::string_view key,
                                                          std::span<const std::string_view> known) {
  const std::string snake = camel_to_snake(key);
  for (const auto name : known) {
    if (name == snake) {
      return name;
    }
  }
  std::string_view best;
  std::size_t best_distance = max_suggestion_distance + 1;
  for (const auto name : known) {
    const std::size_t distance = edit_distance(key, name);
    if (distance < best_distance && distance < key.size()) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

// ------------------------------------------------------------------------------------------
// Throwing config_error

[[noreturn]] SERVEKIT_DECL void fail_wrong_type(const std::string& path, std::string_view expected,
                                                const json& got) {
  throw config_error(config_error_code::wrong_type, path,
                     "expected " + std::string{expected} + ", got " + describe_json(got));
}

[[noreturn]] SERVEKIT_DECL void fail_bad_value(const std::string& path,
                                               const std::string& message) {
  throw config_error(config_error_code::bad_value, path, message);
}

/// `path` points at the missing member itself.
[[nodiscard]] SERVEKIT_DECL config_error missing_field_error(const std::string& path,
                                                             std::string_view field) {
  return config_error(config_error_code::bad_value, path,
                      "required field '" + std::string{field} + "' is missing");
}

[[noreturn]] SERVEKIT_DECL void fail_not_supported_yet(const std::string& path,
                                                       std::string_view field) {
  throw config_error(config_error_code::unknown_field, path,
                     "field '" + std::string{field} +
                         "' is not supported by this build of servekit yet");
}

[[noreturn]] SERVEKIT_DECL void fail_unknown_field(const std::string& path, std::string_view field,
                                                   std::span<const std::string_view> known) {
  std::string message = "unknown field '" + std::string{field} + "'";
  if (const auto hint = closest_name(field, known); !hint.empty()) {
    message += "; did you mean '" + std::string{hint} + "'?";
  }
  message += " (known: " + join_names(known) + ")";
  throw config_error(config_error_code::unknown_field, path, message);
}

// ------------------------------------------------------------------------------------------
// JSON types: objects, arrays, booleans, strings

SERVEKIT_DECL void expect_object(const json& value, const std::string& path,
                                 std::string_view what) {
  if (!value.is_object()) {
    fail_wrong_type(path, what, value);
  }
}

SERVEKIT_DECL void expect_array(const json& value, const std::string& path) {
  if (!value.is_array()) {
    fail_wrong_type(path, "an array", value);
  }
}

[[nodiscard]] SERVEKIT_DECL bool read_bool(const json& value, const std::string& path) {
  if (!value.is_boolean()) {
    fail_wrong_type(path, "a boolean (true or false)", value);
  }
  return value.get<bool>();
}

[[nodiscard]] SERVEKIT_DECL std::string read_string(const json& value, const std::string& path) {
  if (!value.is_string()) {
    fail_wrong_type(path, "a string", value);
  }
  return value.get<std::string>();
}

// ------------------------------------------------------------------------------------------
// Integers: JSON numbers or decimal strings (protobuf writes 64-bit integers as strings)

inline constexpr std::string_view integer_expectation =
    "an integer (a JSON number or a decimal string such as \"100\")";

[[nodiscard]] SERVEKIT_DECL bool is_decimal_digits(std::string_view text) noexcept {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// 100, 1e2 and 100.0 are the integer 100; 1.5 is refused.
[[nodiscard]] SERVEKIT_DECL integer_value integer_from_number(double number, const json& value,
                                                              const std::string& path) {
  if (!std::isfinite(number) || std::trunc(number) != number) {
    fail_bad_value(path, "expected an integer, got " + describe_json(value));
  }
  constexpr double two_to_the_64 = 18446744073709551616.0;
  const double magnitude = std::fabs(number);
  if (magnitude >= two_to_the_64) {
    return {number < 0, 0, true};
  }
  return {number < 0, static_cast<std::uint64_t>(magnitude), false};
}

/// "100" or "-1": an optional minus sign and decimal digits, nothing else.
[[nodiscard]] SERVEKIT_DECL integer_value integer_from_string(const json& value,
                                                              const std::string& path) {
  std::string_view digits = value.get_ref<const std::string&>();
  const bool minus = !digits.empty() && digits.front() == '-';
  if (minus) {
    digits.remove_prefix(1);
  }
  if (!is_decimal_digits(digits)) {
    fail_bad_value(path, "expected " + std::string{integer_expectation} + ", got " +
                             describe_json(value));
  }
  std::uint64_t magnitude = 0;
  const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude);
  if (result.ec == std::errc::result_out_of_range) {
    return {minus, 0, true};
  }
  return {minus && magnitude != 0, magnitude, false};
}

[[nodiscard]] SERVEKIT_DECL integer_value read_integer_value(const json& value,
                                                             const std::string& path) {
  if (value.is_number_unsigned()) {
    return {false, value.get<std::uint64_t>(), false};
  }
  if (value.is_number_integer()) {
    const auto number = value.get<std::int64_t>();
    const auto bits = static_cast<std::uint64_t>(number);
    return {number < 0, number < 0 ? std::uint64_t{0} - bits : bits, false};
  }
  if (value.is_number_float()) {
    return integer_from_number(value.get<double>(), value, path);
  }
  if (value.is_string()) {
    return integer_from_string(value, path);
  }
  fail_wrong_type(path, integer_expectation, value);
}

// ------------------------------------------------------------------------------------------
// Floats: JSON numbers, or the strings protobuf's JSON mapping also accepts

inline constexpr std::string_view float_expectation =
    "a number (a JSON number, a decimal string such as \"0.5\", \"NaN\", \"Infinity\" or "
    "\"-Infinity\")";

/// The number in a string such as "0.5" (protobuf accepts floats written as strings).
[[nodiscard]] SERVEKIT_DECL double float_from_string(const json& value, const std::string& path) {
  const auto& text = value.get_ref<const std::string&>();
  if (text == "NaN") {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (text == "Infinity" || text == "-Infinity") {
    const double infinity = std::numeric_limits<double>::infinity();
    return text.front() == '-' ? -infinity : infinity;
  }
  double number = 0.0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), number);
  if (text.empty() || result.ec != std::errc{} || result.ptr != text.data() + text.size() ||
      !std::isfinite(number)) {
    fail_bad_value(path,
                   "expected " + std::string{float_expectation} + ", got " + describe_json(value));
  }
  return number;
}

[[nodiscard]] SERVEKIT_DECL float read_float(const json& value, const std::string& path) {
  double number = 0.0;
  if (value.is_number()) {
    number = value.get<double>();
  } else if (value.is_string()) {
    number = float_from_string(value, path);
  } else {
    fail_wrong_type(path, float_expectation, value);
  }
  if (std::isfinite(number) && std::fabs(number) > std::numeric_limits<float>::max()) {
    fail_bad_value(path, "out of range for float (largest magnitude " +
                             std::to_string(std::numeric_limits<float>::max()) + "), got " +
                             describe_json(value));
  }
  return static_cast<float>(number);
}

[[nodiscard]] SERVEKIT_DECL json write_float(float value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "Infinity" : "-Infinity";
  }
  return value;
}

SERVEKIT_DECL void check_oneof(const json& object, const std::string& path, std::string_view oneof,
                               std::initializer_list<std::string_view> members) {
  std::string_view first;
  for (const auto name : members) {
    if (!object.contains(std::string{name})) {
      continue;
    }
    if (!first.empty()) {
      fail_bad_value(member_path(path, name),
                     "'" + std::string{first} + "' and '" + std::string{name} +
                         "' are both set; set at most one (they are the oneof " +
                         std::string{oneof} + ")");
    }
    first = name;
  }
}

SERVEKIT_DECL void require_fields(const json& object, const std::string& path,
                                  std::initializer_list<std::string_view> required) {
  for (const auto name : required) {
    if (!object.contains(std::string{name})) {
      throw missing_field_error(member_path(path, name), name);
    }
  }
}

[[nodiscard]] SERVEKIT_DECL std::string data_type_spellings() {
  std::vector<std::string_view> spellings;
  for (const auto& info : data_type_table) {
    spellings.push_back(info.config_name);
  }
  return join_names(spellings);
}

[[nodiscard]] SERVEKIT_DECL data_type read_data_type(const json& value, const std::string& path) {
  if (!value.is_string()) {
    fail_wrong_type(path, "a string naming a data type (one of " + data_type_spellings() + ")",
                    value);
  }
  if (const auto type = parse_data_type(value.get_ref<const std::string&>())) {
    return *type;
  }
  fail_bad_value(path, "expected one of " + data_type_spellings() + ", got " + quoted_json(value) +
                           " (the TYPE_ prefix may be left out; BYTES means TYPE_STRING)");
}

[[nodiscard]] SERVEKIT_DECL json write_dims(const shape& dims) {
  json out = json::array();
  const json_teardown_on_throw teardown{out}; // see to_json_value
  for (const auto dim : dims.dims()) {
    out.push_back(dim);
  }
  return out;
}

} // namespace detail

} // namespace servekit
