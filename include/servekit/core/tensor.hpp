#pragma once
/// \file
/// tensor: a named, typed, shaped buffer, the unit of request inputs and response outputs.

#include <servekit/core/assert.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/block_pool.hpp>
#include <servekit/core/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace servekit {

namespace detail {
template <class T>
constexpr data_type deduce_data_type() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>) {
    return data_type::boolean;
  } else if constexpr (std::is_same_v<U, float>) {
    return data_type::fp32;
  } else if constexpr (std::is_same_v<U, double>) {
    return data_type::fp64;
  } else if constexpr (std::is_integral_v<U> && !std::is_same_v<U, char> &&
                       !std::is_same_v<U, wchar_t> && !std::is_same_v<U, char8_t> &&
                       !std::is_same_v<U, char16_t> && !std::is_same_v<U, char32_t>) {
    // By size and signedness, so that `long` and `long long` both map to INT64. Plain `char`
    // is left out: whether it is signed is up to the platform, and text belongs in BYTES.
    constexpr bool is_signed = std::is_signed_v<U>;
    switch (sizeof(U)) {
    case 1:
      return is_signed ? data_type::int8 : data_type::uint8;
    case 2:
      return is_signed ? data_type::int16 : data_type::uint16;
    case 4:
      return is_signed ? data_type::int32 : data_type::uint32;
    case 8:
      return is_signed ? data_type::int64 : data_type::uint64;
    default:
      return data_type::invalid;
    }
  } else {
    return data_type::invalid;
  }
}
} // namespace detail

/// The data type whose elements a `T` holds: `float` is FP32, `std::int32_t` INT32, `bool` BOOL
/// (`data_type::invalid` for a type with no fixed-size data type: FP16 and BF16 have no C++
/// type here; build those tensors with make_tensor(name, data_type, shape, span)).
template <class T>
inline constexpr data_type data_type_of_v = detail::deduce_data_type<T>();

/// A `T` whose data type make_tensor deduces (a number or bool; see data_type_of_v).
template <class T>
concept element_type = (data_type_of_v<T> != data_type::invalid);

/// A tensor that is not a well-formed BYTES tensor was read as strings (see tensor::strings).
class bytes_error : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

/// A named tensor. `shape` includes the batch dimension when the model batches. For BYTES the
/// buffer holds the length-prefixed elements back to back (see core/bytes.hpp).
struct tensor {
  std::string name;
  data_type type = data_type::invalid;
  servekit::shape shape;
  buffer data;

  [[nodiscard]] std::int64_t element_count() const noexcept { return shape.element_count(); }

  /// The typed elements (host memory only). `T`'s size must be the element size.
  template <class T>
  [[nodiscard]] std::span<T> values() noexcept {
    SERVEKIT_ASSERT(sizeof(T) == byte_size(type), "values<T>() with a T of the wrong size");
    SERVEKIT_ASSERT(data.size() % sizeof(T) == 0, "values<T>() on a ragged buffer");
    return {reinterpret_cast<T*>(data.bytes().data()), data.size() / sizeof(T)};
  }
  template <class T>
  [[nodiscard]] std::span<const T> values() const noexcept {
    SERVEKIT_ASSERT(sizeof(T) == byte_size(type), "values<T>() with a T of the wrong size");
    SERVEKIT_ASSERT(data.size() % sizeof(T) == 0, "values<T>() on a ragged buffer");
    return {reinterpret_cast<const T*>(data.bytes().data()), data.size() / sizeof(T)};
  }

  /// The elements of a BYTES tensor, as views into its buffer (valid while the tensor lives and
  /// its buffer is unchanged). Throws bytes_error, naming the tensor, when it is not BYTES, is
  /// not in host memory, or its buffer is malformed; in a backend's execute that fails the
  /// batch. The request validator has already checked a request's BYTES inputs.
  [[nodiscard]] std::vector<std::string_view> strings() const {
    if (type != data_type::bytes) {
      throw bytes_error("tensor '" + name + "' holds " + std::string{to_string(type)} +
                        ", not BYTES: read it with values<T>()");
    }
    if (!data.location().host_accessible()) {
      throw bytes_error("tensor '" + name + "' is in device memory: strings() reads host memory");
    }
    std::vector<std::string_view> out;
    out.reserve(static_cast<std::size_t>(element_count()));
    if (!for_each_bytes_element(data.bytes(), [&](std::string_view e) { out.push_back(e); })) {
      throw bytes_error("tensor '" + name + "' holds malformed BYTES data (after " +
                        std::to_string(out.size()) +
                        " elements: each element needs a 4-byte little-endian length followed by "
                        "that many bytes)");
    }
    return out;
  }
};

/// The tensors of a request or a response. Its memory comes from servekit's block pool: a
/// request is built on one thread and destroyed on another, which the system allocator handles
/// poorly (see docs/benchmarks.md).
using tensor_list = std::vector<tensor, detail::pool_allocator<tensor>>;

/// A CPU tensor of fixed-size elements with uninitialised contents sized from `s`.
[[nodiscard]] inline tensor make_tensor(std::string name, data_type type, const shape& s) {
  SERVEKIT_ASSERT(type != data_type::bytes,
                  "make_tensor cannot size BYTES; use make_tensor(name, shape, strings)");
  const auto bytes = static_cast<std::size_t>(s.element_count()) * byte_size(type);
  return tensor{std::move(name), type, s, buffer::allocate(bytes)};
}

/// A CPU tensor holding a copy of `values`.
template <class T>
[[nodiscard]] tensor make_tensor(std::string name, data_type type, const shape& s,
                                 std::span<const T> values) {
  SERVEKIT_ASSERT(sizeof(T) == byte_size(type), "make_tensor with a T of the wrong size");
  return tensor{std::move(name), type, s, buffer::copy_of(std::as_bytes(values))};
}

/// A CPU tensor holding a copy of `values` (a vector, array or span of an element_type), its
/// data type deduced: `make_tensor("INPUT0", {1, 16}, values)` with `float` values is FP32.
/// `values` must hold exactly the shape's element count.
template <std::ranges::contiguous_range R>
  requires element_type<std::ranges::range_value_t<R>>
[[nodiscard]] tensor make_tensor(std::string name, const shape& s, const R& values) {
  using T = std::ranges::range_value_t<R>;
  const std::span<const T> elements{std::ranges::data(values), std::ranges::size(values)};
  SERVEKIT_ASSERT(static_cast<std::int64_t>(elements.size()) == s.element_count(),
                  "make_tensor: the values' count differs from the shape's element count");
  return tensor{std::move(name), data_type_of_v<T>, s, buffer::copy_of(std::as_bytes(elements))};
}

/// The same from a braced list: `make_tensor("X", {1, 3}, {1.0F, 2.0F, 3.0F})` (FP32).
template <element_type T>
[[nodiscard]] tensor make_tensor(std::string name, const shape& s,
                                 std::initializer_list<T> values) {
  return make_tensor(std::move(name), s, std::span<const T>{values.begin(), values.size()});
}

/// A BYTES tensor whose elements are `strings` (any range of things that convert to
/// std::string_view: string literals, std::string, std::string_view), encoded as Triton does:
/// `make_tensor("TEXT", {1, 2}, texts)`. `strings` must hold the shape's element count.
template <std::ranges::input_range R>
  requires std::convertible_to<std::ranges::range_reference_t<R>, std::string_view> &&
      (!element_type<std::ranges::range_value_t<R>>) [[nodiscard]] tensor
      make_tensor(std::string name, const shape& s, const R& strings) {
    std::vector<std::string_view> views;
    for (auto&& e : strings) {
      views.emplace_back(std::string_view{e});
    }
    SERVEKIT_ASSERT(static_cast<std::int64_t>(views.size()) == s.element_count(),
                    "make_tensor: the strings' count differs from the shape's element count");
    return tensor{std::move(name), data_type::bytes, s, encode_bytes(views)};
  }

  /// The same from a braced list of strings: `make_tensor("TEXT", {1, 2}, {"hello", "world"})`.
  [[nodiscard]] inline tensor make_tensor(std::string name, const shape& s,
                                          std::initializer_list<std::string_view> strings) {
    return make_tensor(std::move(name), s,
                       std::span<const std::string_view>{strings.begin(), strings.size()});
  }

} // namespace servekit
