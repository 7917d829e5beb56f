#pragma once
// What the mlp tests share: model options in code, deterministic inputs, submitting a set of
// requests at once (so the dynamic batcher forms real batches), and the error measure.

#include "mlp/mlp_backend.hpp"
#include "mlp/mlp_host.hpp"
#include "mlp/mlp_weights.hpp"

#include <servekit/config/model_config_json.hpp>
#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace mlp_test {

using mlp_model = servekit::model<cuda_examples::mlp_backend, servekit::dynamic_batcher<>>;

/// A model of `layers` ("64,256,32") on one instance of `kind`, batching up to `max_batch`.
/// `parameters` are added to (or override) the layers parameter.
inline servekit::model_options options(const std::string& layers, std::int32_t max_batch,
                                       servekit::instance_group_kind kind,
                                       servekit::parameter_map parameters = {}) {
  const auto widths = cuda_examples::detail::parse_positive_list(layers).value();
  servekit::model_options o;
  o.name = "mlp";
  o.max_batch_size = max_batch;
  o.input = {{"INPUT0", servekit::data_type::fp32, servekit::shape{widths.front()}}};
  o.output = {{"OUTPUT0", servekit::data_type::fp32, servekit::shape{widths.back()}}};
  o.dynamic_batching = servekit::dynamic_batching_options{};
  servekit::instance_group_options group;
  group.kind = kind;
  group.count = 1;
  if (kind == servekit::instance_group_kind::kind_gpu) {
    group.gpus = {0};
  }
  o.instance_group = {group};
  o.parameters = std::move(parameters);
  o.parameters.emplace("layers", layers);
  return o;
}

/// `rows` x `width` inputs in [-1, 1), a pure function of (row, column, salt).
inline std::vector<float> inputs(std::int64_t rows, std::int64_t width, std::uint64_t salt = 0) {
  std::vector<float> v(static_cast<std::size_t>(rows * width));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint64_t h = cuda_examples::detail::splitmix64(salt * 0x100000001b3ULL + i);
    v[i] = static_cast<float>(static_cast<double>(h >> 11U) * 0x1.0p-53 * 2.0 - 1.0);
  }
  return v;
}

/// max |got - want| / max |want|: the error relative to the output's scale. (Element-wise
/// relative error would blow up on outputs near zero, which a ReLU network has plenty of.)
inline double relative_error(std::span<const float> got, std::span<const double> want) {
  double scale = 0.0;
  double error = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    error = std::max(error, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return scale == 0.0 ? error : error / scale;
}

/// A request of `rows` rows (shape [rows, width]).
inline servekit::request request(std::span<const float> values, std::int64_t rows,
                                 std::int64_t width) {
  servekit::request r;
  r.inputs.push_back(servekit::make_tensor("INPUT0", servekit::data_type::fp32,
                                           servekit::shape{rows, width}, values));
  return r;
}

/// Submits one request per entry of `rows_per_request` at once, each with its own inputs, and
/// returns (inputs, response) in submission order.
template <class Model>
std::vector<std::pair<std::vector<float>, servekit::response>>
run_all(Model& m, std::span<const std::int64_t> rows_per_request, std::int64_t width) {
  std::vector<std::pair<std::vector<float>, std::future<servekit::response>>> pending;
  for (std::size_t i = 0; i < rows_per_request.size(); ++i) {
    auto values = inputs(rows_per_request[i], width, i + 1);
    auto future = m.infer(request(values, rows_per_request[i], width));
    pending.emplace_back(std::move(values), std::move(future));
  }
  std::vector<std::pair<std::vector<float>, servekit::response>> out;
  for (auto& [values, future] : pending) {
    out.emplace_back(std::move(values), future.get());
  }
  return out;
}

/// Checks every response against the float64 reference of its rows.
template <class Model>
void expect_matches_reference(Model& m, const cuda_examples::mlp_weights& weights,
                              std::span<const std::int64_t> rows_per_request, double tolerance) {
  const std::int64_t in = weights.input_width();
  const std::int64_t out = weights.output_width();
  for (auto& [values, response] : run_all(m, rows_per_request, in)) {
    ASSERT_TRUE(response.ok()) << response.status.message();
    const servekit::tensor* y = response.find_output("OUTPUT0");
    ASSERT_NE(y, nullptr);
    const std::int64_t rows = static_cast<std::int64_t>(values.size()) / in;
    EXPECT_EQ(y->shape, (servekit::shape{rows, out}));
    const auto want = cuda_examples::mlp_reference(weights, values, rows);
    EXPECT_LT(relative_error(y->values<float>(), want), tolerance);
  }
}

/// A bundled model's config (examples/models/<model>/config.json).
inline servekit::model_options bundled(const std::string& model) {
  const auto dir = std::filesystem::path{SERVEKIT_EXAMPLE_MODELS_DIR} / model;
  std::ifstream in{dir / "config.json"};
  std::stringstream text;
  text << in.rdbuf();
  auto o = servekit::load_model_config(text.str());
  o.directory = dir.string();
  return o;
}

} // namespace mlp_test
