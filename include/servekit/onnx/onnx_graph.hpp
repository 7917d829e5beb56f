#pragma once
/// \file
/// What a model config needs to know of an ONNX file: the graph's inputs (those that are not
/// initializers) and outputs, with their element types and dims, read with libprotobuf through
/// servekit's own description of the format (proto/servekit/onnx/onnx_model.proto, generated as
/// <servekit/onnx/onnx_model.pb.h>: target servekit::onnx). Also the tensors of ONNX's test
/// sets (serialized TensorProto files) as servekit tensors, to check a graph against them.

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/onnx/onnx_model.pb.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace servekit::onnx {

/// An ONNX file that cannot be used: missing, unreadable, not a model, or with a graph servekit
/// cannot serve. what() names the file and what is wrong.
class graph_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// ONNX's element type (TensorProto.DataType) as servekit's; invalid for those it has none for
/// (complex numbers, STRING: ONNX strings are not served by this backend).
[[nodiscard]] constexpr data_type to_data_type(int onnx_type) noexcept {
  switch (onnx_type) {
  case DataType::FLOAT:
    return data_type::fp32;
  case DataType::UINT8:
    return data_type::uint8;
  case DataType::INT8:
    return data_type::int8;
  case DataType::UINT16:
    return data_type::uint16;
  case DataType::INT16:
    return data_type::int16;
  case DataType::INT32:
    return data_type::int32;
  case DataType::INT64:
    return data_type::int64;
  case DataType::BOOL:
    return data_type::boolean;
  case DataType::FLOAT16:
    return data_type::fp16;
  case DataType::DOUBLE:
    return data_type::fp64;
  case DataType::UINT32:
    return data_type::uint32;
  case DataType::UINT64:
    return data_type::uint64;
  case DataType::BFLOAT16:
    return data_type::bf16;
  default:
    return data_type::invalid;
  }
}

/// ONNX's name of an element type, for messages ("FLOAT", "INT64"; the number if unknown).
[[nodiscard]] inline std::string onnx_type_name(int onnx_type) {
  if (DataType_IsValid(onnx_type)) {
    return DataType_Name(static_cast<DataType>(onnx_type));
  }
  return std::to_string(onnx_type);
}

/// A graph's interface, as a model config with max_batch_size 0 lists it: the inputs that are
/// not initializers and the outputs, in the graph's order, each with its dims as the file gives
/// them (-1 for a symbolic or unknown size).
struct graph_signature {
  std::vector<tensor_config> inputs;
  std::vector<tensor_config> outputs;
  std::int64_t ir_version = 0;

  /// Whether every input and output has a first dimension of any size: a model whose config
  /// may batch along it (max_batch_size > 0), as Triton's ONNX Runtime backend decides.
  [[nodiscard]] bool batches_along_first_dim() const noexcept {
    const auto dynamic_first = [](const tensor_config& t) {
      return t.dims.rank() > 0 && t.dims[0] == -1;
    };
    for (const auto& t : inputs) {
      if (!dynamic_first(t)) {
        return false;
      }
    }
    for (const auto& t : outputs) {
      if (!dynamic_first(t)) {
        return false;
      }
    }
    return !inputs.empty() && !outputs.empty();
  }
};

namespace detail {

[[nodiscard]] inline tensor_config tensor_of(const ValueInfoProto& value, std::string_view role,
                                             const std::string& file) {
  if (!value.has_type() || !value.type().has_tensor_type()) {
    throw graph_error(file + ": graph " + std::string{role} + " '" + value.name() +
                      "' is not a tensor (a sequence, map or optional): not served");
  }
  const auto& tensor = value.type().tensor_type();
  const data_type type = to_data_type(tensor.elem_type());
  if (type == data_type::invalid) {
    throw graph_error(file + ": graph " + std::string{role} + " '" + value.name() +
                      "' has element type " + onnx_type_name(tensor.elem_type()) +
                      ", which servekit has no data type for");
  }
  std::vector<std::int64_t> dims;
  for (const auto& d : tensor.shape().dim()) {
    dims.push_back(d.value_case() == TensorShapeProto::Dimension::kDimValue ? d.dim_value() : -1);
  }
  const auto s = shape::from(dims);
  if (!s) {
    throw graph_error(file + ": graph " + std::string{role} + " '" + value.name() + "' has rank " +
                      std::to_string(dims.size()) + ", more than servekit's " +
                      std::to_string(shape::max_rank));
  }
  tensor_config out;
  out.name = value.name();
  out.type = type;
  out.dims = *s;
  return out;
}

} // namespace detail

/// The signature of a parsed model. `file` names it in messages.
[[nodiscard]] inline graph_signature signature_of(const ModelProto& model,
                                                  const std::string& file) {
  if (!model.has_graph()) {
    throw graph_error(file + ": the model has no graph");
  }
  const auto& graph = model.graph();
  // Before IR version 4 every initializer was also listed as a graph input; those are weights,
  // not inputs a request gives.
  std::set<std::string, std::less<>> initializers;
  for (const auto& init : graph.initializer()) {
    initializers.insert(init.name());
  }
  graph_signature out;
  out.ir_version = model.ir_version();
  for (const auto& input : graph.input()) {
    if (!initializers.contains(input.name())) {
      out.inputs.push_back(detail::tensor_of(input, "input", file));
    }
  }
  for (const auto& output : graph.output()) {
    out.outputs.push_back(detail::tensor_of(output, "output", file));
  }
  if (out.outputs.empty()) {
    throw graph_error(file + ": the graph has no outputs");
  }
  return out;
}

/// The bytes of `file`; graph_error naming it if it cannot be read.
[[nodiscard]] inline std::string read_file_bytes(const std::filesystem::path& file) {
  std::ifstream in{file, std::ios::binary};
  if (!in) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(file, ec);
    throw graph_error(file.string() + (exists ? ": cannot be read" : ": no such file"));
  }
  return std::string{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

/// Parses `bytes` (the contents of `file`) as an ONNX model.
[[nodiscard]] inline ModelProto parse_model(const std::string& bytes, const std::string& file) {
  ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes)) {
    throw graph_error(file + ": not an ONNX model (the protobuf does not parse as a ModelProto)");
  }
  return model;
}

/// The signature of the model in `file`.
[[nodiscard]] inline graph_signature read_graph_signature(const std::filesystem::path& file) {
  return signature_of(parse_model(read_file_bytes(file), file.string()), file.string());
}

/// A serialized TensorProto (an ONNX test set's input_<k>.pb or output_<k>.pb) as a servekit
/// tensor, its values little-endian in host memory. graph_error for a file that does not parse,
/// a type servekit has none for, data stored outside the file, or a value count that does not
/// match the dims.
[[nodiscard]] inline tensor read_tensor_file(const std::filesystem::path& file) {
  const std::string bytes = read_file_bytes(file);
  TensorProto proto;
  if (!proto.ParseFromString(bytes)) {
    throw graph_error(file.string() + ": not a TensorProto");
  }
  const std::string name = file.string();
  if (proto.data_location() != 0) {
    throw graph_error(name + ": the tensor's data is stored outside the file");
  }
  tensor out;
  out.name = proto.name();
  out.type = to_data_type(proto.data_type());
  if (out.type == data_type::invalid) {
    throw graph_error(name + ": element type " + onnx_type_name(proto.data_type()) +
                      " has no servekit data type");
  }
  std::vector<std::int64_t> dims{proto.dims().begin(), proto.dims().end()};
  const auto s = shape::from(dims);
  if (!s) {
    throw graph_error(name + ": rank " + std::to_string(dims.size()) + " is more than " +
                      std::to_string(shape::max_rank));
  }
  out.shape = *s;
  const auto count = static_cast<std::size_t>(out.shape.element_count());
  const std::size_t element = byte_size(out.type);
  out.data = buffer::allocate(count * element);
  std::byte* dst = out.data.data();

  if (!proto.raw_data().empty()) {
    if (proto.raw_data().size() != count * element) {
      throw graph_error(name + ": raw_data holds " + std::to_string(proto.raw_data().size()) +
                        " bytes, dims need " + std::to_string(count * element));
    }
    std::memcpy(dst, proto.raw_data().data(), proto.raw_data().size());
    return out;
  }
  // The typed fields: each value narrowed to the element type (as ONNX stores it).
  const auto store = [&](const auto& values) {
    if (static_cast<std::size_t>(values.size()) != count) {
      throw graph_error(name + ": " + std::to_string(values.size()) + " values, dims need " +
                        std::to_string(count));
    }
    std::size_t i = 0;
    for (const auto v : values) {
      switch (out.type) {
      case data_type::fp32: {
        const auto x = static_cast<float>(v);
        std::memcpy(dst + i * element, &x, element);
        break;
      }
      case data_type::fp64: {
        const auto x = static_cast<double>(v);
        std::memcpy(dst + i * element, &x, element);
        break;
      }
      default: {
        // Integers, BOOL, and FLOAT16/BFLOAT16 as their bits: the low `element` bytes of the
        // value, little-endian.
        const auto x = static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
        std::memcpy(dst + i * element, &x, element);
        break;
      }
      }
      ++i;
    }
  };
  switch (out.type) {
  case data_type::fp32:
    store(proto.float_data());
    break;
  case data_type::fp64:
    store(proto.double_data());
    break;
  case data_type::int64:
    store(proto.int64_data());
    break;
  case data_type::uint32:
  case data_type::uint64:
    store(proto.uint64_data());
    break;
  default:
    store(proto.int32_data());
    break;
  }
  return out;
}

} // namespace servekit::onnx
