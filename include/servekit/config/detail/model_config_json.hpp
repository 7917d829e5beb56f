#pragma once
/// \file
/// What the implementation files of config/model_config_json.hpp
/// (config/impl/model_config_json_*.ipp) share: the toolkit that reads JSON values into C++ values
/// with JSON-pointer error messages and writes them back, Triton's enum names, the field lists
/// (json_field) that drive both a message's reader and its writer, and the readers, writers and
/// checks one implementation file calls in another. Not part of servekit's API; only those files
/// include it.

#include <servekit/backend/instance_context.hpp>
#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/config/detail/json_teardown.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/queue/queue_policy.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/schedule/adaptive_batching_options.hpp>
#include <servekit/schedule/dynamic_batching_options.hpp>
#include <servekit/schedule/ensemble_scheduling_options.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>
#include <servekit/state/state_options.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace servekit::detail {

using json = nlohmann::json;

// ------------------------------------------------------------------------------------------
// JSON pointers

/// The pointer of member `key` of the object at `parent` ("" is the document root).
[[nodiscard]] SERVEKIT_DECL std::string member_path(const std::string& parent,
                                                    std::string_view key);

/// The pointer of element `index` of the array at `parent`.
[[nodiscard]] SERVEKIT_DECL std::string element_path(const std::string& parent, std::size_t index);

// ------------------------------------------------------------------------------------------
// Describing values and names in messages

/// The value as JSON text, cut (at a UTF-8 character boundary) when long: "\"TYPE_FLOAT\"", "1.5".
[[nodiscard]] SERVEKIT_DECL std::string quoted_json(const json& value);

/// "string \"abc\"", "number 1.5", "boolean true"; just "null", "array" or "object" otherwise.
[[nodiscard]] SERVEKIT_DECL std::string describe_json(const json& value);

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

[[noreturn]] SERVEKIT_DECL void fail_wrong_type(const std::string& path, std::string_view expected,
                                                const json& got);

[[noreturn]] SERVEKIT_DECL void fail_bad_value(const std::string& path, const std::string& message);

[[noreturn]] SERVEKIT_DECL void fail_not_supported_yet(const std::string& path,
                                                       std::string_view field);

[[noreturn]] SERVEKIT_DECL void fail_unknown_field(const std::string& path, std::string_view field,
                                                   std::span<const std::string_view> known);

// ------------------------------------------------------------------------------------------
// JSON types: objects, arrays, booleans, strings

SERVEKIT_DECL void expect_object(const json& value, const std::string& path,
                                 std::string_view what = "an object");

SERVEKIT_DECL void expect_array(const json& value, const std::string& path);

/// Booleans must be JSON true/false; "true" and 1 are refused.
[[nodiscard]] SERVEKIT_DECL bool read_bool(const json& value, const std::string& path);

[[nodiscard]] SERVEKIT_DECL std::string read_string(const json& value, const std::string& path);

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

[[nodiscard]] SERVEKIT_DECL bool is_decimal_digits(std::string_view text) noexcept;

[[nodiscard]] SERVEKIT_DECL integer_value read_integer_value(const json& value,
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
[[nodiscard]] SERVEKIT_DECL float read_float(const json& value, const std::string& path);

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

/// The Triton names of an enum that config fields hold, so that fields of that type are read
/// and written like any plain value.
template <class Enum>
inline constexpr std::span<const enum_name<Enum>> enum_names_v{};
template <>
inline constexpr std::span<const enum_name<timeout_action>> enum_names_v<timeout_action> =
    timeout_action_names;
template <>
inline constexpr std::span<const enum_name<instance_group_kind>> enum_names_v<instance_group_kind> =
    instance_group_kind_names;
template <>
inline constexpr std::span<const enum_name<control_kind>> enum_names_v<control_kind> =
    control_kind_names;

template <class Enum>
[[nodiscard]] std::string enum_spellings(std::span<const enum_name<Enum>> names) {
  std::vector<std::string_view> spellings;
  for (const auto& entry : names) {
    spellings.push_back(entry.name);
  }
  return join_names(spellings);
}

/// Triton writes enums by name ("KIND_CPU"); numbers are refused.
template <class Enum>
[[nodiscard]] Enum read_enum(const json& value, const std::string& path,
                             std::span<const enum_name<Enum>> names) {
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
template <class Enum>
[[nodiscard]] std::string enum_spelling(Enum value, std::span<const enum_name<Enum>> names) {
  for (const auto& entry : names) {
    if (entry.value == value) {
      return std::string{entry.name};
    }
  }
  return "INVALID";
}

// ------------------------------------------------------------------------------------------
// Data types and dims

/// "TYPE_FP32" or "FP32" ("TYPE_STRING" or "BYTES" for BYTES).
[[nodiscard]] SERVEKIT_DECL data_type read_data_type(const json& value, const std::string& path);

/// Dimensions of a tensor: each >= 1, or -1 for a variable size; at most shape::max_rank.
[[nodiscard]] SERVEKIT_DECL shape read_dims(const json& value, const std::string& path);

[[nodiscard]] SERVEKIT_DECL json write_dims(const shape& dims);

// ------------------------------------------------------------------------------------------
// Plain values by C++ type

template <class T>
inline constexpr bool is_vector_v = false;
template <class T, class Allocator>
inline constexpr bool is_vector_v<std::vector<T, Allocator>> = true;

template <class T>
inline constexpr bool is_map_v = false;
template <class Key, class T, class Compare, class Allocator>
inline constexpr bool is_map_v<std::map<Key, T, Compare, Allocator>> = true;

template <class T>
inline constexpr bool is_optional_v = false;
template <class T>
inline constexpr bool is_optional_v<std::optional<T>> = true;

template <class T>
inline constexpr bool always_false_v = false;

/// Reads a bool, an integer, a float, a string, a data type, dims, an enum with Triton names
/// (enum_names_v), or an array of those.
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
  } else if constexpr (std::is_same_v<T, data_type>) {
    return read_data_type(value, path);
  } else if constexpr (std::is_same_v<T, shape>) {
    return read_dims(value, path);
  } else if constexpr (std::is_enum_v<T>) {
    static_assert(!enum_names_v<T>.empty(), "read_value: list the enum's names in enum_names_v");
    return read_enum(value, path, enum_names_v<T>);
  } else if constexpr (is_vector_v<T>) {
    using element = typename T::value_type;
    return read_array<element>(value, path, read_value<element>);
  } else {
    static_assert(always_false_v<T>, "read_value: no generic JSON reader for this type");
  }
}

// ------------------------------------------------------------------------------------------
// Writing values. A message (a C++ struct) is written by its write_message overload from the
// same field list its reader walks.

/// Protobuf's JSON spelling: a number, or "NaN", "Infinity", "-Infinity" (JSON has none of them).
[[nodiscard]] SERVEKIT_DECL json write_float(float value);

[[nodiscard]] SERVEKIT_DECL json write_message(const tensor_config& tensor);
[[nodiscard]] SERVEKIT_DECL json write_message(const queue_policy& policy);
[[nodiscard]] SERVEKIT_DECL json write_message(const adaptive_batching_options& options);
[[nodiscard]] SERVEKIT_DECL json write_message(const dynamic_batching_options& options);
[[nodiscard]] SERVEKIT_DECL json write_message(const sequence_control& control);
[[nodiscard]] SERVEKIT_DECL json write_message(const control_input& input);
[[nodiscard]] SERVEKIT_DECL json write_message(const initial_state_options& initial);
[[nodiscard]] SERVEKIT_DECL json write_message(const state_options& state);
[[nodiscard]] SERVEKIT_DECL json write_message(const sequence_batching_options& options);
[[nodiscard]] SERVEKIT_DECL json write_message(const rate_limiter_resource& resource);
[[nodiscard]] SERVEKIT_DECL json write_message(const rate_limiter_options& limiter);
[[nodiscard]] SERVEKIT_DECL json write_message(const instance_group_options& group);
[[nodiscard]] SERVEKIT_DECL json write_message(const ensemble_step_options& step);
[[nodiscard]] SERVEKIT_DECL json write_message(const ensemble_scheduling_options& options);
[[nodiscard]] SERVEKIT_DECL json write_message(const model_transaction_policy_options& policy);
[[nodiscard]] SERVEKIT_DECL json write_message(const response_cache_options& cache);
[[nodiscard]] SERVEKIT_DECL json write_message(const warmup_input_options& input);
[[nodiscard]] SERVEKIT_DECL json write_message(const model_warmup_options& sample);
[[nodiscard]] SERVEKIT_DECL json write_message(const version_policy_options& policy);
[[nodiscard]] SERVEKIT_DECL json write_message(const model_options& options);

/// The JSON of any value read_value reads, of an optional (its value), of a map (an object;
/// integer keys as decimal strings), or of a message.
template <class T>
[[nodiscard]] json to_json_value(const T& value) {
  if constexpr (std::is_same_v<T, float>) {
    return write_float(value);
  } else if constexpr (std::is_integral_v<T> || std::is_same_v<T, std::string>) {
    return value;
  } else if constexpr (std::is_same_v<T, data_type>) {
    return std::string{to_config_string(value)};
  } else if constexpr (std::is_same_v<T, shape>) {
    return write_dims(value);
  } else if constexpr (std::is_enum_v<T>) {
    return enum_spelling(value, enum_names_v<T>);
  } else if constexpr (is_optional_v<T>) {
    return to_json_value(*value);
  } else if constexpr (is_vector_v<T>) {
    // Containers with children are dismantled when a failure stops the writing: destroying
    // them whole would allocate (json_teardown.hpp); a config is written on request (/config).
    json out = json::array();
    const json_teardown_on_throw teardown{out};
    for (const auto& element : value) {
      // Converted first: std::vector<bool>'s elements are proxies.
      const typename T::value_type& plain = element;
      json written = to_json_value(plain);
      const json_teardown_on_throw written_teardown{written};
      out.push_back(std::move(written));
    }
    return out;
  } else if constexpr (is_map_v<T>) {
    json out = json::object();
    const json_teardown_on_throw teardown{out};
    for (const auto& [key, element] : value) {
      json written = to_json_value(element);
      const json_teardown_on_throw written_teardown{written};
      if constexpr (std::is_integral_v<typename T::key_type>) {
        out[std::to_string(key)] = std::move(written);
      } else {
        out[key] = std::move(written);
      }
    }
    return out;
  } else {
    return write_message(value);
  }
}

// ------------------------------------------------------------------------------------------
// Members, read and written through member pointers

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

/// `object.*First.*Rest...`: a member, or a member of a member (dynamic_batching's priority
/// settings live in its `priority` member).
template <auto First, auto... Rest, class Object>
[[nodiscard]] constexpr auto& member_of(Object& object) {
  if constexpr (sizeof...(Rest) == 0) {
    return object.*First;
  } else {
    return member_of<Rest...>(object.*First);
  }
}

/// A field reader that stores a plain value into `out.*First.*Rest...`.
template <auto First, auto... Rest>
void read_member(const json& value, const std::string& path, member_owner_t<First>& out) {
  auto& member = member_of<First, Rest...>(out);
  member = read_value<std::remove_cvref_t<decltype(member)>>(value, path);
}

/// A field reader that stores `Read(value, path)` into `out.*First.*Rest...`, or, for a vector
/// member and a `Read` of one element, reads an array with it.
template <auto Read, auto First, auto... Rest>
void read_with(const json& value, const std::string& path, member_owner_t<First>& out) {
  auto& member = member_of<First, Rest...>(out);
  using member_type = std::remove_cvref_t<decltype(member)>;
  if constexpr (is_vector_v<member_type> &&
                !std::is_same_v<member_type, decltype(Read(value, path))>) {
    member = read_array<typename member_type::value_type>(value, path, Read);
  } else {
    member = Read(value, path);
  }
}

/// A message's default value, to which the writer compares its fields.
template <class Message>
[[nodiscard]] const Message& default_message() {
  static const Message defaults{};
  return defaults;
}

/// A field writer that writes `in.*First.*Rest...` whatever its value.
template <auto First, auto... Rest>
[[nodiscard]] std::optional<json> write_always(const member_owner_t<First>& in) {
  return to_json_value(member_of<First, Rest...>(in));
}

/// A field writer that leaves `in.*First.*Rest...` out at its default value (an unset optional,
/// an empty vector or string, false, 0, or the member's default).
template <auto First, auto... Rest>
[[nodiscard]] std::optional<json> write_unless_default(const member_owner_t<First>& in) {
  const auto& value = member_of<First, Rest...>(in);
  if (value == member_of<First, Rest...>(default_message<member_owner_t<First>>())) {
    return std::nullopt;
  }
  return to_json_value(value);
}

/// Refuses an object that sets more than one member of the protobuf oneof `oneof` (protobuf's
/// own parser does too); the error points at the second member in the order of `members`.
SERVEKIT_DECL void check_oneof(const json& object, const std::string& path, std::string_view oneof,
                               std::initializer_list<std::string_view> members);

// ------------------------------------------------------------------------------------------
// Messages: one list of fields per message, which both its reader and its writer walk, plus
// the Triton fields not supported yet

/// One field of a message (a JSON object): its Triton name, how it is read into a `Message`
/// and how it is written from one.
template <class Message>
struct json_field {
  std::string_view name;
  void (*read)(const json& value, const std::string& path, Message& out);
  /// The field's JSON value, or nothing to leave the field out; nullptr for a field that is
  /// only read (it has no member of its own).
  std::optional<json> (*write)(const Message& in);
};

enum class write_rule : std::uint8_t {
  unless_default, ///< left out at its default value
  always          ///< written whatever its value
};

/// The field of a plain member `First.Rest...` (as read_value reads and to_json_value writes it).
template <auto First, auto... Rest>
[[nodiscard]] constexpr json_field<member_owner_t<First>>
member_field(std::string_view name, write_rule rule = write_rule::unless_default) {
  return {name, read_member<First, Rest...>,
          rule == write_rule::always ? write_always<First, Rest...>
                                     : write_unless_default<First, Rest...>};
}

template <class Message>
[[nodiscard]] std::vector<std::string_view>
field_names(std::span<const json_field<Message>> fields) {
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
                 std::type_identity_t<std::span<const json_field<Message>>> fields,
                 std::span<const std::string_view> not_yet_supported = {}) {
  expect_object(object, path);
  for (const auto& member : object.items()) {
    // Not a structured binding: clang < 16 cannot capture one in the lambda below.
    const std::string& key = member.key();
    const std::string field_path = member_path(path, key);
    const auto known = std::find_if(fields.begin(), fields.end(),
                                    [&](const json_field<Message>& f) { return f.name == key; });
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

/// Writes `in` as a JSON object: each field of `fields` that its writer does not leave out.
template <class Message>
[[nodiscard]] json write_fields(const Message& in,
                                std::type_identity_t<std::span<const json_field<Message>>> fields) {
  json out = json::object();
  const json_teardown_on_throw teardown{out}; // see to_json_value
  for (const auto& field : fields) {
    if (field.write == nullptr) {
      continue;
    }
    if (auto value = field.write(in)) {
      const json_teardown_on_throw value_teardown{*value};
      out[std::string{field.name}] = std::move(*value);
    }
  }
  return out;
}

SERVEKIT_DECL void require_fields(const json& object, const std::string& path,
                                  std::initializer_list<std::string_view> required);

// ------------------------------------------------------------------------------------------
// Readers and checks that one implementation file defines and another calls

/// Triton's platform for ensembles.
inline constexpr std::string_view ensemble_platform = "ensemble";

// impl/model_config_json_scheduling.ipp: input[], output[], dynamic_batching,
// sequence_batching and instance_group[] (their write_message overloads are declared above).

SERVEKIT_DECL void read_inputs(const json& value, const std::string& path, model_options& out);

SERVEKIT_DECL void read_outputs(const json& value, const std::string& path, model_options& out);

[[nodiscard]] SERVEKIT_DECL adaptive_batching_options
read_adaptive_batching(const json& value, const std::string& path);

[[nodiscard]] SERVEKIT_DECL dynamic_batching_options read_dynamic_batching(const json& value,
                                                                           const std::string& path);

/// Neither `direct` nor `oldest`: direct, Triton's default strategy.
[[nodiscard]] SERVEKIT_DECL sequence_batching_options
read_sequence_batching(const json& value, const std::string& path);

[[nodiscard]] SERVEKIT_DECL instance_group_options read_instance_group(const json& value,
                                                                       const std::string& path);

// impl/model_config_json_validate.ipp
/// The checks that involve more than one field, run after every field is read.
SERVEKIT_DECL void check_model_options(const model_options& options);

} // namespace servekit::detail
