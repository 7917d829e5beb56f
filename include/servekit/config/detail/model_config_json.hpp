#pragma once
/// \file
/// What the implementation files of config/model_config_json.hpp
/// (config/impl/model_config_json_*.ipp) share: the toolkit that reads JSON values into C++ values
/// with JSON-pointer error messages (declarations, and the templates that build field readers),
/// Triton's enum names, and the readers and checks one implementation file calls in another. Not
/// part of servekit's API; only those files include it.

#include <servekit/backend/instance_context.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/server_tier.hpp>
#include <servekit/queue/queue_policy.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/schedule/dynamic_batching_options.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace servekit::detail {

using json = nlohmann::json;

// ------------------------------------------------------------------------------------------
// JSON pointers

/// The pointer of member `key` of the object at `parent` ("" is the document root).
[[nodiscard]] SERVEKIT_SERVER_DECL std::string member_path(const std::string& parent,
                                                           std::string_view key);

/// The pointer of element `index` of the array at `parent`.
[[nodiscard]] SERVEKIT_SERVER_DECL std::string element_path(const std::string& parent,
                                                            std::size_t index);

// ------------------------------------------------------------------------------------------
// Describing values and names in messages

/// The value as JSON text, cut (at a UTF-8 character boundary) when long: "\"TYPE_FLOAT\"", "1.5".
[[nodiscard]] SERVEKIT_SERVER_DECL std::string quoted_json(const json& value);

/// "string \"abc\"", "number 1.5", "boolean true"; just "null", "array" or "object" otherwise.
[[nodiscard]] SERVEKIT_SERVER_DECL std::string describe_json(const json& value);

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

// ------------------------------------------------------------------------------------------
// Throwing config_error

[[noreturn]] SERVEKIT_SERVER_DECL void fail_wrong_type(const std::string& path,
                                                       std::string_view expected, const json& got);

[[noreturn]] SERVEKIT_SERVER_DECL void fail_bad_value(const std::string& path,
                                                      const std::string& message);

[[noreturn]] SERVEKIT_SERVER_DECL void fail_not_supported_yet(const std::string& path,
                                                              std::string_view field);

[[noreturn]] SERVEKIT_SERVER_DECL void fail_unknown_field(const std::string& path,
                                                          std::string_view field,
                                                          std::span<const std::string_view> known);

// ------------------------------------------------------------------------------------------
// JSON types: objects, arrays, booleans, strings

SERVEKIT_SERVER_DECL void expect_object(const json& value, const std::string& path,
                                        std::string_view what = "an object");

SERVEKIT_SERVER_DECL void expect_array(const json& value, const std::string& path);

/// Booleans must be JSON true/false; "true" and 1 are refused.
[[nodiscard]] SERVEKIT_SERVER_DECL bool read_bool(const json& value, const std::string& path);

[[nodiscard]] SERVEKIT_SERVER_DECL std::string read_string(const json& value,
                                                           const std::string& path);

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

[[nodiscard]] SERVEKIT_SERVER_DECL bool is_decimal_digits(std::string_view text) noexcept;

[[nodiscard]] SERVEKIT_SERVER_DECL integer_value read_integer_value(const json& value,
                                                                    const std::string& path);

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

/// A field of protobuf type `float`. Finite values beyond float's range are refused rather than
/// silently turned into infinities.
[[nodiscard]] SERVEKIT_SERVER_DECL float read_float(const json& value, const std::string& path);

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
SERVEKIT_SERVER_DECL void check_oneof(const json& object, const std::string& path,
                                      std::string_view oneof,
                                      std::initializer_list<std::string_view> members);

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

SERVEKIT_SERVER_DECL void require_fields(const json& object, const std::string& path,
                                         std::initializer_list<std::string_view> required);

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

/// "TYPE_FP32" or "FP32" ("TYPE_STRING" or "BYTES" for BYTES).
[[nodiscard]] SERVEKIT_SERVER_DECL data_type read_data_type(const json& value,
                                                            const std::string& path);

// ------------------------------------------------------------------------------------------
// Readers and checks that one implementation file defines and another calls

/// Triton's platform for ensembles.
inline constexpr std::string_view ensemble_platform = "ensemble";

// impl/model_config_json_read_scheduling.ipp: input[], output[], dynamic_batching,
// sequence_batching and instance_group[].

SERVEKIT_SERVER_DECL void read_inputs(const json& value, const std::string& path,
                                      model_options& out);

SERVEKIT_SERVER_DECL void read_outputs(const json& value, const std::string& path,
                                       model_options& out);

[[nodiscard]] SERVEKIT_SERVER_DECL dynamic_batching_options
read_dynamic_batching(const json& value, const std::string& path);

/// Neither `direct` nor `oldest`: direct, Triton's default strategy.
[[nodiscard]] SERVEKIT_SERVER_DECL sequence_batching_options
read_sequence_batching(const json& value, const std::string& path);

SERVEKIT_SERVER_DECL void read_instance_groups(const json& value, const std::string& path,
                                               model_options& out);

// impl/model_config_json_validate.ipp
/// The checks that involve more than one field, run after every field is read.
SERVEKIT_SERVER_DECL void check_model_options(const model_options& options);

} // namespace servekit::detail
