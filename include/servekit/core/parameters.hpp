#pragma once
/// \file
/// parameter_value and parameter_list: the free-form parameters of a request or a response
/// (Triton's InferParameter map, the KServe v2 "parameters" object), as a backend reads and
/// sets them:
///
///     std::int64_t max_tokens = 16; // the default when the client sends none
///     if (status s = req.parameters.get("max_tokens", max_tokens); !s.ok()) {
///       b.response(i).status = std::move(s); // "parameter 'max_tokens' is a string, ..."
///       continue;
///     }
///     b.response(i).parameters.set("generated_tokens", produced);

#include <servekit/core/status.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace servekit {

/// One parameter's value: one of the kinds Triton's InferParameter holds (bool, int64, uint64,
/// double, string). A JSON value maps as Triton's HTTP front end reads it: true/false bool, an
/// integer int64 (uint64 only above INT64_MAX), any other number double, a string string.
using parameter_value = std::variant<bool, std::int64_t, std::uint64_t, double, std::string>;

/// The kind's name as messages print it: "bool", "int64", "uint64", "double" or "string".
[[nodiscard]] constexpr std::string_view parameter_type_name(const parameter_value& v) noexcept {
  switch (v.index()) {
  case 0:
    return "bool";
  case 1:
    return "int64";
  case 2:
    return "uint64";
  case 3:
    return "double";
  default:
    return "string";
  }
}

/// One named parameter.
struct parameter {
  std::string name;
  parameter_value value;
  friend bool operator==(const parameter&, const parameter&) = default;
};

namespace detail {

/// A C++ type a parameter can be read as: bool, an integer type (range-checked), double, or
/// std::string_view (into the list, valid while it is unchanged).
template <class T>
concept parameter_readable =
    std::integral<T> || std::same_as<T, double> || std::same_as<T, std::string_view>;

/// What the message names a requested type.
template <class T>
constexpr std::string_view parameter_wanted_name() noexcept {
  if constexpr (std::same_as<T, bool>) {
    return "a bool";
  } else if constexpr (std::same_as<T, std::string_view>) {
    return "a string";
  } else if constexpr (std::same_as<T, double>) {
    return "a number";
  } else {
    return "an integer";
  }
}

} // namespace detail

/// A flat list of parameters in the order they were added (a request's: as the client sent
/// them). Names are unique: set() replaces a value, the HTTP decoders refuse duplicates. Lookups
/// scan the list (a request carries a handful) and never allocate; an empty list holds no heap
/// memory, so a request or response without parameters costs nothing more to build or move.
class parameter_list {
public:
  using value_type = parameter;
  using const_iterator = std::vector<parameter>::const_iterator;

  parameter_list() noexcept = default;

  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] const_iterator begin() const noexcept { return items_.begin(); }
  [[nodiscard]] const_iterator end() const noexcept { return items_.end(); }
  [[nodiscard]] const parameter& operator[](std::size_t i) const noexcept { return items_[i]; }
  void clear() noexcept { items_.clear(); }
  void reserve(std::size_t n) { items_.reserve(n); }

  /// The value of `name`, or nullptr when there is none.
  [[nodiscard]] const parameter_value* find(std::string_view name) const noexcept {
    for (const auto& p : items_) {
      if (p.name == name) {
        return &p.value;
      }
    }
    return nullptr;
  }
  [[nodiscard]] bool contains(std::string_view name) const noexcept {
    return find(name) != nullptr;
  }

  /// The value of `name` as a T, or nothing when there is no such parameter or its value is not
  /// a T. Numbers convert where no value is lost: an int64 or uint64 reads as any integer type
  /// it fits, and as double when the double holds it exactly (a client's `"temperature": 1`);
  /// a double never reads as an integer, nor bool or string as anything else. A string reads
  /// as std::string_view into this list.
  template <detail::parameter_readable T>
  [[nodiscard]] std::optional<T> get(std::string_view name) const noexcept {
    const parameter_value* v = find(name);
    if (v == nullptr) {
      return std::nullopt;
    }
    return convert<T>(*v);
  }

  /// Reads `name` into `out` when the request has it: ok and `out` set, or ok and `out` left
  /// as it was (the caller's default) when there is no such parameter; invalid_argument naming
  /// the parameter, its type and the type wanted when the value is not a T (get<T>'s rules), so
  /// a backend can fail that request with the message as it is.
  template <detail::parameter_readable T>
  [[nodiscard]] status get(std::string_view name, T& out) const {
    const parameter_value* v = find(name);
    if (v == nullptr) {
      return {};
    }
    if (const auto t = convert<T>(*v)) {
      out = *t;
      return {};
    }
    std::string message = "parameter '";
    message += name;
    message += "' is ";
    message += describe(*v);
    message += ", expected ";
    message += detail::parameter_wanted_name<T>();
    if constexpr (std::integral<T> && !std::same_as<T, bool>) {
      if (v->index() == 1 || v->index() == 2) { // an integer that does not fit
        message += " in [";
        message += std::to_string(std::numeric_limits<T>::min());
        message += ", ";
        message += std::to_string(std::numeric_limits<T>::max());
        message += ']';
      }
    }
    return invalid_argument(std::move(message));
  }

  /// Sets `name` to `value`: replaces its value when the list has it, else appends it.
  /// Integers are stored as int64 (uint64 above INT64_MAX, as the JSON decoder does), any
  /// floating-point value as double, text as string.
  void set(std::string_view name, parameter_value value) {
    for (auto& p : items_) {
      if (p.name == name) {
        p.value = std::move(value);
        return;
      }
    }
    items_.push_back({std::string{name}, std::move(value)});
  }
  template <class T>
    requires std::integral<T> &&(!std::same_as<T, bool>)void set(std::string_view name, T value) {
      set(name, integer_value(value));
    }
    template <std::floating_point T>
    void set(std::string_view name, T value) {
      set(name, parameter_value{static_cast<double>(value)});
    }
    void set(std::string_view name, bool value) { set(name, parameter_value{value}); }
    void set(std::string_view name, const char* value) {
      set(name, parameter_value{std::string{value}});
    }
    void set(std::string_view name, std::string_view value) {
      set(name, parameter_value{std::string{value}});
    }
    void set(std::string_view name, std::string value) {
      set(name, parameter_value{std::move(value)});
    }

    /// Appends without looking for `name` first: for a decoder that has checked the names itself.
    void append(std::string name, parameter_value value) {
      items_.push_back({std::move(name), std::move(value)});
    }

    /// Removes `name`; false when the list has no such parameter.
    bool erase(std::string_view name) noexcept {
      for (auto it = items_.begin(); it != items_.end(); ++it) {
        if (it->name == name) {
          items_.erase(it);
          return true;
        }
      }
      return false;
    }

    friend bool operator==(const parameter_list&, const parameter_list&) = default;

  private:
    template <class T>
    static parameter_value integer_value(T value) noexcept {
      if (std::in_range<std::int64_t>(value)) {
        return static_cast<std::int64_t>(value);
      }
      return static_cast<std::uint64_t>(value); // only unsigned values get here
    }

    template <class T>
    static std::optional<T> convert(const parameter_value& v) noexcept {
      if constexpr (std::same_as<T, bool>) {
        if (const auto* b = std::get_if<bool>(&v)) {
          return *b;
        }
      } else if constexpr (std::same_as<T, std::string_view>) {
        if (const auto* s = std::get_if<std::string>(&v)) {
          return std::string_view{*s};
        }
      } else if constexpr (std::same_as<T, double>) {
        if (const auto* d = std::get_if<double>(&v)) {
          return *d;
        }
        if (const auto* i = std::get_if<std::int64_t>(&v)) {
          return exact_double(*i);
        }
        if (const auto* u = std::get_if<std::uint64_t>(&v)) {
          return exact_double(*u);
        }
      } else {
        if (const auto* i = std::get_if<std::int64_t>(&v); i != nullptr && std::in_range<T>(*i)) {
          return static_cast<T>(*i);
        }
        if (const auto* u = std::get_if<std::uint64_t>(&v); u != nullptr && std::in_range<T>(*u)) {
          return static_cast<T>(*u);
        }
      }
      return std::nullopt;
    }

    /// `i` as a double when the double holds it exactly (every integer up to 2^53 in magnitude,
    /// and larger ones with enough trailing zero bits, such as 2^63).
    template <class Int>
    static std::optional<double> exact_double(Int i) noexcept {
      const auto d = static_cast<double>(i);
      // 2^63 (signed) or 2^64 (unsigned) is the first double the cast back cannot take.
      constexpr double past =
          2.0 * static_cast<double>(Int{1} << (std::numeric_limits<Int>::digits - 1));
      if (d >= past || static_cast<Int>(d) != i) {
        return std::nullopt;
      }
      return d;
    }

    static std::string describe(const parameter_value& v) {
      std::string out{v.index() == 1 ? "an " : "a "}; // "an int64", "a uint64"
      out += parameter_type_name(v);
      return out;
    }

    std::vector<parameter> items_;
};

} // namespace servekit
