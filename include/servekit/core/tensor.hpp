#pragma once
/// \file
/// tensor: a named, typed, shaped buffer, the unit of request inputs and response outputs.

#include <servekit/core/assert.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/block_pool.hpp>
#include <servekit/core/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace servekit {

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
};

/// The tensors of a request or a response. Its memory comes from servekit's block pool: a
/// request is built on one thread and destroyed on another, which the system allocator handles
/// poorly (see docs/benchmarks.md).
using tensor_list = std::vector<tensor, detail::pool_allocator<tensor>>;

/// A CPU tensor of fixed-size elements with uninitialised contents sized from `s`.
[[nodiscard]] inline tensor make_tensor(std::string name, data_type type, const shape& s) {
  SERVEKIT_ASSERT(type != data_type::bytes, "make_tensor cannot size BYTES; build its buffer");
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

} // namespace servekit
