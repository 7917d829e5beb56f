#pragma once
/// \file
/// infer_request_parser when an input or an output object ends (detail/infer_request_parser.hpp):
/// the checks on the finished input, its tensor built from the binary data or converted from the
/// JSON values in the scratch, the requested output recorded; and the per-thread scratch.

#include <servekit/core/buffer.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/http/decoded_infer_request.hpp>
#include <servekit/http/detail/checked_count.hpp>
#include <servekit/http/detail/half_float.hpp>
#include <servekit/http/detail/infer_request_parser.hpp>
#include <servekit/http/detail/json_scalar.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string_view>
#include <utility>

namespace servekit::http::detail {

SERVEKIT_DECL decode_scratch& thread_decode_scratch() {
  thread_local decode_scratch scratch;
  return scratch;
}

SERVEKIT_DECL bool infer_request_parser::finish_input() {
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
  if (!first_of_name(
          input_names_, out_.request.inputs.size(), input_.name,
          [this](std::size_t i) -> std::string_view { return out_.request.inputs[i].name; })) {
    return fail(fmt::format("input '{}' appears more than once", input_.name));
  }
  const auto count = checked_element_count(input_.dims);
  if (!count) {
    return fail(
        fmt::format("{}: shape {} has too many elements", input_label(), to_string(input_.dims)));
  }
  if (*count > limits_.max_tensor_elements) {
    return fail(fmt::format("{}: shape {} has {} elements, more than {} (the limit "
                            "max_tensor_elements)",
                            input_label(), to_string(input_.dims), *count,
                            limits_.max_tensor_elements));
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

SERVEKIT_DECL bool infer_request_parser::convert_data(tensor& t, std::size_t count) {
  const auto& values = scratch_.values;
  const data_type type = t.type;
  if (type == data_type::bytes) {
    for (std::size_t i = 0; i < count; ++i) {
      if (values[i].tag != json_scalar::kind::string) {
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
      if (values[i].tag != json_scalar::kind::boolean) {
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

SERVEKIT_DECL bool infer_request_parser::finish_output() {
  if (!output_.has_name) {
    return fail(fmt::format("outputs[{}] has no 'name'", output_index_));
  }
  if (!first_of_name(output_names_, out_.outputs.size(), output_.name,
                     [this](std::size_t i) -> std::string_view { return out_.outputs[i].name; })) {
    return fail(fmt::format("output '{}' is requested more than once", output_.name));
  }
  out_.request.requested_outputs.push_back(output_.name);
  out_.outputs.push_back(requested_output{std::move(output_.name), output_.binary});
  return true;
}

} // namespace servekit::http::detail
