#pragma once
/// \file
/// Reading the sequence batcher's control inputs (START, END, READY, CORRID) as a model reads
/// them: tensors of one element per request, in the data type the config gives each control.
/// Triton's example sequence models take their controls as ordinary inputs, so the bundled
/// backends that stand in for them do the same.

#include <servekit/core/bytes.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/tensor.hpp>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace servekit_server {

/// The value of a START, END or READY control input (`int32_false_true`, `fp32_false_true` or
/// `bool_false_true` in the config) as the integer the model computes with; 0 when the request
/// has no input of that name (the config declares no such control).
[[nodiscard]] inline std::int32_t control_flag(const servekit::request& r, std::string_view name) {
  const servekit::tensor* t = r.find_input(name);
  if (t == nullptr || t->data.size() == 0) {
    return 0;
  }
  switch (t->type) {
  case servekit::data_type::int32:
    return t->values<std::int32_t>()[0];
  case servekit::data_type::fp32:
    return static_cast<std::int32_t>(t->values<float>()[0]);
  case servekit::data_type::boolean:
    return t->values<std::uint8_t>()[0] != 0 ? 1 : 0;
  default:
    return 0;
  }
}

/// A decimal integer, the whole of `text`, or nothing.
template <class Int>
[[nodiscard]] std::optional<Int> parse_decimal(std::string_view text) {
  Int value{};
  const char* const end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty()) {
    return std::nullopt;
  }
  return value;
}

/// The correlation id in a CORRID control input: its integer (TYPE_UINT64, TYPE_INT64,
/// TYPE_UINT32, TYPE_INT32) or, for TYPE_STRING, the decimal number its one element holds.
/// 0 when the request has no CORRID input; nothing when a string id is not a decimal number.
[[nodiscard]] inline std::optional<std::uint64_t> control_corrid(const servekit::request& r,
                                                                 std::string_view name) {
  const servekit::tensor* t = r.find_input(name);
  if (t == nullptr || t->data.size() == 0) {
    return std::uint64_t{0};
  }
  switch (t->type) {
  case servekit::data_type::uint64:
    return t->values<std::uint64_t>()[0];
  case servekit::data_type::int64:
    return static_cast<std::uint64_t>(t->values<std::int64_t>()[0]);
  case servekit::data_type::uint32:
    return t->values<std::uint32_t>()[0];
  case servekit::data_type::int32:
    return static_cast<std::uint64_t>(static_cast<std::uint32_t>(t->values<std::int32_t>()[0]));
  case servekit::data_type::bytes: {
    const auto elements = servekit::decode_bytes(t->data.bytes());
    if (!elements || elements->size() != 1) {
      return std::nullopt;
    }
    return parse_decimal<std::uint64_t>(elements->front());
  }
  default:
    return std::nullopt;
  }
}

/// int32 arithmetic that wraps, as the models' int32 tensors do, instead of overflowing into
/// undefined behaviour.
[[nodiscard]] constexpr std::int32_t wrapping_add(std::int32_t a, std::int32_t b) noexcept {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
}
[[nodiscard]] constexpr std::int32_t wrapping_sub(std::int32_t a, std::int32_t b) noexcept {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) - static_cast<std::uint32_t>(b));
}
[[nodiscard]] constexpr std::int32_t wrapping_mul(std::int32_t a, std::int32_t b) noexcept {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) * static_cast<std::uint32_t>(b));
}

} // namespace servekit_server
