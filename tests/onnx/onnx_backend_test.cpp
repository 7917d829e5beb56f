// servekit::onnx::backend: ONNX models through OpenCV's DNN module, auto-completed from the
// graph, batched along dim 0, and every load and run error named. The models are written by
// graph_builder into a temporary folder.

#include "archetypes/temp_repository.hpp"
#include "onnx/linear_model.hpp"

#include <servekit/core/config_error.hpp>
#include <servekit/core/request_builder.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/onnx.hpp>
#include <servekit/runtime/auto_complete.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/schedule/default_scheduler.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

namespace onnx_backend_test {

namespace fs = std::filesystem;
using servekit::data_type;
namespace onnx = servekit::onnx;
using onnx_tests::linear_graph;
using onnx_tests::reference;

/// A version folder holding the model as model.onnx, and options that point at it.
struct model_folder {
  archetypes::temp_repository files;
  fs::path dir = files.root() / "linear" / "1";

  explicit model_folder(const onnx::graph_builder& graph, const std::string& file = "model.onnx") {
    graph.save(dir / file);
  }
  [[nodiscard]] servekit::model_options options() const {
    servekit::model_options o;
    o.name = "linear";
    o.directory = dir.string();
    return o;
  }
};

std::vector<float> row_values(std::size_t rows, float first) {
  std::vector<float> x(rows * 4);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = first + static_cast<float>(i) * 0.5F - 1.0F;
  }
  return x;
}

servekit::request linear_request(const std::string& id, const std::vector<float>& x) {
  return servekit::request_builder{id}
      .input("INPUT0", {static_cast<std::int64_t>(x.size() / 4), 4}, x)
      .build();
}

void expect_near(std::span<const float> got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5F) << "element " << i;
  }
}

/// The message of the config_error building `options` throws ("" if it builds).
template <class Model>
std::string load_error(const servekit::model_options& options) {
  try {
    Model m{options};
  } catch (const servekit::config_error& e) {
    return e.what();
  }
  return "";
}

using batching_model = servekit::model<onnx::backend, servekit::dynamic_batcher<>>;
using plain_model = servekit::model<onnx::backend>;

// -- auto-complete ------------------------------------------------------------------------------

TEST(OnnxAutoComplete, InputsOutputsAndBatchingComeFromTheGraph) {
  const model_folder folder{linear_graph()};
  const auto config = servekit::auto_completed<onnx::backend>(folder.options());
  // Every input and output has a first dim of any size: Triton's default max_batch_size 4 and
  // dynamic batching.
  EXPECT_EQ(config.max_batch_size, 4);
  EXPECT_TRUE(config.dynamic_batching.has_value());
  ASSERT_EQ(config.input.size(), 1U);
  EXPECT_EQ(config.input[0].name, "INPUT0");
  EXPECT_EQ(config.input[0].type, data_type::fp32);
  EXPECT_EQ(config.input[0].dims, (servekit::shape{4}));
  ASSERT_EQ(config.output.size(), 1U);
  EXPECT_EQ(config.output[0].name, "OUTPUT0");
  EXPECT_EQ(config.output[0].dims, (servekit::shape{3}));
}

TEST(OnnxAutoComplete, AGraphWithFixedDimsIsNotBatched) {
  onnx::graph_builder g{"fixed"};
  g.input("X", data_type::fp32, {2, 3})
      .output("Y", data_type::fp32, {2, 3})
      .node("Relu", {"X"}, {"Y"});
  const model_folder folder{g};
  const auto config = servekit::auto_completed<onnx::backend>(folder.options());
  EXPECT_EQ(config.max_batch_size, 0);
  EXPECT_FALSE(config.dynamic_batching.has_value());
  ASSERT_EQ(config.input.size(), 1U);
  EXPECT_EQ(config.input[0].dims, (servekit::shape{2, 3}));
}

TEST(OnnxAutoComplete, WhatTheConfigSetsIsKept) {
  const model_folder folder{linear_graph()};
  auto options = folder.options();
  options.max_batch_size = 8;
  const auto config = servekit::auto_completed<onnx::backend>(options);
  EXPECT_EQ(config.max_batch_size, 8);
  EXPECT_FALSE(config.dynamic_batching.has_value()); // the config chose its max_batch_size
  EXPECT_EQ(config.input[0].dims, (servekit::shape{4}));
}

TEST(OnnxAutoComplete, TheCompletedConfigIsWhatTheModelShows) {
  const model_folder folder{linear_graph()};
  batching_model m{folder.options()};
  EXPECT_EQ(m.max_batch_size(), 4);
  ASSERT_EQ(m.inputs().size(), 1U);
  EXPECT_EQ(m.inputs()[0].name, "INPUT0");
  EXPECT_EQ(m.options().max_batch_size, 4);
}

// -- inference ------------------------------------------------------------------------------

TEST(OnnxBackend, ServesTheGraphAndMatchesTheReference) {
  const model_folder folder{linear_graph()};
  batching_model m{folder.options()};
  for (std::size_t rows = 1; rows <= 4; ++rows) {
    const auto x = row_values(rows, static_cast<float>(rows));
    const servekit::response r = m.infer(linear_request("r", x)).get();
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    ASSERT_EQ(r.outputs.size(), 1U);
    EXPECT_EQ(r.outputs[0].name, "OUTPUT0");
    EXPECT_EQ(r.outputs[0].shape, (servekit::shape{static_cast<std::int64_t>(rows), 3}));
    expect_near(r.outputs[0].values<float>(), reference(x));
  }
}

TEST(OnnxBackend, ABatchOfRequestsComputesWhatEachAloneWould) {
  const model_folder folder{linear_graph()};
  auto options = folder.options();
  options.max_batch_size = 4;
  options.dynamic_batching.emplace();
  // A long delay: the batch closes when it is full (four rows), not on time.
  options.dynamic_batching->max_queue_delay_microseconds = 10'000'000;
  batching_model m{options};
  std::vector<std::vector<float>> inputs;
  std::vector<std::future<servekit::response>> answers;
  for (int i = 0; i < 4; ++i) {
    inputs.push_back(row_values(1, static_cast<float>(i) * 3.0F));
    answers.push_back(m.infer(linear_request("r" + std::to_string(i), inputs.back())));
  }
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const servekit::response r = answers[i].get();
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(r.outputs[0].shape, (servekit::shape{1, 3}));
    expect_near(r.outputs[0].values<float>(), reference(inputs[i]));
  }
  EXPECT_EQ(m.statistics().execution_count, 1U); // one forward pass for the four
}

TEST(OnnxBackend, OtherTypesPassThroughFp32) {
  onnx::graph_builder g{"relu64"};
  g.input("X", data_type::fp64, {-1, 3})
      .output("Y", data_type::fp64, {-1, 3})
      .node("Relu", {"X"}, {"Y"});
  const model_folder folder{g};
  batching_model m{folder.options()};
  const servekit::response r =
      m.infer(servekit::request_builder{"d"}.input("X", {1, 3}, {-1.5, 0.25, 2.0}).build()).get();
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.outputs.size(), 1U);
  EXPECT_EQ(r.outputs[0].type, data_type::fp64);
  const auto y = r.outputs[0].values<double>();
  ASSERT_EQ(y.size(), 3U);
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[1], 0.25);
  EXPECT_EQ(y[2], 2.0);
}

TEST(OnnxBackend, DefaultModelFilenameIsHonoured) {
  const model_folder folder{linear_graph(), "linear.onnx"};
  auto options = folder.options();
  EXPECT_NE(load_error<batching_model>(options).find("model.onnx: no such file"),
            std::string::npos);
  options.default_model_filename = "linear.onnx";
  batching_model m{options};
  const auto x = row_values(1, 1.0F);
  const servekit::response r = m.infer(linear_request("r", x)).get();
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  expect_near(r.outputs[0].values<float>(), reference(x));
}

// -- errors ---------------------------------------------------------------------------------

TEST(OnnxBackend, AMissingFileFailsTheLoadNamingIt) {
  archetypes::temp_repository files;
  servekit::model_options options;
  options.name = "absent";
  options.directory = (files.root() / "absent" / "1").string();
  const std::string error = load_error<batching_model>(options);
  EXPECT_NE(error.find("model 'absent'"), std::string::npos) << error;
  EXPECT_NE(error.find("absent/1/model.onnx: no such file"), std::string::npos) << error;
}

TEST(OnnxBackend, ACorruptFileFailsTheLoad) {
  archetypes::temp_repository files;
  files.write_file("broken", "model.onnx", "this is not a protobuf \xff\xff\xff\xff");
  servekit::model_options options;
  options.name = "broken";
  options.directory = (files.root() / "broken").string();
  const std::string error = load_error<batching_model>(options);
  EXPECT_NE(error.find("not an ONNX model"), std::string::npos) << error;
}

TEST(OnnxBackend, AConfigThatDisagreesWithTheGraphFailsTheLoad) {
  const model_folder folder{linear_graph()};
  auto options = folder.options();
  options.max_batch_size = 4;
  options.input = {{"INPUT0", data_type::int32, servekit::shape{4}}};
  options.output = {{"OUTPUT0", data_type::fp32, servekit::shape{3}}};
  std::string error = load_error<batching_model>(options);
  EXPECT_NE(error.find("/input/0/data_type"), std::string::npos) << error;
  EXPECT_NE(error.find("'INPUT0' is TYPE_INT32"), std::string::npos) << error;
  EXPECT_NE(error.find("declares it TYPE_FP32"), std::string::npos) << error;

  options.input = {{"INPUT0", data_type::fp32, servekit::shape{5}}};
  error = load_error<batching_model>(options);
  EXPECT_NE(error.find("/input/0/dims"), std::string::npos) << error;

  options.input = {{"PIXELS", data_type::fp32, servekit::shape{4}}};
  error = load_error<batching_model>(options);
  EXPECT_NE(error.find("has input 'INPUT0', which the config does not list"), std::string::npos)
      << error;

  options.input = {{"INPUT0", data_type::fp32, servekit::shape{4}}};
  options.output = {{"SCORES", data_type::fp32, servekit::shape{3}}};
  error = load_error<batching_model>(options);
  EXPECT_NE(error.find("/output/0/name"), std::string::npos) << error;
  EXPECT_NE(error.find("'SCORES' is not an output of the graph"), std::string::npos) << error;
}

TEST(OnnxBackend, AGraphOpenCvCannotImportFailsTheLoad) {
  onnx::graph_builder g{"exotic"};
  g.input("X", data_type::fp32, {-1, 3})
      .output("Y", data_type::fp32, {-1, 3})
      .node("NoSuchOperator", {"X"}, {"Y"});
  const model_folder folder{g};
  const std::string error = load_error<batching_model>(folder.options());
  EXPECT_NE(error.find("cannot import this graph"), std::string::npos) << error;
  EXPECT_NE(error.find("model.onnx"), std::string::npos) << error;
}

TEST(OnnxBackend, AFailureInsideOpenCvFailsThatBatchAndNamesTheModel) {
  // Any number of features: a request with 5 cannot multiply the 4x3 weights.
  const model_folder folder{linear_graph(-1)};
  plain_model m{[&] {
    auto o = folder.options();
    o.max_batch_size = 4;
    return o;
  }()};
  const servekit::response bad = m.infer(servekit::request_builder{"bad"}
                                             .input("INPUT0", {1, 5}, std::vector<float>(5, 1.0F))
                                             .build())
                                     .get();
  EXPECT_FALSE(bad.status.ok());
  EXPECT_NE(bad.status.message().find("model 'linear'"), std::string::npos) << bad.status.message();
  EXPECT_NE(bad.status.message().find("OpenCV's DNN module failed"), std::string::npos)
      << bad.status.message();
  // The instance goes on serving.
  const auto x = row_values(1, 2.0F);
  const servekit::response good = m.infer(linear_request("good", x)).get();
  ASSERT_TRUE(good.status.ok()) << good.status.message();
  expect_near(good.outputs[0].values<float>(), reference(x));
}

} // namespace onnx_backend_test
