// The mlp backend's CPU path, in every build: deterministic weights, the float32 forward pass
// against the float64 reference, through servekit::model on CPU instances, and the errors a bad
// config gets.
#include "mlp_test_support.hpp"

#include "mlp/mlp_backend.hpp"
#include "mlp/mlp_host.hpp"
#include "mlp/mlp_options.hpp"
#include "mlp/mlp_weights.hpp"

#include <servekit/core/config_error.hpp>
#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using cuda_examples::make_mlp_weights;
using cuda_examples::mlp_backend;
using mlp_test::mlp_model;
using servekit::instance_group_kind;

constexpr std::int64_t small_layers[] = {64, 256, 128, 32};

TEST(MlpWeights, AreAPureFunctionOfTheSeed) {
  const auto a = make_mlp_weights(small_layers, 7);
  const auto b = make_mlp_weights(small_layers, 7);
  const auto c = make_mlp_weights(small_layers, 8);
  ASSERT_EQ(a.layers.size(), 3U);
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    EXPECT_EQ(a.layers[l].in, small_layers[l]);
    EXPECT_EQ(a.layers[l].out, small_layers[l + 1]);
    EXPECT_EQ(a.layers[l].weights, b.layers[l].weights);
    EXPECT_EQ(a.layers[l].bias, b.layers[l].bias);
    EXPECT_NE(a.layers[l].weights, c.layers[l].weights);
  }
  // Pinned values: the weights are the same on every machine and in every release, so a saved
  // output of the served model stays valid.
  EXPECT_EQ(a.layers[0].weights[0],
            cuda_examples::detail::init_value(7, 0, cuda_examples::detail::mlp_tensor::weights, 0,
                                              1.0 / std::sqrt(64.0)));
  EXPECT_FLOAT_EQ(a.layers[0].weights[0], 0.027348632F);
  EXPECT_FLOAT_EQ(a.layers[2].bias[31], 0.0851127356F);
}

TEST(MlpWeights, AreUniformWithinOneOverSqrtFanIn) {
  const auto w = make_mlp_weights(small_layers, 1);
  for (const auto& layer : w.layers) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(layer.in));
    double sum = 0.0;
    for (const float v : layer.weights) {
      ASSERT_LE(std::abs(v), bound);
      sum += v;
    }
    // Mean near zero: within five standard errors of a uniform(-b, b) mean.
    const double n = static_cast<double>(layer.weights.size());
    EXPECT_LT(std::abs(sum / n), 5.0 * bound / std::sqrt(3.0 * n));
  }
}

TEST(MlpHost, ForwardMatchesTheFloat64Reference) {
  const auto w = make_mlp_weights(small_layers, 3);
  cuda_examples::mlp_host_runner runner{w, 16};
  for (const std::int64_t rows : {1, 7, 16}) {
    const auto x = mlp_test::inputs(rows, 64, static_cast<std::uint64_t>(rows));
    std::vector<float> y(static_cast<std::size_t>(rows * 32));
    runner.forward(x, rows, y);
    EXPECT_LT(mlp_test::relative_error(y, cuda_examples::mlp_reference(w, x, rows)), 1e-5)
        << rows << " rows";
  }
}

TEST(MlpHost, TheReferenceAppliesBiasAndReluWhereExpected) {
  // One input, one hidden unit, one output, by hand: y = w1 * relu(w0 * x + b0) + b1.
  const std::int64_t widths[] = {1, 1, 1};
  const auto w = make_mlp_weights(widths, 5);
  const double w0 = w.layers[0].weights[0];
  const double b0 = w.layers[0].bias[0];
  const double w1 = w.layers[1].weights[0];
  const double b1 = w.layers[1].bias[0];
  for (const float x : {-1.0F, 0.5F, 1.0F}) {
    const double want = w1 * std::max(w0 * x + b0, 0.0) + b1;
    const std::vector<float> input{x};
    EXPECT_DOUBLE_EQ(cuda_examples::mlp_reference(w, input, 1)[0], want);
  }
}

TEST(MlpBackend, CpuInstancesMatchTheReferenceThroughTheModel) {
  mlp_model m{mlp_test::options("1024,4096,1024", 8, instance_group_kind::kind_cpu)};
  const auto weights = make_mlp_weights(std::vector<std::int64_t>{1024, 4096, 1024}, 1);
  // 12 single rows and a request of 3 rows, submitted at once: batches of several requests.
  const std::vector<std::int64_t> rows{1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  mlp_test::expect_matches_reference(m, weights, rows, 1e-3);
  const auto stats = m.statistics();
  EXPECT_EQ(stats.inference_count, 15U);
  EXPECT_LT(stats.execution_count, 13U) << "the dynamic batcher should have batched";
  EXPECT_EQ(stats.padding_elements, 0U) << "the CPU path never pads";
}

TEST(MlpBackend, TheSeedParameterPicksTheWeights) {
  mlp_model m{mlp_test::options("16,8", 4, instance_group_kind::kind_cpu, {{"seed", "99"}})};
  const std::vector<std::int64_t> rows{2};
  mlp_test::expect_matches_reference(m, make_mlp_weights(std::vector<std::int64_t>{16, 8}, 99),
                                     rows, 1e-5);
}

TEST(MlpBackend, RunsWithoutBatching) {
  // max_batch_size 0: requests carry no batch dimension and run one at a time.
  auto o = mlp_test::options("32,16", 0, instance_group_kind::kind_cpu);
  o.dynamic_batching.reset();
  servekit::model<mlp_backend> m{o};
  const auto x = mlp_test::inputs(1, 32);
  servekit::request r;
  r.inputs.push_back(servekit::make_tensor("INPUT0", servekit::data_type::fp32, servekit::shape{32},
                                           std::span<const float>{x}));
  const auto response = m.infer(std::move(r)).get();
  ASSERT_TRUE(response.ok()) << response.status.message();
  const servekit::tensor* y = response.find_output("OUTPUT0");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->shape, (servekit::shape{16}));
  const auto w = make_mlp_weights(std::vector<std::int64_t>{32, 16}, 1);
  EXPECT_LT(mlp_test::relative_error(y->values<float>(), cuda_examples::mlp_reference(w, x, 1)),
            1e-5);
}

TEST(MlpBackend, KindAutoServesOnWhateverThisMachineHas) {
  // No GPU here: KIND_AUTO means the CPU. On a GPU machine it means the GPU, FP32, which holds
  // the same tolerance.
  mlp_model m{mlp_test::options("128,256,64", 8, instance_group_kind::kind_auto)};
  const std::vector<std::int64_t> rows{1, 2, 1, 4};
  mlp_test::expect_matches_reference(
      m, make_mlp_weights(std::vector<std::int64_t>{128, 256, 64}, 1), rows, 1e-3);
}

TEST(MlpBackend, TheBundledConfigServesOnThisMachine) {
  // examples/models/gpu_mlp: KIND_AUTO, so the server is ready with or without a GPU.
  mlp_model m{mlp_test::bundled("gpu_mlp")};
  const std::vector<std::int64_t> rows{1, 2};
  mlp_test::expect_matches_reference(
      m, make_mlp_weights(std::vector<std::int64_t>{1024, 4096, 1024}, 1), rows, 1e-3);
}

TEST(MlpBackend, DeviceCountIsZeroWithoutAGpu) {
  // A build without CUDA never sees a GPU; a CUDA build sees what the driver reports.
  EXPECT_GE(mlp_backend::device_count(), 0);
#if !defined(SERVEKIT_HAS_CUDA)
  EXPECT_EQ(mlp_backend::device_count(), 0);
#endif
}

/// The message a model with `o` fails to load with ("" if it loads).
std::string load_error(const servekit::model_options& o) {
  try {
    mlp_model m{o};
    return "";
  } catch (const servekit::config_error& e) {
    return e.what();
  }
}

TEST(MlpBackendConfig, BadLayersAreRefusedNamingTheParameter) {
  for (const char* layers : {"1024", "", "1024,,8", "1024,0,8", "a,b", "8,-4", "4,2x"}) {
    auto o = mlp_test::options("8,4", 4, instance_group_kind::kind_cpu);
    o.parameters["layers"] = layers;
    const std::string error = load_error(o);
    EXPECT_NE(error.find("parameter 'layers' must be at least two positive layer widths"),
              std::string::npos)
        << "layers \"" << layers << "\": " << error;
  }
  auto huge = mlp_test::options("8,4", 4, instance_group_kind::kind_cpu);
  huge.parameters["layers"] = "65536,65536";
  EXPECT_NE(load_error(huge).find("a model of at most"), std::string::npos) << load_error(huge);
}

TEST(MlpBackendConfig, DimsThatDisagreeWithTheLayersAreRefused) {
  auto o = mlp_test::options("1024,4096,1024", 4, instance_group_kind::kind_cpu);
  o.input[0].dims = servekit::shape{512};
  const std::string input_error = load_error(o);
  EXPECT_NE(input_error.find("input 'INPUT0' must have dims [1024] (the first width of parameter "
                             "'layers'), but the config declares [512]"),
            std::string::npos)
      << input_error;

  o = mlp_test::options("1024,4096,10", 4, instance_group_kind::kind_cpu);
  o.output[0].dims = servekit::shape{1024};
  const std::string output_error = load_error(o);
  EXPECT_NE(output_error.find("output 'OUTPUT0' must have dims [10]"), std::string::npos)
      << output_error;

  o = mlp_test::options("8,4", 4, instance_group_kind::kind_cpu);
  o.input.clear(); // then the backend's own declaration, dims [-1], stands: no width
  EXPECT_NE(load_error(o).find("input 'INPUT0' must have dims [8] (the first width of parameter "
                               "'layers'), but the config declares [-1]"),
            std::string::npos)
      << load_error(o);
}

TEST(MlpBackendConfig, OtherBadParametersAreRefusedNamingThem) {
  const std::pair<const char*, const char*> cases[] = {
      {"precision", "FP64"},          {"cuda_graphs", "yes"}, {"pad_to_graph_batch_size", "1"},
      {"graph_batch_sizes", "1,0,4"}, {"seed", "-1"},
  };
  for (const auto& [name, value] : cases) {
    auto o = mlp_test::options("8,4", 4, instance_group_kind::kind_cpu);
    o.parameters[name] = value;
    const std::string error = load_error(o);
    EXPECT_NE(error.find("parameter '" + std::string{name} + "' must be"), std::string::npos)
        << name << "=" << value << ": " << error;
  }
}

TEST(MlpBackendConfig, GpuOptionsAreAcceptedOnCpuInstances) {
  // A config written for a GPU still serves on the CPU: graphs and FP16 do not apply there.
  mlp_model m{mlp_test::options("16,8", 4, instance_group_kind::kind_cpu,
                                {{"precision", "FP16"},
                                 {"cuda_graphs", "true"},
                                 {"graph_batch_sizes", "1,2,4"},
                                 {"pad_to_graph_batch_size", "true"}})};
  const std::vector<std::int64_t> rows{1, 2, 1};
  mlp_test::expect_matches_reference(m, make_mlp_weights(std::vector<std::int64_t>{16, 8}, 1), rows,
                                     1e-5);
}

TEST(MlpBackend, ARequestOfTheWrongWidthIsRejectedAtSubmit) {
  mlp_model m{mlp_test::options("16,8", 4, instance_group_kind::kind_cpu)};
  const auto x = mlp_test::inputs(1, 15);
  const auto response = m.infer(mlp_test::request(x, 1, 15)).get();
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(response.status.message().find("INPUT0"), std::string::npos)
      << response.status.message();
}

} // namespace
