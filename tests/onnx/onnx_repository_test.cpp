// A Triton-layout repository of ONNX models: config.pbtxt with Triton's platform name and
// nothing else, the graph in <model>/1/model.onnx; the model loads auto-completed and serves.

#include "archetypes/temp_repository.hpp"
#include "onnx/linear_model.hpp"

#include <servekit/core/request_builder.hpp>
#include <servekit/onnx/onnx_backend.hpp>
#include <servekit/repository.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace onnx_repository_test {

/// The final response to `r` (a rejected request's failure as the response).
servekit::response infer_once(servekit::model_ref m, servekit::request&& r) {
  auto promise = std::make_shared<std::promise<servekit::response>>();
  auto answer = promise->get_future();
  const servekit::status s = m.submit(std::move(r), [promise](servekit::response&& out) {
    if (out.final) {
      promise->set_value(std::move(out));
    }
  });
  if (!s.ok()) {
    return servekit::response::failure(s);
  }
  return answer.get();
}

using onnx_backends =
    servekit::backend_list<servekit::named_backend<"onnx", servekit::onnx::backend>>;

TEST(OnnxRepository, ATritonOnnxModelFolderServesUnchanged) {
  archetypes::temp_repository files;
  // As Triton's repositories hold them: the platform alone, the rest from the graph.
  files.write_file("classifier", "config.pbtxt", "platform: \"onnxruntime_onnx\"\n");
  onnx_tests::linear_graph().save(files.root() / "classifier" / "1" / "model.onnx");
  files.write_file("named", "config.pbtxt",
                   "backend: \"onnxruntime\"\nmax_batch_size: 2\n"
                   "default_model_filename: \"linear.onnx\"\n");
  onnx_tests::linear_graph().save(files.root() / "named" / "1" / "linear.onnx");

  servekit::model_repository repo{files.root(), onnx_backends{}};
  for (const auto& e : repo.load_all()) {
    EXPECT_EQ(e.state, servekit::model_ready_state::ready) << e.name << ": " << e.reason;
  }
  const auto classifier = repo.find("classifier");
  ASSERT_NE(classifier, nullptr);
  // The config as the config endpoint shows it: completed from the graph.
  const servekit::model_options& shown = classifier->options();
  EXPECT_EQ(shown.max_batch_size, 4);
  EXPECT_TRUE(shown.dynamic_batching.has_value());
  ASSERT_EQ(shown.input.size(), 1U);
  EXPECT_EQ(shown.input[0].name, "INPUT0");
  EXPECT_EQ(shown.input[0].dims, (servekit::shape{4}));
  ASSERT_EQ(shown.output.size(), 1U);
  EXPECT_EQ(shown.output[0].name, "OUTPUT0");

  const std::vector<float> x = {1.0F, -2.0F, 0.5F, 3.0F};
  const servekit::response r = infer_once(
      classifier->model(), servekit::request_builder{"r"}.input("INPUT0", {1, 4}, x).build());
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  const auto want = onnx_tests::reference(x);
  const auto got = r.outputs.at(0).values<float>();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5F);
  }

  const auto named = repo.find("named");
  ASSERT_NE(named, nullptr);
  EXPECT_EQ(named->options().max_batch_size, 2);
}

TEST(OnnxRepository, AMissingGraphLeavesTheModelUnavailableWithTheReason) {
  archetypes::temp_repository files;
  files.write_file("empty", "config.pbtxt", "platform: \"onnxruntime_onnx\"\n");
  files.add_folder("empty", "1");
  servekit::model_repository repo{files.root(), onnx_backends{}};
  const auto index = repo.load_all();
  ASSERT_EQ(index.size(), 1U);
  EXPECT_EQ(index[0].state, servekit::model_ready_state::unavailable);
  EXPECT_NE(index[0].reason.find("model.onnx: no such file"), std::string::npos) << index[0].reason;
  EXPECT_EQ(index[0].reason.find(files.root().string()), std::string::npos)
      << "the reason must not show host paths: " << index[0].reason;
}

} // namespace onnx_repository_test
