// The mlp backend's GPU path (CUDA builds; every test skips without a device): FP32 and FP16
// against the float64 reference, CUDA graphs on and off, padding up to a graph size and its
// statistics, and the graph cache's captures and replays.
#include "gpu_test.hpp"
#include "mlp_test_support.hpp"

#include "mlp/mlp_backend.hpp"
#include "mlp/mlp_weights.hpp"

#include <servekit/cuda/device.hpp>
#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace {

using cuda_examples::make_mlp_weights;
using cuda_examples::mlp_backend;
using mlp_test::mlp_model;
using servekit::instance_group_kind;

class MlpGpu : public gpu_test::on_gpu {};

std::vector<std::int64_t> widths(const std::string& layers) {
  return cuda_examples::detail::parse_positive_list(layers).value();
}

TEST_F(MlpGpu, Fp32MatchesTheReference) {
  mlp_model m{mlp_test::options("1024,4096,1024", 16, instance_group_kind::kind_gpu)};
  const std::vector<std::int64_t> rows{1, 1, 3, 1, 2, 1, 1, 1, 1, 4};
  mlp_test::expect_matches_reference(m, make_mlp_weights(widths("1024,4096,1024"), 1), rows, 1e-3);
}

TEST_F(MlpGpu, Fp16MatchesTheReferenceWithinOnePercent) {
  mlp_model m{mlp_test::options("1024,4096,1024", 16, instance_group_kind::kind_gpu,
                                {{"precision", "FP16"}})};
  const std::vector<std::int64_t> rows{1, 2, 1, 5, 1};
  mlp_test::expect_matches_reference(m, make_mlp_weights(widths("1024,4096,1024"), 1), rows, 1e-2);
}

TEST_F(MlpGpu, DeeperModelsWithGraphsMatchTheReference) {
  for (const char* precision : {"FP32", "FP16"}) {
    mlp_model m{mlp_test::options("256,256,256,256", 8, instance_group_kind::kind_gpu,
                                  {{"precision", precision}, {"cuda_graphs", "true"}})};
    const std::vector<std::int64_t> rows{1, 2, 1, 3, 1};
    mlp_test::expect_matches_reference(m, make_mlp_weights(widths("256,256,256,256"), 1), rows,
                                       std::string{precision} == "FP32" ? 1e-3 : 1e-2);
  }
}

/// A GPU instance built by hand, as a shell would build it, for tests that call execute
/// directly and look at the instance afterwards.
struct direct_instance {
  servekit::parameter_map parameters;
  std::vector<servekit::tensor_config> inputs;
  std::vector<servekit::tensor_config> outputs;
  servekit::instance_context context;

  direct_instance(const std::string& layers, std::int32_t max_batch,
                  servekit::parameter_map extra) {
    const auto w = widths(layers);
    parameters = std::move(extra);
    parameters.emplace("layers", layers);
    inputs = {{"INPUT0", servekit::data_type::fp32, servekit::shape{w.front()}}};
    outputs = {{"OUTPUT0", servekit::data_type::fp32, servekit::shape{w.back()}}};
    context.model_name = "mlp";
    context.instance_name = "mlp_0_0";
    context.kind = servekit::instance_kind::gpu;
    context.device_id = 0;
    context.max_batch_size = max_batch;
    context.inputs = inputs;
    context.outputs = outputs;
    context.parameters = &parameters;
  }
};

/// Runs one batch of `rows` single-row requests directly on `backend`; returns the outputs in
/// batch order and the padding the backend reported.
std::pair<std::vector<std::vector<float>>, std::int64_t>
execute_directly(mlp_backend& backend, const servekit::instance_context& context, std::int64_t rows,
                 std::int64_t width) {
  std::vector<servekit::request> requests;
  std::vector<servekit::response_sink> sinks(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) {
    requests.push_back(
        mlp_test::request(mlp_test::inputs(1, width, static_cast<std::uint64_t>(i)), 1, width));
  }
  servekit::batch b;
  b.bind(context, /*decoupled=*/false);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    b.add(requests[i], 1, sinks[i]);
  }
  backend.execute(b);
  std::vector<std::vector<float>> out;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const servekit::response& r = b.response(i);
    EXPECT_TRUE(r.ok()) << r.status.message();
    const servekit::tensor* y = r.find_output("OUTPUT0");
    if (y != nullptr) {
      const auto v = y->values<float>();
      out.emplace_back(v.begin(), v.end());
    }
  }
  return {std::move(out), b.padding()};
}

TEST_F(MlpGpu, GraphsOnAndOffComputeTheSame) {
  direct_instance eager_instance{"256,256,256,256", 8, {{"cuda_graphs", "false"}}};
  direct_instance graph_instance{"256,256,256,256", 8, {{"cuda_graphs", "true"}}};
  mlp_backend eager{eager_instance.context};
  mlp_backend graphs{graph_instance.context};
  for (const std::int64_t rows : {1, 8, 3, 8, 8}) {
    const auto [a, pad_a] = execute_directly(eager, eager_instance.context, rows, 256);
    const auto [b, pad_b] = execute_directly(graphs, graph_instance.context, rows, 256);
    EXPECT_EQ(pad_a, 0);
    EXPECT_EQ(pad_b, 0);
    ASSERT_EQ(a.size(), static_cast<std::size_t>(rows));
    ASSERT_EQ(b.size(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      // A replay runs the captured kernels on the same data: the same numbers (to rounding, in
      // case cuBLAS picked another algorithm while capturing).
      const std::vector<double> eager_row(a[i].begin(), a[i].end());
      EXPECT_LT(mlp_test::relative_error(b[i], eager_row), 1e-6)
          << "row " << i << " of a batch of " << rows;
    }
  }
  ASSERT_NE(graphs.device_runner(), nullptr);
  const auto& cache = graphs.device_runner()->graphs();
  EXPECT_EQ(cache.captures(), 3U) << "one graph per batch size seen: 1, 8, 3";
  EXPECT_EQ(cache.replays(), 2U) << "the second and third batch of 8";
  EXPECT_EQ(eager.device_runner()->graphs().captures(), 0U);
}

TEST_F(MlpGpu, PadsToTheNextGraphSizeAndReportsIt) {
  direct_instance instance{"64,128,32",
                           8,
                           {{"cuda_graphs", "true"},
                            {"graph_batch_sizes", "2,4,8"},
                            {"pad_to_graph_batch_size", "true"}}};
  mlp_backend backend{instance.context};
  const auto weights = make_mlp_weights(widths("64,128,32"), 1);
  const std::pair<std::int64_t, std::int64_t> cases[] = {{1, 1}, {3, 1}, {4, 0}, {5, 3}, {8, 0}};
  for (const auto& [rows, padding] : cases) {
    const auto [outputs, reported] = execute_directly(backend, instance.context, rows, 64);
    EXPECT_EQ(reported, padding) << rows << " rows";
    ASSERT_EQ(outputs.size(), static_cast<std::size_t>(rows));
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const auto x = mlp_test::inputs(1, 64, i);
      EXPECT_LT(mlp_test::relative_error(outputs[i], cuda_examples::mlp_reference(weights, x, 1)),
                1e-3);
    }
  }
  EXPECT_EQ(backend.device_runner()->graphs().captures(), 3U) << "sizes 2, 4 and 8";
}

TEST_F(MlpGpu, PaddingShowsInTheModelStatistics) {
  servekit::test_hooks hooks;
  hooks.delay_scheduler = 3; // hold the batcher until 3 requests wait: one batch of 3
  mlp_model m{mlp_test::options("64,128,32", 8, instance_group_kind::kind_gpu,
                                {{"cuda_graphs", "true"},
                                 {"graph_batch_sizes", "4,8"},
                                 {"pad_to_graph_batch_size", "true"}}),
              hooks};
  const std::vector<std::int64_t> rows{1, 1, 1};
  mlp_test::expect_matches_reference(m, make_mlp_weights(widths("64,128,32"), 1), rows, 1e-3);
  const auto stats = m.statistics();
  EXPECT_EQ(stats.execution_count, 1U);
  EXPECT_EQ(stats.padding_elements, 1U) << "3 rows ran as 4";
  EXPECT_EQ(stats.padded_executions, 1U);
}

TEST_F(MlpGpu, SeesTheGpusAndRunsAGpuInstanceOnItsOwnStream) {
  // device_count() is what KIND_AUTO places instances by.
  EXPECT_EQ(mlp_backend::device_count(), servekit::cuda::device_count());
  direct_instance instance{"16,8", 4, {}};
  mlp_backend backend{instance.context};
  EXPECT_TRUE(backend.on_gpu());
  EXPECT_NE(backend.stream(), nullptr) << "a created stream, not the legacy default stream";
  mlp_backend other{instance.context};
  EXPECT_NE(other.stream(), backend.stream());
}

} // namespace
