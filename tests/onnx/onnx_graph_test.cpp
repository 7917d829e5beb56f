// onnx_graph.hpp and graph_builder.hpp: a graph's signature and ONNX test-set tensors, read
// through servekit's own description of ONNX's format, from Debian's libonnx-testdata and from
// graphs written here.

#include <servekit/core/data_type.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/onnx/graph_builder.hpp>
#include <servekit/onnx/onnx_graph.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace onnx_graph_test {

namespace fs = std::filesystem;
using servekit::data_type;
namespace onnx = servekit::onnx;

/// Debian's libonnx-testdata (install-deps.sh installs it).
const fs::path testdata{"/usr/share/libonnx-testdata/data"};

TEST(OnnxGraph, ReadsTheInputsAndOutputsOfATestGraph) {
  const auto g = onnx::read_graph_signature(testdata / "node" / "test_add" / "model.onnx");
  ASSERT_EQ(g.inputs.size(), 2U);
  EXPECT_EQ(g.inputs[0].name, "x");
  EXPECT_EQ(g.inputs[1].name, "y");
  EXPECT_EQ(g.inputs[0].type, data_type::fp32);
  EXPECT_EQ(g.inputs[0].dims, (servekit::shape{3, 4, 5}));
  ASSERT_EQ(g.outputs.size(), 1U);
  EXPECT_EQ(g.outputs[0].name, "sum");
  EXPECT_FALSE(g.batches_along_first_dim());
}

TEST(OnnxGraph, InitializersListedAsInputsAreWeightsNotInputs) {
  // Converted from PyTorch at IR version 3, where the weight and bias are graph inputs too.
  const auto g =
      onnx::read_graph_signature(testdata / "pytorch-converted" / "test_Linear" / "model.onnx");
  ASSERT_EQ(g.inputs.size(), 1U);
  ASSERT_EQ(g.outputs.size(), 1U);
}

TEST(OnnxGraph, ReadsATestSetTensor) {
  const auto t =
      onnx::read_tensor_file(testdata / "node" / "test_add" / "test_data_set_0" / "input_0.pb");
  EXPECT_EQ(t.type, data_type::fp32);
  EXPECT_EQ(t.shape, (servekit::shape{3, 4, 5}));
  EXPECT_EQ(t.values<float>().size(), 60U);
}

TEST(OnnxGraph, AWrittenGraphReadsBack) {
  const std::vector<float> w(6, 0.5F);
  onnx::graph_builder b{"g"};
  b.input("IN", data_type::fp32, {-1, 2})
      .input("W", data_type::fp32, {2, 3}) // an initializer of the same name: a weight
      .output("OUT", data_type::fp32, {-1, 3})
      .initializer("W", {2, 3}, w)
      .node("MatMul", {"IN", "W"}, {"OUT"});
  const auto g = onnx::signature_of(onnx::parse_model(b.serialize(), "g.onnx"), "g.onnx");
  ASSERT_EQ(g.inputs.size(), 1U);
  EXPECT_EQ(g.inputs[0].name, "IN");
  EXPECT_EQ(g.inputs[0].dims, (servekit::shape{-1, 2}));
  EXPECT_EQ(g.outputs[0].dims, (servekit::shape{-1, 3}));
  EXPECT_TRUE(g.batches_along_first_dim());
}

TEST(OnnxGraph, ErrorsNameTheFile) {
  try {
    (void)onnx::read_graph_signature("/nonexistent/model.onnx");
    FAIL() << "no error";
  } catch (const onnx::graph_error& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/model.onnx: no such file");
  }
  try {
    (void)onnx::parse_model("\xff\xff\xff garbage", "bad.onnx");
    FAIL() << "no error";
  } catch (const onnx::graph_error& e) {
    EXPECT_NE(std::string{e.what()}.find("bad.onnx: not an ONNX model"), std::string::npos);
  }
}

TEST(OnnxGraph, ATypeServekitHasNoNameForIsRefusedByName) {
  onnx::graph_builder b{"strings"};
  b.input("TEXT", data_type::bytes, {1}).output("OUT", data_type::fp32, {1});
  try {
    (void)onnx::signature_of(onnx::parse_model(b.serialize(), "s.onnx"), "s.onnx");
    FAIL() << "no error";
  } catch (const onnx::graph_error& e) {
    EXPECT_NE(std::string{e.what()}.find("graph input 'TEXT' has element type UNDEFINED"),
              std::string::npos)
        << e.what();
  }
}

} // namespace onnx_graph_test
