// The compile-time ensemble at run time: data flow, pruning, fan-out without copies, batching
// inside steps, failures, cancellation, statistics.
#include "pipeline_backends.hpp"

#include <servekit/ensemble/ensemble.hpp>
#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

namespace {

using namespace ensemble_tests;
using servekit::in;
using servekit::out;
using servekit::step;

using preprocess = servekit::model<unary_backend<plus_one, "RAW_IMAGE", "PREPROCESSED_OUTPUT">,
                                   servekit::dynamic_batcher<>>;
using classify =
    servekit::model<unary_backend<times_two, "FORMATTED_IMAGE", "CLASSIFICATION_OUTPUT">,
                    servekit::dynamic_batcher<>>;
using segment =
    servekit::model<unary_backend<times_three, "FORMATTED_IMAGE", "SEGMENTATION_OUTPUT">,
                    servekit::dynamic_batcher<>>;

using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"CLASSIFICATION", "SEGMENTATION">,
    step<preprocess, in<"RAW_IMAGE", "IMAGE">, out<"PREPROCESSED_OUTPUT", "preprocessed_image">>,
    step<classify, in<"FORMATTED_IMAGE", "preprocessed_image">,
         out<"CLASSIFICATION_OUTPUT", "CLASSIFICATION">>,
    step<segment, in<"FORMATTED_IMAGE", "preprocessed_image">,
         out<"SEGMENTATION_OUTPUT", "SEGMENTATION">>>;

servekit::model_options named(const char* name) {
  servekit::model_options o;
  o.name = name;
  o.dynamic_batching = servekit::dynamic_batching_options{};
  return o;
}

TEST(Ensemble, RunsEveryStepAndAnswersWithTheOutputs) {
  preprocess pre{named("preprocess")};
  classify cls{named("classify")};
  segment seg{named("segment")};
  pipeline p{{.name = "pipeline"}, pre, cls, seg};

  auto r = p.infer(make_request("IMAGE", 1.0F)).get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(first_value(r, "CLASSIFICATION"), 4.0F);
  EXPECT_EQ(first_value(r, "SEGMENTATION"), 6.0F);
  EXPECT_EQ(r.id, "r");
}

} // namespace
