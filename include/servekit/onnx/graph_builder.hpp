#pragma once
/// \file
/// Writes small ONNX models: inputs, outputs, FP32 initializers and nodes with their attributes.
/// For tests and examples that need a model file and must not download one:
///
///     servekit::onnx::graph_builder g{"linear"};
///     g.input("INPUT0", servekit::data_type::fp32, {-1, 4})     // -1: any size ("N")
///         .output("OUTPUT0", servekit::data_type::fp32, {-1, 3})
///         .initializer("W", {4, 3}, weights)
///         .node("MatMul", {"INPUT0", "W"}, {"OUTPUT0"});
///     g.save("models/linear/1/model.onnx");

#include <servekit/core/data_type.hpp>
#include <servekit/onnx/onnx_model.pb.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace servekit::onnx {

/// ONNX's element type for servekit's (UNDEFINED for BYTES, which ONNX calls STRING and this
/// writer does not write).
[[nodiscard]] constexpr int to_onnx_type(data_type type) noexcept {
  switch (type) {
  case data_type::fp32:
    return DataType::FLOAT;
  case data_type::uint8:
    return DataType::UINT8;
  case data_type::int8:
    return DataType::INT8;
  case data_type::uint16:
    return DataType::UINT16;
  case data_type::int16:
    return DataType::INT16;
  case data_type::int32:
    return DataType::INT32;
  case data_type::int64:
    return DataType::INT64;
  case data_type::boolean:
    return DataType::BOOL;
  case data_type::fp16:
    return DataType::FLOAT16;
  case data_type::fp64:
    return DataType::DOUBLE;
  case data_type::uint32:
    return DataType::UINT32;
  case data_type::uint64:
    return DataType::UINT64;
  case data_type::bf16:
    return DataType::BFLOAT16;
  default:
    return DataType::UNDEFINED;
  }
}

/// A node attribute: graph_builder::node's last argument.
[[nodiscard]] inline AttributeProto int_attribute(std::string name, std::int64_t value) {
  AttributeProto a;
  a.set_name(std::move(name));
  a.set_type(AttributeProto::INT);
  a.set_i(value);
  return a;
}
[[nodiscard]] inline AttributeProto ints_attribute(std::string name,
                                                   std::initializer_list<std::int64_t> values) {
  AttributeProto a;
  a.set_name(std::move(name));
  a.set_type(AttributeProto::INTS);
  for (const auto v : values) {
    a.add_ints(v);
  }
  return a;
}
[[nodiscard]] inline AttributeProto float_attribute(std::string name, float value) {
  AttributeProto a;
  a.set_name(std::move(name));
  a.set_type(AttributeProto::FLOAT);
  a.set_f(value);
  return a;
}

/// Builds one ModelProto (IR version 7, the default domain at `opset`).
class graph_builder {
public:
  explicit graph_builder(std::string name, std::int64_t opset = 13) {
    model_.set_ir_version(7);
    model_.set_producer_name("servekit");
    auto* set = model_.add_opset_import();
    set->set_domain("");
    set->set_version(opset);
    model_.mutable_graph()->set_name(std::move(name));
  }

  /// A graph input; a dim of -1 is written as the symbolic size "N".
  graph_builder& input(const std::string& name, data_type type,
                       std::initializer_list<std::int64_t> dims) {
    describe(model_.mutable_graph()->add_input(), name, type, dims);
    return *this;
  }
  graph_builder& output(const std::string& name, data_type type,
                        std::initializer_list<std::int64_t> dims) {
    describe(model_.mutable_graph()->add_output(), name, type, dims);
    return *this;
  }

  /// A constant FP32 tensor (weights), stored as raw little-endian bytes.
  graph_builder& initializer(const std::string& name, std::initializer_list<std::int64_t> dims,
                             std::span<const float> values) {
    std::int64_t count = 1;
    for (const auto d : dims) {
      count *= d;
    }
    if (count != static_cast<std::int64_t>(values.size())) {
      throw std::invalid_argument("initializer '" + name + "': " + std::to_string(values.size()) +
                                  " values for " + std::to_string(count) + " elements");
    }
    TensorProto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(DataType::FLOAT);
    for (const auto d : dims) {
      t->add_dims(d);
    }
    t->set_raw_data(values.data(), values.size() * sizeof(float));
    return *this;
  }

  graph_builder& node(const std::string& op_type, std::initializer_list<std::string> inputs,
                      std::initializer_list<std::string> outputs,
                      std::initializer_list<AttributeProto> attributes = {}) {
    NodeProto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op_type);
    n->set_name(op_type + "_" + std::to_string(model_.graph().node_size()));
    for (const auto& i : inputs) {
      n->add_input(i);
    }
    for (const auto& o : outputs) {
      n->add_output(o);
    }
    for (const auto& a : attributes) {
      *n->add_attribute() = a;
    }
    return *this;
  }

  [[nodiscard]] std::string serialize() const { return model_.SerializeAsString(); }

  /// Writes the model to `file`, creating its folder.
  void save(const std::filesystem::path& file) const {
    if (file.has_parent_path()) {
      std::filesystem::create_directories(file.parent_path());
    }
    std::ofstream out{file, std::ios::binary | std::ios::trunc};
    const std::string bytes = serialize();
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      throw std::runtime_error("cannot write " + file.string());
    }
  }

private:
  static void describe(ValueInfoProto* value, const std::string& name, data_type type,
                       std::initializer_list<std::int64_t> dims) {
    value->set_name(name);
    auto* tensor = value->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(to_onnx_type(type));
    auto* s = tensor->mutable_shape();
    for (const auto d : dims) {
      auto* dim = s->add_dim();
      if (d < 0) {
        dim->set_dim_param("N");
      } else {
        dim->set_dim_value(d);
      }
    }
  }

  ModelProto model_;
};

} // namespace servekit::onnx
