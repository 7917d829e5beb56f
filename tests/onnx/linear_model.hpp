#pragma once
// The ONNX tests' model, written by graph_builder: OUTPUT0 = relu(INPUT0 · W + B), INPUT0
// [N, 4], OUTPUT0 [N, 3], with fixed weights, and the same computation in plain C++.

#include <servekit/core/data_type.hpp>
#include <servekit/onnx/graph_builder.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace onnx_tests {

inline std::vector<float> weights() {
  std::vector<float> w(12);
  for (std::size_t i = 0; i < w.size(); ++i) {
    w[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5) / 4.0F;
  }
  return w;
}
inline const std::vector<float> bias = {0.5F, -0.25F, 0.125F};

/// The model's output for `rows` rows of 4 values, computed here.
inline std::vector<float> reference(const std::vector<float>& x) {
  const auto w = weights();
  const std::size_t rows = x.size() / 4;
  std::vector<float> y(rows * 3);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < 3; ++c) {
      float sum = bias[c];
      for (std::size_t k = 0; k < 4; ++k) {
        sum += x[r * 4 + k] * w[k * 3 + c];
      }
      y[r * 3 + c] = sum > 0.0F ? sum : 0.0F;
    }
  }
  return y;
}

inline servekit::onnx::graph_builder linear_graph(std::int64_t features = 4) {
  const auto w = weights();
  servekit::onnx::graph_builder g{"linear"};
  g.input("INPUT0", servekit::data_type::fp32, {-1, features})
      .output("OUTPUT0", servekit::data_type::fp32, {-1, 3})
      .initializer("W", {4, 3}, w)
      .initializer("B", {3}, bias)
      .node("MatMul", {"INPUT0", "W"}, {"XW"})
      .node("Add", {"XW", "B"}, {"XWB"})
      .node("Relu", {"XWB"}, {"OUTPUT0"});
  return g;
}

} // namespace onnx_tests
