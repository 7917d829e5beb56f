#pragma once
/// \file
/// Loads and saves `model_options` as Triton's model-configuration JSON: the protobuf JSON
/// mapping of `inference.ModelConfig`, with Triton's field and enum names. Every error is a
/// `config_error` whose `path()` is a JSON pointer to the offending field.
///
///     auto options = servekit::load_model_config(R"({"max_batch_size": 8})");
///     nlohmann::json j = servekit::save_model_config(options);
///
/// Fields Triton has and servekit does not implement yet are refused by name, never ignored.

#include <servekit/backend/instance_context.hpp>
#include <servekit/backend/tensor_spec.hpp>
#include <servekit/cache/cache_eligibility.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/queue/queue_policy.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/schedule/dynamic_batching_options.hpp>
#include <servekit/schedule/ensemble_scheduling_options.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace servekit {

/// Escapes one reference token of a JSON pointer (RFC 6901): '~' becomes "~0" and '/' becomes
/// "~1", so `"/parameters/" + to_json_pointer_escaped("a/b")` is "/parameters/a~1b".
[[nodiscard]] inline std::string to_json_pointer_escaped(std::string_view token) {
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

using json = nlohmann::json;

// ------------------------------------------------------------------------------------------
// JSON pointers

/// The pointer of member `key` of the object at `parent` ("" is the document root).
[[nodiscard]] inline std::string member_path(const std::string& parent, std::string_view key) {
  return parent + '/' + to_json_pointer_escaped(key);
}

/// The pointer of element `index` of the array at `parent`.
[[nodiscard]] inline std::string element_path(const std::string& parent, std::size_t index) {
  return parent + '/' + std::to_string(index);
}

// ------------------------------------------------------------------------------------------
// Describing values and names in messages

inline constexpr std::size_t max_quoted_length = 64;

/// The value as JSON text, cut (at a UTF-8 character boundary) when long: "\"TYPE_FLOAT\"", "1.5".
[[nodiscard]] inline std::string quoted_json(const json& value) {
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

/// "string \"abc\"", "number 1.5", "boolean true"; just "null", "array" or "object" otherwise.
[[nodiscard]] inline std::string describe_json(const json& value) {
  if (value.is_null() || value.is_array() || value.is_object()) {
    return value.type_name();
  }
  return std::string{value.type_name()} + ' ' + quoted_json(value);
}

/// "a, b, c".
template <class Names>
[[nodiscard]] std::string join_names(const Names& names) {
  std::string out;
  for (const auto& name : names) {
    if (!out.empty()) {
      out += ", ";
    }
    out += name;
  }
  return out;
}

/// Levenshtein distance, for "did you mean" hints.
[[nodiscard]] inline std::size_t edit_distance(std::string_view a, std::string_view b) {
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
[[nodiscard]] inline std::string camel_to_snake(std::string_view name) {
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
[[nodiscard]] inline std::string_view closest_name(std::string_view key,
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

[[noreturn]] inline void fail_wrong_type(const std::string& path, std::string_view expected,
                                         const json& got) {
  throw config_error(config_error_code::wrong_type, path,
                     "expected " + std::string{expected} + ", got " + describe_json(got));
}

[[noreturn]] inline void fail_bad_value(const std::string& path, const std::string& message) {
  throw config_error(config_error_code::bad_value, path, message);
}

/// `path` points at the missing member itself.
[[nodiscard]] inline config_error missing_field_error(const std::string& path,
                                                      std::string_view field) {
  return config_error(config_error_code::bad_value, path,
                      "required field '" + std::string{field} + "' is missing");
}

[[noreturn]] inline void fail_not_supported_yet(const std::string& path, std::string_view field) {
  throw config_error(config_error_code::unknown_field, path,
                     "field '" + std::string{field} +
                         "' is not supported by this build of servekit yet");
}

[[noreturn]] inline void fail_unknown_field(const std::string& path, std::string_view field,
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

inline void expect_object(const json& value, const std::string& path,
                          std::string_view what = "an object") {
  if (!value.is_object()) {
    fail_wrong_type(path, what, value);
  }
}

inline void expect_array(const json& value, const std::string& path) {
  if (!value.is_array()) {
    fail_wrong_type(path, "an array", value);
  }
}

/// Booleans must be JSON true/false; "true" and 1 are refused.
[[nodiscard]] inline bool read_bool(const json& value, const std::string& path) {
  if (!value.is_boolean()) {
    fail_wrong_type(path, "a boolean (true or false)", value);
  }
  return value.get<bool>();
}

[[nodiscard]] inline std::string read_string(const json& value, const std::string& path) {
  if (!value.is_string()) {
    fail_wrong_type(path, "a string", value);
  }
  return value.get<std::string>();
}

/// Reads each element with `read_element(element, element_path)`.
template <class Element, class ReadElement>
[[nodiscard]] std::vector<Element> read_array(const json& value, const std::string& path,
                                              ReadElement read_element) {
  expect_array(value, path);
  std::vector<Element> out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    out.push_back(read_element(value[i], element_path(path, i)));
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// Integers: JSON numbers or decimal strings (protobuf writes 64-bit integers as strings)

inline constexpr std::string_view integer_expectation =
    "an integer (a JSON number or a decimal string such as \"100\")";

/// An integer read from JSON before it is narrowed to its field's type.
struct integer_value {
  bool negative = false;
  std::uint64_t magnitude = 0;
  bool beyond_64_bits = false; ///< too large for any 64-bit type
};

/// The protobuf name of a field's integer type, for messages.
template <class T>
[[nodiscard]] constexpr std::string_view integer_type_name() noexcept {
  if constexpr (std::is_same_v<T, std::int32_t>) {
    return "int32";
  } else if constexpr (std::is_same_v<T, std::uint32_t>) {
    return "uint32";
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return "int64";
  } else {
    static_assert(std::is_same_v<T, std::uint64_t>, "config fields are (u)int32 or (u)int64");
    return "uint64";
  }
}

[[nodiscard]] inline bool is_decimal_digits(std::string_view text) noexcept {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// 100, 1e2 and 100.0 are the integer 100; 1.5 is refused.
[[nodiscard]] inline integer_value integer_from_number(double number, const json& value,
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
[[nodiscard]] inline integer_value integer_from_string(const json& value, const std::string& path) {
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

[[nodiscard]] inline integer_value read_integer_value(const json& value, const std::string& path) {
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

/// Checks that `v` fits `T` (no negative value for unsigned types) and converts it.
template <class T>
[[nodiscard]] T narrow_integer(const integer_value& v, const json& value, const std::string& path) {
  using limits = std::numeric_limits<T>;
  const std::string type_name{integer_type_name<T>()};
  if constexpr (std::is_unsigned_v<T>) {
    if (v.negative) {
      fail_bad_value(path, "expected a non-negative integer (" + type_name + "), got " +
                               describe_json(value));
    }
  }
  const std::uint64_t largest_magnitude =
      static_cast<std::uint64_t>(limits::max()) + (v.negative ? 1U : 0U);
  if (v.beyond_64_bits || v.magnitude > largest_magnitude) {
    fail_bad_value(path, "out of range for " + type_name +
                             " (allowed: " + std::to_string(limits::min()) + " to " +
                             std::to_string(limits::max()) + "), got " + describe_json(value));
  }
  if constexpr (std::is_signed_v<T>) {
    if (v.negative) {
      return static_cast<T>(-static_cast<std::int64_t>(v.magnitude - 1) - 1);
    }
  }
  return static_cast<T>(v.magnitude);
}

/// An integer field of protobuf type `T` (int32, uint32, int64 or uint64).
template <class T>
[[nodiscard]] T read_integer(const json& value, const std::string& path) {
  return narrow_integer<T>(read_integer_value(value, path), value, path);
}

// ------------------------------------------------------------------------------------------
// Floats: JSON numbers, or the strings protobuf's JSON mapping also accepts

inline constexpr std::string_view float_expectation =
    "a number (a JSON number, a decimal string such as \"0.5\", \"NaN\", \"Infinity\" or "
    "\"-Infinity\")";

/// The number in a string such as "0.5" (protobuf accepts floats written as strings).
[[nodiscard]] inline double float_from_string(const json& value, const std::string& path) {
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

/// A field of protobuf type `float`. Finite values beyond float's range are refused rather than
/// silently turned into infinities.
[[nodiscard]] inline float read_float(const json& value, const std::string& path) {
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

// ------------------------------------------------------------------------------------------
// Plain values by C++ type, and members read through member pointers

template <class T>
inline constexpr bool is_vector_v = false;
template <class T, class Allocator>
inline constexpr bool is_vector_v<std::vector<T, Allocator>> = true;

template <class T>
inline constexpr bool always_false_v = false;

/// Reads a bool, an integer, a float, a string, or an array of those.
template <class T>
[[nodiscard]] T read_value(const json& value, const std::string& path) {
  if constexpr (std::is_same_v<T, bool>) {
    return read_bool(value, path);
  } else if constexpr (std::is_same_v<T, float>) {
    return read_float(value, path);
  } else if constexpr (std::is_integral_v<T>) {
    return read_integer<T>(value, path);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return read_string(value, path);
  } else if constexpr (is_vector_v<T>) {
    using element = typename T::value_type;
    return read_array<element>(value, path, read_value<element>);
  } else {
    static_assert(always_false_v<T>, "read_value: no generic JSON reader for this type");
  }
}

template <class MemberPointer>
struct member_pointer_traits;
template <class Owner, class Value>
struct member_pointer_traits<Value Owner::*> {
  using owner_type = Owner;
  using value_type = Value;
};

template <auto Member>
using member_owner_t = typename member_pointer_traits<decltype(Member)>::owner_type;
template <auto Member>
using member_value_t = typename member_pointer_traits<decltype(Member)>::value_type;

/// A field reader that stores a plain value into `out.*Member`.
template <auto Member>
void read_member(const json& value, const std::string& path, member_owner_t<Member>& out) {
  out.*Member = read_value<member_value_t<Member>>(value, path);
}

/// Refuses an object that sets more than one member of the protobuf oneof `oneof` (protobuf's
/// own parser does too); the error points at the second member in the order of `members`.
inline void check_oneof(const json& object, const std::string& path, std::string_view oneof,
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

// ------------------------------------------------------------------------------------------
// Messages: a table of known fields, plus the Triton fields not supported yet

/// Reads one field of a message (a JSON object) into `out`.
template <class Message>
struct field_reader {
  std::string_view name;
  void (*read)(const json& value, const std::string& path, Message& out);
};

template <class Message>
[[nodiscard]] std::vector<std::string_view>
field_names(std::span<const field_reader<Message>> fields) {
  std::vector<std::string_view> names;
  names.reserve(fields.size());
  for (const auto& field : fields) {
    names.push_back(field.name);
  }
  return names;
}

/// Reads every member of `object` with its reader from `fields`. A member named in
/// `not_yet_supported` is refused as such; any other unknown member is refused as unknown.
template <class Message>
void read_fields(const json& object, const std::string& path, Message& out,
                 std::type_identity_t<std::span<const field_reader<Message>>> fields,
                 std::span<const std::string_view> not_yet_supported = {}) {
  expect_object(object, path);
  for (const auto& member : object.items()) {
    // Not a structured binding: clang < 16 cannot capture one in the lambda below.
    const std::string& key = member.key();
    const std::string field_path = member_path(path, key);
    const auto known = std::find_if(fields.begin(), fields.end(),
                                    [&](const field_reader<Message>& f) { return f.name == key; });
    if (known != fields.end()) {
      known->read(member.value(), field_path, out);
      continue;
    }
    if (std::find(not_yet_supported.begin(), not_yet_supported.end(), key) !=
        not_yet_supported.end()) {
      fail_not_supported_yet(field_path, key);
    }
    fail_unknown_field(field_path, key, field_names(fields));
  }
}

inline void require_fields(const json& object, const std::string& path,
                           std::initializer_list<std::string_view> required) {
  for (const auto name : required) {
    if (!object.contains(std::string{name})) {
      throw missing_field_error(member_path(path, name), name);
    }
  }
}

// ------------------------------------------------------------------------------------------
// Enums by their Triton names

template <class Enum>
struct enum_name {
  Enum value;
  std::string_view name;
};

inline constexpr enum_name<timeout_action> timeout_action_names[] = {
    {timeout_action::reject, "REJECT"},
    {timeout_action::delay, "DELAY"},
};

inline constexpr enum_name<instance_group_kind> instance_group_kind_names[] = {
    {instance_group_kind::kind_auto, "KIND_AUTO"},
    {instance_group_kind::kind_gpu, "KIND_GPU"},
    {instance_group_kind::kind_cpu, "KIND_CPU"},
    {instance_group_kind::kind_model, "KIND_MODEL"},
};

inline constexpr enum_name<control_kind> control_kind_names[] = {
    {control_kind::sequence_start, "CONTROL_SEQUENCE_START"},
    {control_kind::sequence_ready, "CONTROL_SEQUENCE_READY"},
    {control_kind::sequence_end, "CONTROL_SEQUENCE_END"},
    {control_kind::sequence_corrid, "CONTROL_SEQUENCE_CORRID"},
};

template <class Enum, std::size_t N>
[[nodiscard]] std::string enum_spellings(const enum_name<Enum> (&names)[N]) {
  std::vector<std::string_view> spellings;
  for (const auto& entry : names) {
    spellings.push_back(entry.name);
  }
  return join_names(spellings);
}

/// Triton writes enums by name ("KIND_CPU"); numbers are refused.
template <class Enum, std::size_t N>
[[nodiscard]] Enum read_enum(const json& value, const std::string& path,
                             const enum_name<Enum> (&names)[N]) {
  if (!value.is_string()) {
    fail_wrong_type(path, "a string (one of " + enum_spellings(names) + ")", value);
  }
  const auto& text = value.get_ref<const std::string&>();
  for (const auto& entry : names) {
    if (entry.name == text) {
      return entry.value;
    }
  }
  fail_bad_value(path, "expected one of " + enum_spellings(names) + ", got " + quoted_json(value));
}

/// The Triton name of `value`; "INVALID" for a value outside the enum.
template <class Enum, std::size_t N>
[[nodiscard]] std::string enum_spelling(Enum value, const enum_name<Enum> (&names)[N]) {
  for (const auto& entry : names) {
    if (entry.value == value) {
      return std::string{entry.name};
    }
  }
  return "INVALID";
}

[[nodiscard]] inline std::string data_type_spellings() {
  std::vector<std::string_view> spellings;
  for (const auto& info : data_type_table) {
    spellings.push_back(info.config_name);
  }
  return join_names(spellings);
}

/// "TYPE_FP32" or "FP32" ("TYPE_STRING" or "BYTES" for BYTES).
[[nodiscard]] inline data_type read_data_type(const json& value, const std::string& path) {
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

// ------------------------------------------------------------------------------------------
// input[] and output[] (ModelInput / ModelOutput)

/// A dimension: >= 1, or -1 for a variable size.
[[nodiscard]] inline std::int64_t read_dim(const json& value, const std::string& path) {
  const auto dim = read_integer<std::int64_t>(value, path);
  if (dim < 1 && dim != shape::variable) {
    fail_bad_value(path,
                   "dimension must be >= 1, or -1 for a variable size; got " + std::to_string(dim));
  }
  return dim;
}

[[nodiscard]] inline shape read_dims(const json& value, const std::string& path) {
  const auto dims = read_array<std::int64_t>(value, path, read_dim);
  const auto result = shape::from(dims);
  if (!result) {
    fail_bad_value(path, "at most " + std::to_string(shape::max_rank) +
                             " dimensions are supported, got " + std::to_string(dims.size()));
  }
  return *result;
}

/// A field reader for a data_type member ("TYPE_FP32").
template <auto Member>
void read_data_type_member(const json& value, const std::string& path,
                           member_owner_t<Member>& out) {
  out.*Member = read_data_type(value, path);
}

/// A field reader for a shape member ([1, -1]).
template <auto Member>
void read_dims_member(const json& value, const std::string& path, member_owner_t<Member>& out) {
  out.*Member = read_dims(value, path);
}

inline void read_tensor_name(const json& value, const std::string& path, tensor_config& out) {
  out.name = read_string(value, path);
  if (out.name.empty()) {
    fail_bad_value(path, "tensor name must not be empty");
  }
}

inline void read_tensor_data_type(const json& value, const std::string& path, tensor_config& out) {
  out.type = read_data_type(value, path);
}

inline void read_tensor_dims(const json& value, const std::string& path, tensor_config& out) {
  out.dims = read_dims(value, path);
}

/// Triton's ModelInput.format: only FORMAT_NONE (the default) is accepted; it changes nothing.
inline void read_input_format(const json& value, const std::string& path, tensor_config&) {
  if (!value.is_string()) {
    fail_wrong_type(path, "a string (FORMAT_NONE)", value);
  }
  if (value.get_ref<const std::string&>() != "FORMAT_NONE") {
    fail_bad_value(path, "only FORMAT_NONE is supported by this build of servekit yet, got " +
                             quoted_json(value));
  }
}

[[nodiscard]] inline tensor_config
read_tensor(const json& value, const std::string& path,
            std::span<const field_reader<tensor_config>> fields,
            std::span<const std::string_view> not_yet_supported) {
  tensor_config out;
  read_fields(value, path, out, fields, not_yet_supported);
  require_fields(value, path, {"name", "data_type", "dims"});
  return out;
}

[[nodiscard]] inline tensor_config read_input(const json& value, const std::string& path) {
  static constexpr field_reader<tensor_config> fields[] = {
      {"name", read_tensor_name},
      {"data_type", read_tensor_data_type},
      {"format", read_input_format},
      {"dims", read_tensor_dims},
      {"is_shape_tensor", read_member<&tensor_config::is_shape_tensor>},
      {"allow_ragged_batch", read_member<&tensor_config::allow_ragged_batch>},
      {"optional", read_member<&tensor_config::optional>},
  };
  static constexpr std::string_view not_yet_supported[] = {"reshape", "is_non_linear_format_io"};
  return read_tensor(value, path, fields, not_yet_supported);
}

/// Outputs also take allow_ragged_batch and optional (servekit's tensor_config has them).
[[nodiscard]] inline tensor_config read_output(const json& value, const std::string& path) {
  static constexpr field_reader<tensor_config> fields[] = {
      {"name", read_tensor_name},
      {"data_type", read_tensor_data_type},
      {"dims", read_tensor_dims},
      {"is_shape_tensor", read_member<&tensor_config::is_shape_tensor>},
      {"allow_ragged_batch", read_member<&tensor_config::allow_ragged_batch>},
      {"optional", read_member<&tensor_config::optional>},
  };
  static constexpr std::string_view not_yet_supported[] = {"reshape", "label_filename",
                                                           "is_non_linear_format_io"};
  return read_tensor(value, path, fields, not_yet_supported);
}

/// Refuses a second tensor with the same name; the error points at the second one's name.
inline void check_unique_tensor_names(const std::vector<tensor_config>& tensors,
                                      const std::string& path, std::string_view role) {
  std::map<std::string_view, std::size_t> first_index;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto [it, inserted] = first_index.emplace(tensors[i].name, i);
    if (!inserted) {
      fail_bad_value(member_path(element_path(path, i), "name"),
                     "duplicate " + std::string{role} + " name '" + tensors[i].name +
                         "' (first declared at " + element_path(path, it->second) + ")");
    }
  }
}

inline void read_inputs(const json& value, const std::string& path, model_options& out) {
  out.input = read_array<tensor_config>(value, path, read_input);
  check_unique_tensor_names(out.input, path, "input");
}

inline void read_outputs(const json& value, const std::string& path, model_options& out) {
  out.output = read_array<tensor_config>(value, path, read_output);
  check_unique_tensor_names(out.output, path, "output");
}

// ------------------------------------------------------------------------------------------
// dynamic_batching (ModelDynamicBatching, ModelQueuePolicy)

inline void read_timeout_action(const json& value, const std::string& path, queue_policy& out) {
  out.timeout_action = read_enum(value, path, timeout_action_names);
}

[[nodiscard]] inline queue_policy read_queue_policy(const json& value, const std::string& path) {
  static constexpr field_reader<queue_policy> fields[] = {
      {"timeout_action", read_timeout_action},
      {"default_timeout_microseconds", read_member<&queue_policy::default_timeout_microseconds>},
      {"allow_timeout_override", read_member<&queue_policy::allow_timeout_override>},
      {"max_queue_size", read_member<&queue_policy::max_queue_size>},
  };
  queue_policy out;
  read_fields(value, path, out, fields);
  return out;
}

/// A map<uint64, ...> key as protobuf writes it: decimal digits, no sign, no leading zero.
[[nodiscard]] inline std::optional<std::uint64_t> parse_priority_level_key(std::string_view key) {
  if (!is_decimal_digits(key) || (key.size() > 1 && key.front() == '0')) {
    return std::nullopt;
  }
  std::uint64_t level = 0;
  const auto result = std::from_chars(key.data(), key.data() + key.size(), level);
  if (result.ec != std::errc{}) {
    return std::nullopt;
  }
  return level;
}

/// `{"1": {...}, "2": {...}}`: levels are checked against priority_levels by validate().
inline void read_priority_queue_policy(const json& value, const std::string& path,
                                       dynamic_batching_options& out) {
  expect_object(value, path, "an object keyed by priority level (e.g. {\"1\": {...}})");
  std::map<std::uint64_t, queue_policy> policies;
  for (const auto& [key, policy] : value.items()) {
    const std::string policy_path = member_path(path, key);
    const auto level = parse_priority_level_key(key);
    if (!level) {
      fail_bad_value(policy_path, "priority level key must be a decimal integer such as \"1\" "
                                  "(no sign, no leading zeros), got '" +
                                      key + "'");
    }
    policies.emplace(*level, read_queue_policy(policy, policy_path));
  }
  out.priority.priority_queue_policy = std::move(policies);
}

inline void read_default_queue_policy(const json& value, const std::string& path,
                                      dynamic_batching_options& out) {
  out.priority.default_queue_policy = read_queue_policy(value, path);
}

/// A field reader for a plain member of `dynamic_batching_options::priority`.
template <auto Member>
void read_priority_member(const json& value, const std::string& path,
                          dynamic_batching_options& out) {
  out.priority.*Member = read_value<member_value_t<Member>>(value, path);
}

[[nodiscard]] inline dynamic_batching_options read_dynamic_batching(const json& value,
                                                                    const std::string& path) {
  using options = dynamic_batching_options;
  static constexpr field_reader<options> fields[] = {
      {"preferred_batch_size", read_member<&options::preferred_batch_size>},
      {"max_queue_delay_microseconds", read_member<&options::max_queue_delay_microseconds>},
      {"preserve_ordering", read_member<&options::preserve_ordering>},
      {"priority_levels", read_priority_member<&priority_options::priority_levels>},
      {"default_priority_level", read_priority_member<&priority_options::default_priority_level>},
      {"default_queue_policy", read_default_queue_policy},
      {"priority_queue_policy", read_priority_queue_policy},
  };
  options out;
  read_fields(value, path, out, fields);
  return out;
}

// ------------------------------------------------------------------------------------------
// sequence_batching (ModelSequenceBatching and its nested messages). Rules that span fields
// (exactly two false/true entries, names that must not collide, ...) are validate()'s.

inline void read_control_kind(const json& value, const std::string& path, sequence_control& out) {
  out.kind = read_enum(value, path, control_kind_names);
}

[[nodiscard]] inline sequence_control read_sequence_control(const json& value,
                                                            const std::string& path) {
  static constexpr field_reader<sequence_control> fields[] = {
      {"kind", read_control_kind},
      {"int32_false_true", read_member<&sequence_control::int32_false_true>},
      {"fp32_false_true", read_member<&sequence_control::fp32_false_true>},
      {"bool_false_true", read_member<&sequence_control::bool_false_true>},
      {"data_type", read_data_type_member<&sequence_control::data_type>},
  };
  sequence_control out;
  read_fields(value, path, out, fields);
  return out;
}

inline void read_controls(const json& value, const std::string& path, control_input& out) {
  out.control = read_array<sequence_control>(value, path, read_sequence_control);
}

[[nodiscard]] inline control_input read_control_input(const json& value, const std::string& path) {
  static constexpr field_reader<control_input> fields[] = {
      {"name", read_member<&control_input::name>},
      {"control", read_controls},
  };
  control_input out;
  read_fields(value, path, out, fields);
  return out;
}

/// Protobuf sets the oneof member `zero_data` whatever its value, and Triton then uses zeros even
/// for `false`; servekit refuses `false` rather than guess what was meant.
inline void read_zero_data(const json& value, const std::string& path, initial_state_options& out) {
  out.zero_data = read_bool(value, path);
  if (!out.zero_data) {
    fail_bad_value(path, "'zero_data' must be true when present (Triton uses zeros whenever the "
                         "field is set, even to false); write true, or leave it out and set "
                         "'data_file'");
  }
}

[[nodiscard]] inline initial_state_options read_initial_state(const json& value,
                                                              const std::string& path) {
  using options = initial_state_options;
  static constexpr field_reader<options> fields[] = {
      {"data_type", read_data_type_member<&options::data_type>},
      {"dims", read_dims_member<&options::dims>},
      {"name", read_member<&options::name>},
      {"zero_data", read_zero_data},
      {"data_file", read_member<&options::data_file>},
  };
  expect_object(value, path);
  check_oneof(value, path, "state_data", {"zero_data", "data_file"});
  options out;
  read_fields(value, path, out, fields);
  return out;
}

inline void read_initial_states(const json& value, const std::string& path, state_options& out) {
  out.initial_state = read_array<initial_state_options>(value, path, read_initial_state);
}

[[nodiscard]] inline state_options read_state(const json& value, const std::string& path) {
  using options = state_options;
  static constexpr field_reader<options> fields[] = {
      {"input_name", read_member<&options::input_name>},
      {"output_name", read_member<&options::output_name>},
      {"data_type", read_data_type_member<&options::data_type>},
      {"dims", read_dims_member<&options::dims>},
      {"initial_state", read_initial_states},
      {"use_same_buffer_for_input_output", read_member<&options::use_same_buffer_for_input_output>},
      {"use_growable_memory", read_member<&options::use_growable_memory>},
  };
  options out;
  read_fields(value, path, out, fields);
  return out;
}

inline void read_direct_strategy(const json& value, const std::string& path,
                                 sequence_batching_options& out) {
  using options = direct_strategy_options;
  static constexpr field_reader<options> fields[] = {
      {"max_queue_delay_microseconds", read_member<&options::max_queue_delay_microseconds>},
      {"minimum_slot_utilization", read_member<&options::minimum_slot_utilization>},
  };
  out.strategy = sequence_strategy::direct;
  read_fields(value, path, out.direct, fields);
}

inline void read_oldest_strategy(const json& value, const std::string& path,
                                 sequence_batching_options& out) {
  using options = oldest_strategy_options;
  static constexpr field_reader<options> fields[] = {
      {"max_candidate_sequences", read_member<&options::max_candidate_sequences>},
      {"preferred_batch_size", read_member<&options::preferred_batch_size>},
      {"max_queue_delay_microseconds", read_member<&options::max_queue_delay_microseconds>},
      {"preserve_ordering", read_member<&options::preserve_ordering>},
  };
  out.strategy = sequence_strategy::oldest;
  read_fields(value, path, out.oldest, fields);
}

inline void read_control_inputs(const json& value, const std::string& path,
                                sequence_batching_options& out) {
  out.control_input = read_array<control_input>(value, path, read_control_input);
}

inline void read_states(const json& value, const std::string& path,
                        sequence_batching_options& out) {
  out.state = read_array<state_options>(value, path, read_state);
}

/// Neither `direct` nor `oldest`: direct, Triton's default strategy.
[[nodiscard]] inline sequence_batching_options read_sequence_batching(const json& value,
                                                                      const std::string& path) {
  using options = sequence_batching_options;
  static constexpr field_reader<options> fields[] = {
      {"max_sequence_idle_microseconds", read_member<&options::max_sequence_idle_microseconds>},
      {"direct", read_direct_strategy},
      {"oldest", read_oldest_strategy},
      {"control_input", read_control_inputs},
      {"state", read_states},
  };
  static constexpr std::string_view not_yet_supported[] = {"iterative_sequence"};
  expect_object(value, path);
  check_oneof(value, path, "strategy_choice", {"direct", "oldest"});
  options out;
  read_fields(value, path, out, fields, not_yet_supported);
  return out;
}

// ------------------------------------------------------------------------------------------
// instance_group[] (ModelInstanceGroup)

inline void read_instance_group_kind(const json& value, const std::string& path,
                                     instance_group_options& out) {
  out.kind = read_enum(value, path, instance_group_kind_names);
}

inline void read_instance_count(const json& value, const std::string& path,
                                instance_group_options& out) {
  out.count = read_integer<std::int32_t>(value, path);
  if (out.count < 1) {
    fail_bad_value(path,
                   "instance group count must be at least 1, got " + std::to_string(out.count));
  }
}

[[nodiscard]] inline std::int32_t read_gpu_id(const json& value, const std::string& path) {
  const auto id = read_integer<std::int32_t>(value, path);
  if (id < 0) {
    fail_bad_value(path, "GPU id must be non-negative, got " + std::to_string(id));
  }
  return id;
}

inline void read_instance_gpus(const json& value, const std::string& path,
                               instance_group_options& out) {
  out.gpus = read_array<std::int32_t>(value, path, read_gpu_id);
}

/// Triton: KIND_CPU and KIND_MODEL groups may not list gpus.
inline void check_gpus_allowed(const instance_group_options& group, const std::string& path) {
  const bool may_list_gpus =
      group.kind == instance_group_kind::kind_auto || group.kind == instance_group_kind::kind_gpu;
  if (!group.gpus.empty() && !may_list_gpus) {
    fail_bad_value(member_path(path, "gpus"),
                   "an instance group of kind " +
                       enum_spelling(group.kind, instance_group_kind_names) +
                       " must not list gpus (only KIND_AUTO and KIND_GPU groups may)");
  }
}

// instance_group[].rate_limiter (ModelRateLimiter)

inline void read_resource_name(const json& value, const std::string& path,
                               rate_limiter_resource& out) {
  out.name = read_string(value, path);
  if (out.name.empty()) {
    fail_bad_value(path, "rate limiter resource name must not be empty");
  }
}

[[nodiscard]] inline rate_limiter_resource read_rate_limiter_resource(const json& value,
                                                                      const std::string& path) {
  static constexpr field_reader<rate_limiter_resource> fields[] = {
      {"name", read_resource_name},
      {"global", read_member<&rate_limiter_resource::global>},
      {"count", read_member<&rate_limiter_resource::count>},
  };
  rate_limiter_resource out;
  read_fields(value, path, out, fields);
  require_fields(value, path, {"name"});
  return out;
}

/// A resource named twice in one group would be counted twice by Triton's pools (the later
/// entry silently wins); refused so the intent is explicit.
inline void read_rate_limiter_resources(const json& value, const std::string& path,
                                        rate_limiter_options& out) {
  out.resources = read_array<rate_limiter_resource>(value, path, read_rate_limiter_resource);
  std::map<std::string_view, std::size_t> first_index;
  for (std::size_t i = 0; i < out.resources.size(); ++i) {
    const auto [it, inserted] = first_index.emplace(out.resources[i].name, i);
    if (!inserted) {
      fail_bad_value(member_path(element_path(path, i), "name"),
                     "duplicate rate limiter resource '" + out.resources[i].name +
                         "' (first listed at " + element_path(path, it->second) + ")");
    }
  }
}

[[nodiscard]] inline rate_limiter_options read_rate_limiter(const json& value,
                                                            const std::string& path) {
  static constexpr field_reader<rate_limiter_options> fields[] = {
      {"resources", read_rate_limiter_resources},
      {"priority", read_member<&rate_limiter_options::priority>},
  };
  rate_limiter_options out;
  read_fields(value, path, out, fields);
  return out;
}

inline void read_instance_rate_limiter(const json& value, const std::string& path,
                                       instance_group_options& out) {
  out.rate_limiter = read_rate_limiter(value, path);
}

[[nodiscard]] inline instance_group_options read_instance_group(const json& value,
                                                                const std::string& path) {
  static constexpr field_reader<instance_group_options> fields[] = {
      {"name", read_member<&instance_group_options::name>},
      {"kind", read_instance_group_kind},
      {"count", read_instance_count},
      {"gpus", read_instance_gpus},
      {"rate_limiter", read_instance_rate_limiter},
  };
  static constexpr std::string_view not_yet_supported[] = {"secondary_devices", "profile",
                                                           "passive", "host_policy"};
  instance_group_options out;
  read_fields(value, path, out, fields, not_yet_supported);
  check_gpus_allowed(out, path);
  return out;
}

inline void read_instance_groups(const json& value, const std::string& path, model_options& out) {
  out.instance_group = read_array<instance_group_options>(value, path, read_instance_group);
}

// ------------------------------------------------------------------------------------------
// ensemble_scheduling (ModelEnsembling). Only what the config alone decides is checked here;
// the rules that need the composing models (every input mapped, types agreeing, no cycles) are
// the ensemble's to check when it is built.

/// Triton's platform for ensembles.
inline constexpr std::string_view ensemble_platform = "ensemble";

inline void read_ensemble_model_name(const json& value, const std::string& path,
                                     ensemble_step_options& out) {
  out.model_name = read_string(value, path);
  if (out.model_name.empty()) {
    fail_bad_value(path, "ensemble step model_name must not be empty");
  }
}

/// -1 (the latest version) or a version >= 1; Triton writes int64 as a JSON number or a string.
inline void read_ensemble_model_version(const json& value, const std::string& path,
                                        ensemble_step_options& out) {
  out.model_version = read_integer<std::int64_t>(value, path);
  if (out.model_version < 1 && out.model_version != -1) {
    fail_bad_value(path, "ensemble step model_version must be -1 (the latest version) or a "
                         "version >= 1, got " +
                             std::to_string(out.model_version));
  }
}

/// Triton reserves `model_namespace`; only its default, the empty string, is accepted.
inline void read_ensemble_model_namespace(const json& value, const std::string& path,
                                          ensemble_step_options&) {
  if (!read_string(value, path).empty()) {
    fail_bad_value(path, "'model_namespace' is reserved by Triton and must be empty, got " +
                             quoted_json(value));
  }
}

/// `{"model tensor": "ensemble tensor", ...}` (protobuf's map<string, string>).
template <auto Member>
void read_tensor_map_member(const json& value, const std::string& path,
                            member_owner_t<Member>& out) {
  expect_object(value, path, "an object of {\"model tensor\": \"ensemble tensor\"}");
  std::map<std::string, std::string> names;
  for (const auto& [key, name] : value.items()) {
    names.emplace(key, read_string(name, member_path(path, key)));
  }
  out.*Member = std::move(names);
}

[[nodiscard]] inline ensemble_step_options read_ensemble_step(const json& value,
                                                              const std::string& path) {
  using options = ensemble_step_options;
  static constexpr field_reader<options> fields[] = {
      {"model_name", read_ensemble_model_name},
      {"model_version", read_ensemble_model_version},
      {"input_map", read_tensor_map_member<&options::input_map>},
      {"output_map", read_tensor_map_member<&options::output_map>},
      {"model_namespace", read_ensemble_model_namespace},
  };
  options out;
  read_fields(value, path, out, fields);
  require_fields(value, path, {"model_name"});
  return out;
}

inline void read_ensemble_steps(const json& value, const std::string& path,
                                ensemble_scheduling_options& out) {
  out.step = read_array<ensemble_step_options>(value, path, read_ensemble_step);
}

[[nodiscard]] inline ensemble_scheduling_options read_ensemble_scheduling(const json& value,
                                                                          const std::string& path) {
  using options = ensemble_scheduling_options;
  static constexpr field_reader<options> fields[] = {
      {"step", read_ensemble_steps},
      {"max_inflight_requests", read_member<&options::max_inflight_requests>},
  };
  options out;
  read_fields(value, path, out, fields);
  if (out.step.empty()) {
    const std::string missing = value.contains("step") ? "" : "required field 'step' is missing; ";
    fail_bad_value(member_path(path, "step"),
                   missing + "ensemble_scheduling needs at least one step");
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// model_transaction_policy (ModelTransactionPolicy) and response_cache (ModelResponseCache)

[[nodiscard]] inline model_transaction_policy_options
read_model_transaction_policy(const json& value, const std::string& path) {
  using options = model_transaction_policy_options;
  static constexpr field_reader<options> fields[] = {
      {"decoupled", read_member<&options::decoupled>},
      {"final_response_timeout_microseconds",
       read_member<&options::final_response_timeout_microseconds>},
  };
  options out;
  read_fields(value, path, out, fields);
  return out;
}

inline void read_model_transaction_policy_field(const json& value, const std::string& path,
                                                model_options& out) {
  out.model_transaction_policy = read_model_transaction_policy(value, path);
}

inline void read_response_cache_field(const json& value, const std::string& path,
                                      model_options& out) {
  static constexpr field_reader<response_cache_options> fields[] = {
      {"enable", read_member<&response_cache_options::enable>},
  };
  response_cache_options cache;
  read_fields(value, path, cache, fields);
  out.response_cache = cache;
}

// ------------------------------------------------------------------------------------------
// model_warmup[] (ModelWarmup)

inline void read_warmup_data_type(const json& value, const std::string& path,
                                  warmup_input_options& out) {
  out.type = read_data_type(value, path);
}

/// A warmup input has a concrete shape: every dimension >= 0, no -1 (the batch dimension is
/// left out; batch_size adds it).
inline void read_warmup_dims(const json& value, const std::string& path,
                             warmup_input_options& out) {
  out.dims = read_array<std::int64_t>(value, path, [](const json& dim, const std::string& at) {
    const auto size = read_integer<std::int64_t>(dim, at);
    if (size < 0) {
      fail_bad_value(at, "warmup dimensions must be >= 0 (a warmup input has a concrete shape; "
                         "-1 is not allowed), got " +
                             std::to_string(size));
    }
    return size;
  });
  if (out.dims.size() > shape::max_rank) {
    fail_bad_value(path, "at most " + std::to_string(shape::max_rank) +
                             " dimensions are supported, got " + std::to_string(out.dims.size()));
  }
}

/// zero_data and random_data are protobuf bools; only `true` says what it means.
[[nodiscard]] inline bool read_true_flag(const json& value, const std::string& path,
                                         std::string_view field) {
  if (!read_bool(value, path)) {
    fail_bad_value(path, "'" + std::string{field} +
                             "' must be true when present (it picks the input's data source)");
  }
  return true;
}

inline void read_warmup_zero_data(const json& value, const std::string& path,
                                  warmup_input_options& out) {
  (void)read_true_flag(value, path, "zero_data");
  out.kind = warmup_data_kind::zero_data;
}

inline void read_warmup_random_data(const json& value, const std::string& path,
                                    warmup_input_options& out) {
  (void)read_true_flag(value, path, "random_data");
  out.kind = warmup_data_kind::random_data;
}

/// A file name under `<model>/warmup/`: relative, and never leaving that folder.
inline void read_warmup_input_data_file(const json& value, const std::string& path,
                                        warmup_input_options& out) {
  out.input_data_file = read_string(value, path);
  const std::string& file = out.input_data_file;
  const bool escapes = file.find("..") != std::string::npos;
  if (file.empty() || file.front() == '/' || escapes) {
    fail_bad_value(path, "input_data_file must name a file under the model's warmup/ folder "
                         "(relative, without '..'), got " +
                             quoted_json(value));
  }
  out.kind = warmup_data_kind::input_data_file;
}

[[nodiscard]] inline warmup_input_options read_warmup_input(const json& value,
                                                            const std::string& path) {
  static constexpr field_reader<warmup_input_options> fields[] = {
      {"data_type", read_warmup_data_type},
      {"dims", read_warmup_dims},
      {"zero_data", read_warmup_zero_data},
      {"random_data", read_warmup_random_data},
      {"input_data_file", read_warmup_input_data_file},
  };
  expect_object(value, path);
  check_oneof(value, path, "input_data_type", {"zero_data", "random_data", "input_data_file"});
  warmup_input_options out;
  read_fields(value, path, out, fields);
  require_fields(value, path, {"data_type", "dims"});
  if (!value.contains("zero_data") && !value.contains("random_data") &&
      !value.contains("input_data_file")) {
    fail_bad_value(path, "a warmup input needs its data source: set one of 'zero_data', "
                         "'random_data' or 'input_data_file' (the oneof input_data_type)");
  }
  return out;
}

inline void read_warmup_inputs(const json& value, const std::string& path,
                               model_warmup_options& out) {
  expect_object(value, path, "an object of {\"input name\": {data_type, dims, zero_data|...}}");
  for (const auto& [name, input] : value.items()) {
    out.inputs.emplace(name, read_warmup_input(input, member_path(path, name)));
  }
}

[[nodiscard]] inline model_warmup_options read_model_warmup_sample(const json& value,
                                                                   const std::string& path) {
  using options = model_warmup_options;
  static constexpr field_reader<options> fields[] = {
      {"name", read_member<&options::name>},
      {"batch_size", read_member<&options::batch_size>},
      {"inputs", read_warmup_inputs},
      {"count", read_member<&options::count>},
  };
  options out;
  read_fields(value, path, out, fields);
  return out;
}

inline void read_model_warmup(const json& value, const std::string& path, model_options& out) {
  out.model_warmup = read_array<model_warmup_options>(value, path, read_model_warmup_sample);
}

// ------------------------------------------------------------------------------------------
// version_policy (ModelVersionPolicy): oneof latest / all / specific

inline void read_num_versions(const json& value, const std::string& path,
                              version_policy_options& out) {
  out.num_versions = read_integer<std::uint32_t>(value, path);
  if (out.num_versions == 0) {
    fail_bad_value(path, "num_versions must be at least 1");
  }
}

inline void read_latest_policy(const json& value, const std::string& path,
                               version_policy_options& out) {
  static constexpr field_reader<version_policy_options> fields[] = {
      {"num_versions", read_num_versions},
  };
  out.kind = version_policy_options::kind_type::latest;
  read_fields(value, path, out, fields);
}

inline void read_all_policy(const json& value, const std::string& path,
                            version_policy_options& out) {
  out.kind = version_policy_options::kind_type::all;
  read_fields<version_policy_options>(value, path, out, {});
}

[[nodiscard]] inline std::int64_t read_version_number(const json& value, const std::string& path) {
  const auto version = read_integer<std::int64_t>(value, path);
  if (version < 1) {
    fail_bad_value(path, "a model version must be >= 1, got " + std::to_string(version));
  }
  return version;
}

inline void read_specific_versions(const json& value, const std::string& path,
                                   version_policy_options& out) {
  out.versions = read_array<std::int64_t>(value, path, read_version_number);
  for (std::size_t i = 1; i < out.versions.size(); ++i) {
    const auto first =
        std::find(out.versions.begin(), out.versions.begin() + static_cast<std::ptrdiff_t>(i),
                  out.versions[i]);
    if (first != out.versions.begin() + static_cast<std::ptrdiff_t>(i)) {
      fail_bad_value(element_path(path, i),
                     "version " + std::to_string(out.versions[i]) + " is listed twice");
    }
  }
}

inline void read_specific_policy(const json& value, const std::string& path,
                                 version_policy_options& out) {
  static constexpr field_reader<version_policy_options> fields[] = {
      {"versions", read_specific_versions},
  };
  out.kind = version_policy_options::kind_type::specific;
  read_fields(value, path, out, fields);
  if (out.versions.empty()) {
    fail_bad_value(member_path(path, "versions"),
                   "a 'specific' version policy must list at least one version");
  }
}

/// `{}` (no choice) is Triton's default, the latest version.
inline void read_version_policy(const json& value, const std::string& path, model_options& out) {
  static constexpr field_reader<version_policy_options> fields[] = {
      {"latest", read_latest_policy},
      {"all", read_all_policy},
      {"specific", read_specific_policy},
  };
  expect_object(value, path);
  check_oneof(value, path, "policy_choice", {"latest", "all", "specific"});
  version_policy_options policy;
  read_fields(value, path, policy, fields);
  out.version_policy = std::move(policy);
}

// ------------------------------------------------------------------------------------------
// parameters (map<string, ModelParameter>)

inline void read_string_value(const json& value, const std::string& path, std::string& out) {
  out = read_string(value, path);
}

/// `{"string_value": "..."}`; `{}` is the empty string, as in protobuf.
[[nodiscard]] inline std::string read_parameter(const json& value, const std::string& path) {
  static constexpr field_reader<std::string> fields[] = {{"string_value", read_string_value}};
  expect_object(value, path, "an object {\"string_value\": \"...\"}");
  std::string out;
  read_fields(value, path, out, fields);
  return out;
}

inline void read_parameters(const json& value, const std::string& path, model_options& out) {
  expect_object(value, path, "an object of {\"key\": {\"string_value\": \"...\"}}");
  parameter_map parameters;
  for (const auto& [key, parameter] : value.items()) {
    parameters.emplace(key, read_parameter(parameter, member_path(path, key)));
  }
  out.parameters = std::move(parameters);
}

// ------------------------------------------------------------------------------------------
// ModelConfig top level

inline void read_model_name(const json& value, const std::string& path, model_options& out) {
  out.name = read_string(value, path);
  if (out.name.empty()) {
    fail_bad_value(path, "model name must not be empty");
  }
}

inline void read_model_version(const json& value, const std::string& path, model_options& out) {
  out.version = read_integer<std::int64_t>(value, path);
  if (out.version < 1) {
    fail_bad_value(path, "model version must be >= 1, got " + std::to_string(out.version));
  }
}

inline void read_max_batch_size(const json& value, const std::string& path, model_options& out) {
  const auto size = read_integer<std::int32_t>(value, path);
  if (size < 0) {
    fail_bad_value(path, "'max_batch_size' must be non-negative value");
  }
  out.max_batch_size = size;
}

inline void read_dynamic_batching_field(const json& value, const std::string& path,
                                        model_options& out) {
  out.dynamic_batching = read_dynamic_batching(value, path);
}

inline void read_sequence_batching_field(const json& value, const std::string& path,
                                         model_options& out) {
  out.sequence_batching = read_sequence_batching(value, path);
}

inline void read_ensemble_scheduling_field(const json& value, const std::string& path,
                                           model_options& out) {
  out.ensemble_scheduling = read_ensemble_scheduling(value, path);
}

/// ModelConfig fields servekit refuses by name until it implements them. To add one, write its
/// reader (one small function per message, as above), list it in read_model_config's table and
/// drop it from here.
inline constexpr std::string_view model_config_not_yet_supported[] = {
    "runtime",
    "batch_input",
    "batch_output",
    "optimization",
    "default_model_filename",
    "cc_model_filenames",
    "metric_tags",
    "model_operations",
    "model_repository_agents",
    "model_metrics",
};

/// Triton's rules for ensembles that the config alone decides: `ensemble_scheduling` and
/// `platform: "ensemble"` go together, and an ensemble has no scheduler or instances of its own
/// (its steps run on the composing models').
inline void check_ensemble(const model_options& options) {
  if (!options.ensemble_scheduling) {
    if (options.platform == ensemble_platform) {
      fail_bad_value("/ensemble_scheduling",
                     "an ensemble needs 'ensemble_scheduling' (platform is \"ensemble\")");
    }
    return;
  }
  if (!options.platform.empty() && options.platform != ensemble_platform) {
    fail_bad_value("/platform", "a model with 'ensemble_scheduling' is an ensemble; its platform "
                                "must be \"ensemble\" or left out, got " +
                                    quoted_json(json(options.platform)));
  }
  const auto refuse = [](std::string_view field, std::string_view why) {
    fail_bad_value(member_path("", field), "an ensemble (a model with 'ensemble_scheduling') "
                                           "must not set '" +
                                               std::string{field} + "'; " + std::string{why});
  };
  constexpr std::string_view scheduler_why =
      "its steps are scheduled by the composing models (dynamic_batching, sequence_batching and "
      "ensemble_scheduling are the oneof scheduling_choice)";
  if (options.dynamic_batching) {
    refuse("dynamic_batching", scheduler_why);
  }
  if (options.sequence_batching) {
    refuse("sequence_batching", scheduler_why);
  }
  if (!options.instance_group.empty()) {
    refuse("instance_group", "the composing models have the instances");
  }
  if (!options.model_warmup.empty()) {
    refuse("model_warmup", "the composing models are warmed up themselves");
  }
}

/// Triton's rule: a resource name is either global or per device across a model's groups.
inline void check_rate_limiter_resources(const model_options& options) {
  std::map<std::string_view, bool, std::less<>> global_by_name;
  for (std::size_t g = 0; g < options.instance_group.size(); ++g) {
    const auto& limiter = options.instance_group[g].rate_limiter;
    if (!limiter) {
      continue;
    }
    for (std::size_t r = 0; r < limiter->resources.size(); ++r) {
      const auto& resource = limiter->resources[r];
      const auto [it, inserted] = global_by_name.emplace(resource.name, resource.global);
      if (!inserted && it->second != resource.global) {
        fail_bad_value(element_path(member_path(member_path(element_path("/instance_group", g),
                                                            "rate_limiter"),
                                                "resources"),
                                    r),
                       "Resource \"" + resource.name +
                           "\" is present as both global and device-specific resource in the "
                           "model configuration.");
      }
    }
  }
}

/// Triton's restrictions of the response cache, and the servekit timeout extension's.
inline void check_transaction_policy_and_cache(const model_options& options) {
  const bool decoupled =
      options.model_transaction_policy && options.model_transaction_policy->decoupled;
  if (options.model_transaction_policy &&
      options.model_transaction_policy->final_response_timeout_microseconds != 0 && !decoupled) {
    fail_bad_value("/model_transaction_policy/final_response_timeout_microseconds",
                   "final_response_timeout_microseconds applies to decoupled models only; set "
                   "'decoupled': true or leave it out");
  }
  if (!options.response_cache || !options.response_cache->enable) {
    return;
  }
  check_response_cache_allowed(options.name, decoupled, options.sequence_batching.has_value());
}

/// A warmup sample's batch must fit the model: 1 for a model that does not batch
/// (max_batch_size 0), at most max_batch_size otherwise. batch_size 0 is accepted and the
/// sample skipped, as Triton does. Without max_batch_size the model checks it when built.
inline void check_warmup_batch_sizes(const model_options& options) {
  if (!options.max_batch_size) {
    return;
  }
  const auto largest = static_cast<std::uint32_t>(std::max(*options.max_batch_size, 1));
  for (std::size_t k = 0; k < options.model_warmup.size(); ++k) {
    const auto& sample = options.model_warmup[k];
    if (sample.batch_size > largest) {
      fail_bad_value(member_path(element_path("/model_warmup", k), "batch_size"),
                     "warmup sample '" + sample.name + "' has batch_size " +
                         std::to_string(sample.batch_size) + ", more than the model's " +
                         (*options.max_batch_size == 0
                              ? std::string{"1 (max_batch_size 0: the model does not batch)"}
                              : "max_batch_size " + std::to_string(*options.max_batch_size)));
    }
  }
}

/// The checks that involve more than one field, run after every field is read.
inline void check_model_options(const model_options& options) {
  check_ensemble(options);
  check_rate_limiter_resources(options);
  check_transaction_policy_and_cache(options);
  check_warmup_batch_sizes(options);
  if (options.dynamic_batching && options.sequence_batching) {
    fail_bad_value("/sequence_batching",
                   "'dynamic_batching' and 'sequence_batching' are both set; a model has one "
                   "scheduler (they are the oneof scheduling_choice)");
  }
  // Without max_batch_size the bound comes from the backend; the model checks it then.
  const auto max_batch_size =
      options.max_batch_size.value_or(std::numeric_limits<std::int32_t>::max());
  if (options.dynamic_batching) {
    validate(*options.dynamic_batching, max_batch_size);
  }
  if (options.sequence_batching) {
    validate(*options.sequence_batching, max_batch_size, options.input, options.output);
  }
}

[[nodiscard]] inline model_options read_model_config(const json& value) {
  static constexpr field_reader<model_options> fields[] = {
      {"name", read_model_name},
      {"version", read_model_version},
      {"backend", read_member<&model_options::backend>},
      {"platform", read_member<&model_options::platform>},
      {"max_batch_size", read_max_batch_size},
      {"input", read_inputs},
      {"output", read_outputs},
      {"dynamic_batching", read_dynamic_batching_field},
      {"sequence_batching", read_sequence_batching_field},
      {"ensemble_scheduling", read_ensemble_scheduling_field},
      {"instance_group", read_instance_groups},
      {"model_transaction_policy", read_model_transaction_policy_field},
      {"response_cache", read_response_cache_field},
      {"model_warmup", read_model_warmup},
      {"version_policy", read_version_policy},
      {"parameters", read_parameters},
  };
  const std::string root;
  expect_object(value, root, "an object (a Triton model config)");
  model_options out;
  read_fields(value, root, out, fields, model_config_not_yet_supported);
  check_model_options(out);
  if (out.ensemble_scheduling && out.platform.empty()) {
    out.platform = ensemble_platform; // as Triton, which requires it
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// Saving: Triton's spelling; fields at their default value are left out

[[nodiscard]] inline json write_dims(const shape& dims) {
  json out = json::array();
  for (const auto dim : dims.dims()) {
    out.push_back(dim);
  }
  return out;
}

inline void write_flag_if_set(json& out, const char* key, bool flag) {
  if (flag) {
    out[key] = true;
  }
}

[[nodiscard]] inline json write_tensor(const tensor_config& tensor) {
  json out = json::object();
  out["name"] = tensor.name;
  out["data_type"] = std::string{to_config_string(tensor.type)};
  out["dims"] = write_dims(tensor.dims);
  write_flag_if_set(out, "is_shape_tensor", tensor.is_shape_tensor);
  write_flag_if_set(out, "allow_ragged_batch", tensor.allow_ragged_batch);
  write_flag_if_set(out, "optional", tensor.optional);
  return out;
}

[[nodiscard]] inline json write_tensors(const std::vector<tensor_config>& tensors) {
  json out = json::array();
  for (const auto& tensor : tensors) {
    out.push_back(write_tensor(tensor));
  }
  return out;
}

[[nodiscard]] inline json write_queue_policy(const queue_policy& policy) {
  const queue_policy defaults;
  json out = json::object();
  if (policy.timeout_action != defaults.timeout_action) {
    out["timeout_action"] = enum_spelling(policy.timeout_action, timeout_action_names);
  }
  if (policy.default_timeout_microseconds != defaults.default_timeout_microseconds) {
    out["default_timeout_microseconds"] = policy.default_timeout_microseconds;
  }
  write_flag_if_set(out, "allow_timeout_override", policy.allow_timeout_override);
  if (policy.max_queue_size != defaults.max_queue_size) {
    out["max_queue_size"] = policy.max_queue_size;
  }
  return out;
}

[[nodiscard]] inline json write_dynamic_batching(const dynamic_batching_options& options) {
  const auto& priority = options.priority;
  json out = json::object();
  if (!options.preferred_batch_size.empty()) {
    out["preferred_batch_size"] = options.preferred_batch_size;
  }
  if (options.max_queue_delay_microseconds != 0) {
    out["max_queue_delay_microseconds"] = options.max_queue_delay_microseconds;
  }
  write_flag_if_set(out, "preserve_ordering", options.preserve_ordering);
  if (priority.priority_levels != 0) {
    out["priority_levels"] = priority.priority_levels;
  }
  if (priority.default_priority_level != 0) {
    out["default_priority_level"] = priority.default_priority_level;
  }
  if (priority.default_queue_policy != queue_policy{}) {
    out["default_queue_policy"] = write_queue_policy(priority.default_queue_policy);
  }
  if (!priority.priority_queue_policy.empty()) {
    json policies = json::object();
    for (const auto& [level, policy] : priority.priority_queue_policy) {
      policies[std::to_string(level)] = write_queue_policy(policy);
    }
    out["priority_queue_policy"] = std::move(policies);
  }
  return out;
}

/// Protobuf's JSON spelling: a number, or "NaN", "Infinity", "-Infinity" (JSON has none of them).
[[nodiscard]] inline json write_float(float value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "Infinity" : "-Infinity";
  }
  return value;
}

[[nodiscard]] inline json write_sequence_control(const sequence_control& control) {
  json out = json::object();
  out["kind"] = enum_spelling(control.kind, control_kind_names);
  if (!control.int32_false_true.empty()) {
    out["int32_false_true"] = control.int32_false_true;
  }
  if (!control.fp32_false_true.empty()) {
    json values = json::array();
    for (const float value : control.fp32_false_true) {
      values.push_back(write_float(value));
    }
    out["fp32_false_true"] = std::move(values);
  }
  if (!control.bool_false_true.empty()) {
    out["bool_false_true"] = control.bool_false_true;
  }
  if (control.data_type != data_type::invalid) {
    out["data_type"] = std::string{to_config_string(control.data_type)};
  }
  return out;
}

[[nodiscard]] inline json write_control_input(const control_input& input) {
  json controls = json::array();
  for (const auto& control : input.control) {
    controls.push_back(write_sequence_control(control));
  }
  return json{{"name", input.name}, {"control", std::move(controls)}};
}

[[nodiscard]] inline json write_initial_state(const initial_state_options& initial) {
  json out = json::object();
  if (initial.data_type != data_type::invalid) {
    out["data_type"] = std::string{to_config_string(initial.data_type)};
  }
  out["dims"] = write_dims(initial.dims);
  if (!initial.name.empty()) {
    out["name"] = initial.name;
  }
  write_flag_if_set(out, "zero_data", initial.zero_data);
  if (!initial.data_file.empty()) {
    out["data_file"] = initial.data_file;
  }
  return out;
}

[[nodiscard]] inline json write_state(const state_options& state) {
  json out = json::object();
  out["input_name"] = state.input_name;
  out["output_name"] = state.output_name;
  if (state.data_type != data_type::invalid) {
    out["data_type"] = std::string{to_config_string(state.data_type)};
  }
  out["dims"] = write_dims(state.dims);
  if (!state.initial_state.empty()) {
    json initial = json::array();
    for (const auto& entry : state.initial_state) {
      initial.push_back(write_initial_state(entry));
    }
    out["initial_state"] = std::move(initial);
  }
  write_flag_if_set(out, "use_same_buffer_for_input_output",
                    state.use_same_buffer_for_input_output);
  write_flag_if_set(out, "use_growable_memory", state.use_growable_memory);
  return out;
}

[[nodiscard]] inline json write_oldest_strategy(const oldest_strategy_options& oldest) {
  json out = json::object();
  if (oldest.max_candidate_sequences != 0) {
    out["max_candidate_sequences"] = oldest.max_candidate_sequences;
  }
  if (!oldest.preferred_batch_size.empty()) {
    out["preferred_batch_size"] = oldest.preferred_batch_size;
  }
  if (oldest.max_queue_delay_microseconds != 0) {
    out["max_queue_delay_microseconds"] = oldest.max_queue_delay_microseconds;
  }
  write_flag_if_set(out, "preserve_ordering", oldest.preserve_ordering);
  return out;
}

/// Writes `oldest` whenever it is the strategy, and `direct` only when it has settings (it is
/// the default).
[[nodiscard]] inline json write_sequence_batching(const sequence_batching_options& options) {
  json out = json::object();
  if (options.max_sequence_idle_microseconds !=
      sequence_batching_options{}.max_sequence_idle_microseconds) {
    out["max_sequence_idle_microseconds"] = options.max_sequence_idle_microseconds;
  }
  if (options.strategy == sequence_strategy::oldest) {
    out["oldest"] = write_oldest_strategy(options.oldest);
  } else if (options.direct != direct_strategy_options{}) {
    json direct = json::object();
    if (options.direct.max_queue_delay_microseconds != 0) {
      direct["max_queue_delay_microseconds"] = options.direct.max_queue_delay_microseconds;
    }
    if (options.direct.minimum_slot_utilization != 0.0F) {
      direct["minimum_slot_utilization"] = write_float(options.direct.minimum_slot_utilization);
    }
    out["direct"] = std::move(direct);
  }
  if (!options.control_input.empty()) {
    json inputs = json::array();
    for (const auto& input : options.control_input) {
      inputs.push_back(write_control_input(input));
    }
    out["control_input"] = std::move(inputs);
  }
  if (!options.state.empty()) {
    json states = json::array();
    for (const auto& state : options.state) {
      states.push_back(write_state(state));
    }
    out["state"] = std::move(states);
  }
  return out;
}

[[nodiscard]] inline json write_ensemble_step(const ensemble_step_options& step) {
  json out = json::object();
  out["model_name"] = step.model_name;
  // Always written: left out, protobuf's default 0 would be read by Triton as version 0.
  out["model_version"] = step.model_version;
  if (!step.input_map.empty()) {
    out["input_map"] = step.input_map;
  }
  if (!step.output_map.empty()) {
    out["output_map"] = step.output_map;
  }
  return out;
}

[[nodiscard]] inline json write_ensemble_scheduling(const ensemble_scheduling_options& options) {
  json steps = json::array();
  for (const auto& step : options.step) {
    steps.push_back(write_ensemble_step(step));
  }
  json out = json::object();
  out["step"] = std::move(steps);
  if (options.max_inflight_requests != 0) {
    out["max_inflight_requests"] = options.max_inflight_requests;
  }
  return out;
}

[[nodiscard]] inline json write_rate_limiter(const rate_limiter_options& limiter) {
  json resources = json::array();
  for (const auto& resource : limiter.resources) {
    json entry = json::object();
    entry["name"] = resource.name;
    write_flag_if_set(entry, "global", resource.global);
    entry["count"] = resource.count;
    resources.push_back(std::move(entry));
  }
  json out = json::object();
  if (!limiter.resources.empty()) {
    out["resources"] = std::move(resources);
  }
  if (limiter.priority != rate_limiter_options{}.priority) {
    out["priority"] = limiter.priority;
  }
  return out;
}

[[nodiscard]] inline json write_instance_group(const instance_group_options& group) {
  json out = json::object();
  if (!group.name.empty()) {
    out["name"] = group.name;
  }
  out["kind"] = enum_spelling(group.kind, instance_group_kind_names);
  out["count"] = group.count;
  if (!group.gpus.empty()) {
    out["gpus"] = group.gpus;
  }
  if (group.rate_limiter) {
    out["rate_limiter"] = write_rate_limiter(*group.rate_limiter);
  }
  return out;
}

[[nodiscard]] inline json
write_model_transaction_policy(const model_transaction_policy_options& policy) {
  json out = json::object();
  write_flag_if_set(out, "decoupled", policy.decoupled);
  if (policy.final_response_timeout_microseconds != 0) {
    out["final_response_timeout_microseconds"] = policy.final_response_timeout_microseconds;
  }
  return out;
}

[[nodiscard]] inline json write_response_cache(const response_cache_options& cache) {
  json out = json::object();
  write_flag_if_set(out, "enable", cache.enable);
  return out;
}

inline constexpr enum_name<warmup_data_kind> warmup_data_kind_names[] = {
    {warmup_data_kind::zero_data, "zero_data"},
    {warmup_data_kind::random_data, "random_data"},
    {warmup_data_kind::input_data_file, "input_data_file"},
};

[[nodiscard]] inline json write_warmup_input(const warmup_input_options& input) {
  json out = json::object();
  out["data_type"] = std::string{to_config_string(input.type)};
  out["dims"] = input.dims;
  if (input.kind == warmup_data_kind::input_data_file) {
    out["input_data_file"] = input.input_data_file;
  } else {
    out[enum_spelling(input.kind, warmup_data_kind_names)] = true;
  }
  return out;
}

/// batch_size is always written: left out, Triton would read protobuf's 0 and skip the sample.
[[nodiscard]] inline json write_model_warmup_sample(const model_warmup_options& sample) {
  json out = json::object();
  if (!sample.name.empty()) {
    out["name"] = sample.name;
  }
  out["batch_size"] = sample.batch_size;
  json inputs = json::object();
  for (const auto& [name, input] : sample.inputs) {
    inputs[name] = write_warmup_input(input);
  }
  out["inputs"] = std::move(inputs);
  if (sample.count != 0) {
    out["count"] = sample.count;
  }
  return out;
}

[[nodiscard]] inline json write_version_policy(const version_policy_options& policy) {
  using kind = version_policy_options::kind_type;
  switch (policy.kind) {
  case kind::all:
    return json{{"all", json::object()}};
  case kind::specific:
    return json{{"specific", json{{"versions", policy.versions}}}};
  case kind::latest:
    break;
  }
  return json{{"latest", json{{"num_versions", policy.num_versions}}}};
}

[[nodiscard]] inline json write_parameters(const parameter_map& parameters) {
  json out = json::object();
  for (const auto& [key, value] : parameters) {
    out[key] = json{{"string_value", value}};
  }
  return out;
}

[[nodiscard]] inline json write_model_config(const model_options& options) {
  json out = json::object();
  out["name"] = options.name;
  out["version"] = options.version;
  if (!options.backend.empty()) {
    out["backend"] = options.backend;
  }
  if (!options.platform.empty()) {
    out["platform"] = options.platform;
  } else if (options.ensemble_scheduling) {
    out["platform"] = std::string{ensemble_platform}; // Triton requires it for ensembles
  }
  if (options.max_batch_size) {
    out["max_batch_size"] = *options.max_batch_size;
  }
  if (!options.input.empty()) {
    out["input"] = write_tensors(options.input);
  }
  if (!options.output.empty()) {
    out["output"] = write_tensors(options.output);
  }
  if (options.dynamic_batching) {
    out["dynamic_batching"] = write_dynamic_batching(*options.dynamic_batching);
  }
  if (options.sequence_batching) {
    out["sequence_batching"] = write_sequence_batching(*options.sequence_batching);
  }
  if (options.ensemble_scheduling) {
    out["ensemble_scheduling"] = write_ensemble_scheduling(*options.ensemble_scheduling);
  }
  if (!options.instance_group.empty()) {
    json groups = json::array();
    for (const auto& group : options.instance_group) {
      groups.push_back(write_instance_group(group));
    }
    out["instance_group"] = std::move(groups);
  }
  if (options.model_transaction_policy) {
    out["model_transaction_policy"] =
        write_model_transaction_policy(*options.model_transaction_policy);
  }
  if (options.response_cache) {
    out["response_cache"] = write_response_cache(*options.response_cache);
  }
  if (!options.model_warmup.empty()) {
    json samples = json::array();
    for (const auto& sample : options.model_warmup) {
      samples.push_back(write_model_warmup_sample(sample));
    }
    out["model_warmup"] = std::move(samples);
  }
  if (options.version_policy) {
    out["version_policy"] = write_version_policy(*options.version_policy);
  }
  if (!options.parameters.empty()) {
    out["parameters"] = write_parameters(options.parameters);
  }
  return out;
}

} // namespace detail

/// Reads Triton model-configuration JSON (already parsed) into model_options. Integer fields
/// take JSON numbers or decimal strings. Throws config_error whose path() is a JSON pointer to
/// the offending field: unknown_field (typos, and Triton fields servekit does not support yet),
/// wrong_type, or bad_value (including the dynamic- and sequence-batching rules of validate()
/// and Triton's rules for ensembles). An ensemble (`ensemble_scheduling` set) that leaves out
/// `platform` gets platform "ensemble", as Triton requires.
[[nodiscard]] inline model_options load_model_config(const nlohmann::json& config) {
  return detail::read_model_config(config);
}

/// Parses `json_text` and reads it as load_model_config(const nlohmann::json&) does. Text that
/// is not JSON (or holds a number no double can represent, such as 1e400) throws config_error
/// with code parse_error and the parser's message.
[[nodiscard]] inline model_options load_model_config(std::string_view json_text) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(json_text.data(), json_text.data() + json_text.size());
  } catch (const nlohmann::json::exception& e) { // parse_error, or out_of_range for 1e400
    throw config_error(config_error_code::parse_error, "",
                       std::string{"model config is not valid JSON: "} + e.what());
  }
  return load_model_config(config);
}

/// Text overloads: a string literal or std::string would otherwise be ambiguous between
/// std::string_view and nlohmann::json.
[[nodiscard]] inline model_options load_model_config(const char* json_text) {
  return load_model_config(std::string_view{json_text});
}

/// \copydoc load_model_config(const char*)
[[nodiscard]] inline model_options load_model_config(const std::string& json_text) {
  return load_model_config(std::string_view{json_text});
}

/// Writes `options` as Triton model-configuration JSON: TYPE_/KIND_ names, REJECT/DELAY,
/// integers as JSON numbers, parameters as {"key": {"string_value": "..."}}. Always writes
/// name and version, and each ensemble step's model_version; leaves out max_batch_size,
/// dynamic_batching, sequence_batching and ensemble_scheduling when unset, and other fields at
/// their default value; writes platform "ensemble" for an ensemble whose platform is empty.
/// load_model_config(save_model_config(x)) == x for every valid x (an ensemble's platform being
/// "ensemble", as load_model_config sets it).
[[nodiscard]] inline nlohmann::json save_model_config(const model_options& options) {
  return detail::write_model_config(options);
}

} // namespace servekit
