// The configured ensemble: Triton's `ensemble_scheduling` JSON over models registered by name,
// the load-time checks (errors name the step and the tensor), and the same results as the
// compile-time form, since both run on one executor.
#include "pipeline_backends.hpp"

#include <servekit/cache/response_cache.hpp>
#include <servekit/config/model_config_json.hpp>
#include <servekit/ensemble/ensemble.hpp>
#include <servekit/ensemble/runtime_ensemble.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_registry.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <string>

namespace runtime_ensemble_test {

using namespace ensemble_tests;
using servekit::config_error;

using pre_backend = unary_backend<plus_one, "RAW_IMAGE", "PREPROCESSED_OUTPUT">;
using cls_backend = unary_backend<times_two, "FORMATTED_IMAGE", "CLASSIFICATION_OUTPUT">;
using seg_backend = unary_backend<times_three, "FORMATTED_IMAGE", "SEGMENTATION_OUTPUT">;
using preprocess = servekit::model<pre_backend>;
using classify = servekit::model<cls_backend, servekit::dynamic_batcher<>>;
using segment = servekit::model<seg_backend>;

constexpr const char* pipeline_config = R"({
  "name": "pipeline",
  "platform": "ensemble",
  "max_batch_size": 8,
  "input": [{"name": "IMAGE", "data_type": "TYPE_FP32", "dims": [4]}],
  "output": [{"name": "CLASSIFICATION", "data_type": "TYPE_FP32", "dims": [4]},
             {"name": "SEGMENTATION", "data_type": "TYPE_FP32", "dims": [4]}],
  "ensemble_scheduling": {
    "step": [
      {"model_name": "preprocess", "model_version": -1,
       "input_map": {"RAW_IMAGE": "IMAGE"},
       "output_map": {"PREPROCESSED_OUTPUT": "preprocessed_image"}},
      {"model_name": "classify", "model_version": -1,
       "input_map": {"FORMATTED_IMAGE": "preprocessed_image"},
       "output_map": {"CLASSIFICATION_OUTPUT": "CLASSIFICATION"}},
      {"model_name": "segment", "model_version": -1,
       "input_map": {"FORMATTED_IMAGE": "preprocessed_image"},
       "output_map": {"SEGMENTATION_OUTPUT": "SEGMENTATION"}}
    ]
  }
})";

class Configured : public ::testing::Test {
protected:
  static servekit::model_options named(const char* name, bool batching = false) {
    servekit::model_options o;
    o.name = name;
    if (batching) {
      o.dynamic_batching = servekit::dynamic_batching_options{};
    }
    return o;
  }
  void SetUp() override {
    pre_backend::reset();
    cls_backend::reset();
    seg_backend::reset();
    registry.add(pre);
    registry.add(cls);
    registry.add(seg);
  }

  /// Loads `config` after `edit` changed it, expecting a config_error; returns it.
  config_error load_error(const std::function<void(nlohmann::json&)>& edit) {
    auto j = nlohmann::json::parse(pipeline_config);
    edit(j);
    try {
      servekit::runtime_ensemble e{servekit::load_model_config(j), registry};
    } catch (const config_error& error) {
      return error;
    }
    ADD_FAILURE() << "the ensemble loaded";
    return config_error{servekit::config_error_code::bad_value, "", ""};
  }

  preprocess pre{named("preprocess")};
  classify cls{named("classify", true)};
  segment seg{named("segment")};
  servekit::model_registry registry;
};

TEST_F(Configured, RunsThePipelineItDescribes) {
  servekit::runtime_ensemble e{servekit::load_model_config(pipeline_config), registry};
  EXPECT_EQ(e.name(), "pipeline");
  EXPECT_EQ(e.max_batch_size(), 8);
  auto r = e.infer(make_request("IMAGE", 1.0F)).get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(first_value(r, "CLASSIFICATION"), 4.0F);
  EXPECT_EQ(first_value(r, "SEGMENTATION"), 6.0F);
  const auto s = e.statistics();
  EXPECT_EQ(s.success.count, 1U);
  EXPECT_EQ(s.steps[1].model_name, "classify");
}

// Triton's response cache at the ensemble's top level: a repeated byte-identical request is
// answered from the cache and no step runs; a different one runs the steps.
TEST_F(Configured, ResponseCacheAnswersRepeatedRequestsWithoutRunningSteps) {
  auto j = nlohmann::json::parse(pipeline_config);
  j["response_cache"] = {{"enable", true}};
  servekit::response_cache cache{{.size_bytes = 1 << 20, .shards = 1}};
  servekit::runtime_ensemble e{servekit::load_model_config(j), registry, &cache};
  std::atomic<int> preprocess_batches{0};
  pre_backend::before = [&](servekit::batch&) { preprocess_batches.fetch_add(1); };

  auto first = e.infer(make_request("IMAGE", 1.0F)).get();
  ASSERT_TRUE(first.ok()) << first.status.message();
  auto again = e.infer(make_request("IMAGE", 1.0F)).get();
  ASSERT_TRUE(again.ok()) << again.status.message();
  EXPECT_EQ(first_value(again, "CLASSIFICATION"), 4.0F);
  EXPECT_EQ(first_value(again, "SEGMENTATION"), 6.0F);
  EXPECT_EQ(preprocess_batches.load(), 1) << "the repeated request ran no step";
  auto other = e.infer(make_request("IMAGE", 2.0F)).get();
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(preprocess_batches.load(), 2);

  const auto s = e.statistics();
  EXPECT_EQ(s.cache_hit.count, 1U);
  EXPECT_EQ(s.cache_miss.count, 2U);
  EXPECT_EQ(s.success.count, 3U);   // hits are successes
  EXPECT_EQ(s.execution_count, 2U); // but not executions
  EXPECT_EQ(s.steps[0].success.count, 2U);
}

TEST_F(Configured, ResponseCacheWithoutAServerCacheChangesNothing) {
  auto j = nlohmann::json::parse(pipeline_config);
  j["response_cache"] = {{"enable", true}};
  servekit::runtime_ensemble e{servekit::load_model_config(j), registry};
  ASSERT_TRUE(e.infer(make_request("IMAGE", 1.0F)).get().ok());
  ASSERT_TRUE(e.infer(make_request("IMAGE", 1.0F)).get().ok());
  const auto s = e.statistics();
  EXPECT_EQ(s.cache_hit.count + s.cache_miss.count, 0U);
  EXPECT_EQ(s.execution_count, 2U);
}

TEST_F(Configured, AgreesWithTheCompileTimeForm) {
  using servekit::in;
  using servekit::out;
  using servekit::step;
  using compiled = servekit::ensemble<
      servekit::inputs<"IMAGE">, servekit::outputs<"CLASSIFICATION", "SEGMENTATION">,
      step<preprocess, in<"RAW_IMAGE", "IMAGE">, out<"PREPROCESSED_OUTPUT", "preprocessed_image">>,
      step<classify, in<"FORMATTED_IMAGE", "preprocessed_image">,
           out<"CLASSIFICATION_OUTPUT", "CLASSIFICATION">>,
      step<segment, in<"FORMATTED_IMAGE", "preprocessed_image">,
           out<"SEGMENTATION_OUTPUT", "SEGMENTATION">>>;
  compiled c{{.name = "compiled"}, pre, cls, seg};
  servekit::runtime_ensemble e{servekit::load_model_config(pipeline_config), registry};
  for (float v : {0.0F, 1.0F, 7.5F}) {
    auto a = c.infer(make_request("IMAGE", v)).get();
    auto b = e.infer(make_request("IMAGE", v)).get();
    ASSERT_TRUE(a.ok() && b.ok());
    for (const char* name : {"CLASSIFICATION", "SEGMENTATION"}) {
      EXPECT_EQ(first_value(a, name), first_value(b, name));
      EXPECT_EQ(a.find_output(name)->shape, b.find_output(name)->shape);
    }
  }
  EXPECT_EQ(c.inputs()[0], e.inputs()[0]);
}

TEST_F(Configured, IsItselfServableAndNests) {
  servekit::runtime_ensemble inner{servekit::load_model_config(pipeline_config), registry};
  registry.add(inner);
  auto outer_config = nlohmann::json::parse(R"({
    "name": "outer", "platform": "ensemble", "max_batch_size": 8,
    "input": [{"name": "PHOTO", "data_type": "TYPE_FP32", "dims": [4]}],
    "output": [{"name": "LABEL", "data_type": "TYPE_FP32", "dims": [4]}],
    "ensemble_scheduling": {"step": [
      {"model_name": "pipeline", "input_map": {"IMAGE": "PHOTO"},
       "output_map": {"CLASSIFICATION": "LABEL"}}]}})");
  servekit::runtime_ensemble outer{servekit::load_model_config(outer_config), registry};
  auto r = outer.infer(make_request("PHOTO", 1.0F)).get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(first_value(r, "LABEL"), 4.0F);
  EXPECT_EQ(seg.statistics().execution_count, 0U); // pruned inside the inner ensemble
  outer.shutdown(servekit::shutdown_mode::drain);
}

TEST_F(Configured, AMissingModelIsNamedWithItsStep) {
  const auto e = load_error(
      [](nlohmann::json& j) { j["ensemble_scheduling"]["step"][1]["model_name"] = "clasify"; });
  EXPECT_EQ(e.path(), "/ensemble_scheduling/step/1/model_name");
  EXPECT_NE(std::string{e.what()}.find("step 1 uses model 'clasify'"), std::string::npos)
      << e.what();
  const auto v = load_error(
      [](nlohmann::json& j) { j["ensemble_scheduling"]["step"][0]["model_version"] = 3; });
  EXPECT_NE(std::string{v.what()}.find("'preprocess' version 3, which is not loaded"),
            std::string::npos)
      << v.what();
}

TEST_F(Configured, AStepReadingNothingIsNamedWithStepAndTensor) {
  const auto e = load_error([](nlohmann::json& j) {
    j["ensemble_scheduling"]["step"][2]["input_map"]["FORMATTED_IMAGE"] = "preprocessed_imag";
  });
  EXPECT_EQ(e.path(), "/ensemble_scheduling/step/2/input_map/FORMATTED_IMAGE");
  EXPECT_NE(std::string{e.what()}.find("ensemble 'pipeline': step 2 (model 'segment') input "
                                       "'FORMATTED_IMAGE' reads tensor 'preprocessed_imag', which "
                                       "no ensemble input and no step output provides"),
            std::string::npos)
      << e.what();
}

TEST_F(Configured, LoadTimeChecksMatchTheCompileTimeOnes) {
  // An input the model does not declare.
  auto e = load_error([](nlohmann::json& j) {
    j["ensemble_scheduling"]["step"][1]["input_map"] = {{"IMAGE_IN", "preprocessed_image"}};
  });
  EXPECT_NE(std::string{e.what()}.find("maps input 'IMAGE_IN', which its model does not declare"),
            std::string::npos)
      << e.what();
  // Two producers.
  e = load_error([](nlohmann::json& j) {
    j["ensemble_scheduling"]["step"][2]["output_map"]["SEGMENTATION_OUTPUT"] = "CLASSIFICATION";
  });
  EXPECT_NE(std::string{e.what()}.find("tensor 'CLASSIFICATION' is written by"), std::string::npos)
      << e.what();
  // An output nobody produces.
  e = load_error([](nlohmann::json& j) {
    j["output"].push_back({{"name", "DEPTH"}, {"data_type", "TYPE_FP32"}, {"dims", {4}}});
  });
  EXPECT_NE(std::string{e.what()}.find("output 'DEPTH' is not produced by any step"),
            std::string::npos)
      << e.what();
  // A declared ensemble type that disagrees with the step reading it.
  e = load_error([](nlohmann::json& j) { j["input"][0]["data_type"] = "TYPE_INT32"; });
  EXPECT_EQ(e.path(), "/ensemble_scheduling/step/0/input_map/RAW_IMAGE");
  EXPECT_NE(std::string{e.what()}.find("tensor 'IMAGE' has inconsistent data type"),
            std::string::npos)
      << e.what();
  // Dims.
  e = load_error([](nlohmann::json& j) { j["output"][1]["dims"] = {5}; });
  EXPECT_NE(std::string{e.what()}.find("output 'SEGMENTATION' has inconsistent shape"),
            std::string::npos)
      << e.what();
  // A cycle.
  e = load_error([](nlohmann::json& j) {
    j["ensemble_scheduling"]["step"][0]["input_map"]["RAW_IMAGE"] = "CLASSIFICATION";
    j["input"][0]["name"] = "UNUSED";
  });
  EXPECT_NE(std::string{e.what()}.find("not read by any step"), std::string::npos) << e.what();
  // A batch size larger than a composing model allows.
  e = load_error([](nlohmann::json& j) { j["max_batch_size"] = 16; });
  EXPECT_NE(std::string{e.what()}.find("ensemble 'pipeline' allows maximum batch size 16, but it "
                                       "contains model 'preprocess' which only allows maximum "
                                       "batch size to be 8"),
            std::string::npos)
      << e.what();
}

TEST_F(Configured, ACycleIsFoundAtLoad) {
  auto j = nlohmann::json::parse(R"({
    "name": "loop", "platform": "ensemble",
    "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [4]}],
    "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [4]}],
    "ensemble_scheduling": {"step": [
      {"model_name": "preprocess", "input_map": {"RAW_IMAGE": "b"},
       "output_map": {"PREPROCESSED_OUTPUT": "a"}},
      {"model_name": "classify", "input_map": {"FORMATTED_IMAGE": "a"},
       "output_map": {"CLASSIFICATION_OUTPUT": "b"}},
      {"model_name": "segment", "input_map": {"FORMATTED_IMAGE": "IN"},
       "output_map": {"SEGMENTATION_OUTPUT": "OUT"}}]}})");
  try {
    servekit::runtime_ensemble e{servekit::load_model_config(j), registry};
    FAIL() << "a cycle loaded";
  } catch (const config_error& e) {
    EXPECT_NE(std::string{e.what()}.find("its steps form a cycle: step 0 (model 'preprocess') "
                                         "reads tensor 'b' from step 1 (model 'classify')"),
              std::string::npos)
        << e.what();
  }
}

} // namespace runtime_ensemble_test
