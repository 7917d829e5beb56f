// Auto-complete (runtime/auto_complete.hpp): a backend that reads its model file fills in what a
// config leaves out, before model<> resolves the config and before backend_list picks the
// composition, so a scheduler the backend adds is the one that runs.

#include <servekit/backend/backend.hpp>
#include <servekit/core/request_builder.hpp>
#include <servekit/repository/backend_list.hpp>
#include <servekit/runtime/auto_complete.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace auto_complete_test {

using servekit::data_type;

/// Doubles X into Y. What a model file would say (X and Y of any length, batches of up to 8,
/// dynamic batching) it says from auto_complete_config, counting its calls.
struct doubling_backend {
  static inline int completions = 0;

  static void auto_complete_config(servekit::model_options& config) {
    ++completions;
    if (config.input.empty()) {
      config.input = {{"X", data_type::fp32, servekit::shape{-1}}};
    }
    if (config.output.empty()) {
      config.output = {{"Y", data_type::fp32, servekit::shape{-1}}};
    }
    if (!config.max_batch_size) {
      config.max_batch_size = 8;
      if (!config.dynamic_batching) {
        config.dynamic_batching.emplace();
      }
    }
  }

  explicit doubling_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      servekit::tensor y = std::move(*b.request(i).find_input("X"));
      y.name = "Y";
      for (auto& v : y.values<float>()) {
        v *= 2.0F;
      }
      b.response(i).outputs.push_back(std::move(y));
    }
  }
};

static_assert(servekit::auto_completes_config<doubling_backend>);
static_assert(!servekit::auto_completes_config<servekit::model_options>);

TEST(AutoComplete, TheModelRunsWithTheConfigTheBackendCompleted) {
  servekit::model_options options;
  options.name = "doubler";
  servekit::model<doubling_backend, servekit::dynamic_batcher<>> m{options};
  EXPECT_EQ(m.max_batch_size(), 8);
  ASSERT_EQ(m.inputs().size(), 1U);
  EXPECT_EQ(m.inputs()[0].name, "X");
  EXPECT_EQ(m.options().max_batch_size, 8);
  const servekit::response r =
      m.infer(servekit::request_builder{"r"}.input("X", {1, 2}, {1.5F, -2.0F}).build()).get();
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs.at(0).values<float>()[1], -4.0F);
}

TEST(AutoComplete, WhatTheConfigSaysIsKept) {
  servekit::model_options options;
  options.max_batch_size = 2;
  const auto completed = servekit::auto_completed<doubling_backend>(options);
  EXPECT_EQ(completed.max_batch_size, 2);
  EXPECT_FALSE(completed.dynamic_batching.has_value());
  EXPECT_EQ(completed.input.size(), 1U);
}

TEST(AutoComplete, BackendListComposesTheSchedulerTheBackendAdded) {
  using backends = servekit::backend_list<servekit::named_backend<"doubling", doubling_backend>>;
  servekit::model_options options;
  options.name = "doubler";
  options.backend = "doubling";
  doubling_backend::completions = 0;
  const servekit::any_model m = backends::make(options);
  EXPECT_GE(doubling_backend::completions, 1);
  ASSERT_NE(m.options(), nullptr);
  servekit::model_options shown = *m.options();
  m.complete_options(shown);
  // dynamic_batching was added by the backend, so the batching composition serves the model.
  EXPECT_TRUE(shown.dynamic_batching.has_value());
  EXPECT_EQ(shown.max_batch_size, 8);
}

TEST(AutoComplete, APlatformNamesTheBackendWhenTheConfigNamesNone) {
  servekit::model_options options;
  options.platform = "onnxruntime_onnx";
  EXPECT_EQ(servekit::requested_backend(options), "onnx");
  options.platform = "pytorch_libtorch";
  EXPECT_EQ(servekit::requested_backend(options), "pytorch");
  options.backend = "onnxruntime"; // Triton's backend name for ONNX models
  EXPECT_EQ(servekit::requested_backend(options), "onnx");
  options.backend = "mine";
  EXPECT_EQ(servekit::requested_backend(options), "mine");
  options.backend.clear();
  options.platform = "tensorrt_plan";
  EXPECT_EQ(servekit::requested_backend(options), "");
  using backends = servekit::backend_list<servekit::named_backend<"doubling", doubling_backend>>;
  try {
    (void)backends::make(options);
    FAIL() << "no error";
  } catch (const servekit::config_error& e) {
    EXPECT_NE(
        std::string{e.what()}.find("names no backend (platform 'tensorrt_plan' implies none)"),
        std::string::npos)
        << e.what();
  }
}

} // namespace auto_complete_test
