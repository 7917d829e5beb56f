// The real models of the bundled repository (examples/models), served from their committed
// config.pbtxt and model files as servekit-server serves them: the TorchScript classifier with
// dynamic batching over two instances, the same network as ONNX with its inputs auto-completed,
// the ensemble preprocess (TorchScript) -> classifier (ONNX), and the GRU cell as a sequence
// model with implicit state. Every output is checked against reference_models.hpp, computed here
// in plain C++ from the same seeded weights.
#include "libtorch_test_support.hpp"
#include "reference_models.hpp"

#if defined(SERVEKIT_HAS_ONNX)
#include <servekit/onnx/onnx_backend.hpp>

#include <opencv2/core/utility.hpp>
#endif

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

namespace bundled_models_test {

using namespace libtorch_tests;
using reference_models::classifier;
using reference_models::gru_cell;

#if defined(SERVEKIT_HAS_ONNX)
using bundled = backends::with<servekit::named_backend<"onnx", servekit::onnx::backend>>;
#if defined(__SANITIZE_THREAD__)
// OpenCV's TBB pool is invisible to ThreadSanitizer (tests/onnx/linear_model.hpp says why): run
// its layers on the calling thread here.
const bool opencv_on_the_calling_thread = [] {
  cv::setNumThreads(1);
  return true;
}();
#endif
#else
using bundled = backends;
#endif

const std::filesystem::path examples_models =
    std::filesystem::path{SERVEKIT_SOURCE_DIR} / "examples" / "models";

/// A repository holding copies of the bundled real models (the others need the example server's
/// own backends), loaded.
class bundled_repository {
public:
  bundled_repository() {
    std::vector<std::string> models = {"image_classifier", "image_preprocess", "gru_sequence"};
#if defined(SERVEKIT_HAS_ONNX)
    models.insert(models.end(), {"image_classifier_onnx", "image_ensemble"});
#endif
    for (const auto& m : models) {
      std::filesystem::copy(examples_models / m, dir_.root() / m,
                            std::filesystem::copy_options::recursive);
    }
    const auto index = repo_.load_all();
    for (const auto& m : models) {
      const auto error = load_error(index, m);
      if (!error.empty()) {
        errors_ += m + ": " + error + "\n";
      }
    }
  }
  [[nodiscard]] const std::string& load_errors() const noexcept { return errors_; }
  [[nodiscard]] auto find(std::string_view name) const { return repo_.find(name); }

private:
  archetypes::temp_repository dir_;
  servekit::model_repository repo_{dir_.root(), bundled{}};
  std::string errors_;
};

/// `count` seeded 8x8 images, one after the other.
std::vector<float> images(std::size_t count, std::uint64_t seed) {
  std::vector<float> all;
  for (std::size_t i = 0; i < count; ++i) {
    const auto one = reference_models::image(seed + i);
    all.insert(all.end(), one.begin(), one.end());
  }
  return all;
}

/// Expects `scores` ([batch, 10]) to be the classifier's scores of `pixels` ([batch, 64]).
void expect_scores(const servekit::tensor& scores, const std::vector<float>& pixels) {
  const auto net = classifier::seeded();
  const std::size_t batch = pixels.size() / classifier::pixels;
  ASSERT_EQ(scores.shape, (shape{static_cast<std::int64_t>(batch), classifier::classes}));
  const auto got = scores.values<float>();
  for (std::size_t b = 0; b < batch; ++b) {
    const auto want = net.forward(pixels.data() + b * classifier::pixels);
    for (std::size_t k = 0; k < want.size(); ++k) {
      EXPECT_NEAR(got[b * classifier::classes + k], want[k], 1e-4F)
          << "image " << b << ", class " << k;
    }
  }
}

TEST(BundledModels, LoadReady) {
  const bundled_repository repo;
  EXPECT_EQ(repo.load_errors(), "");
}

TEST(BundledModels, ClassifierBatchesConcurrentRequestsOverTwoInstances) {
  const bundled_repository repo;
  ASSERT_EQ(repo.load_errors(), "");
  const auto m = repo.find("image_classifier");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->options().instance_group.at(0).count, 2);
  ASSERT_TRUE(m->options().dynamic_batching.has_value());

  // One request of 4 images, then 24 requests of one image in flight together.
  {
    const auto pixels = images(4, 100);
    servekit::request r;
    r.inputs.push_back(servekit::make_tensor("INPUT__0", shape{4, 1, 8, 8}, pixels));
    const auto out = infer_now(m->model(), std::move(r));
    ASSERT_TRUE(out.ok()) << out.status.message();
    expect_scores(out.output("OUTPUT__0"), pixels);
  }
  std::vector<std::vector<float>> sent;
  std::vector<std::future<servekit::response>> futures;
  for (std::uint64_t i = 0; i < 24; ++i) {
    sent.push_back(images(1, 200 + i));
    servekit::request r;
    r.inputs.push_back(servekit::make_tensor("INPUT__0", shape{1, 1, 8, 8}, sent.back()));
    futures.push_back(infer(m->model(), std::move(r)));
  }
  for (std::size_t i = 0; i < futures.size(); ++i) {
    const auto out = get(futures[i]);
    ASSERT_TRUE(out.ok()) << out.status.message();
    expect_scores(out.output("OUTPUT__0"), sent[i]);
  }
}

TEST(BundledModels, GruSequenceKeepsItsHiddenStatePerSequence) {
  const bundled_repository repo;
  ASSERT_EQ(repo.load_errors(), "");
  const auto m = repo.find("gru_sequence");
  ASSERT_NE(m, nullptr);
  const auto cell = gru_cell::seeded();
  reference_models::seeded_values inputs{2026};
  // Three sequences side by side, their requests interleaved.
  std::array<std::array<float, gru_cell::hidden>, 3> hidden{};
  constexpr std::size_t steps = 5;
  for (std::size_t step = 0; step < steps; ++step) {
    std::array<std::array<float, gru_cell::inputs>, 3> x{};
    std::vector<std::future<servekit::response>> futures;
    for (std::size_t s = 0; s < x.size(); ++s) {
      for (auto& v : x[s]) {
        v = inputs.next();
      }
      servekit::request r;
      r.sequence_id = 40 + s;
      r.sequence_start = step == 0;
      r.sequence_end = step + 1 == steps;
      r.inputs.push_back(servekit::make_tensor("INPUT__0", shape{1, gru_cell::inputs}, x[s]));
      futures.push_back(infer(m->model(), std::move(r)));
    }
    for (std::size_t s = 0; s < x.size(); ++s) {
      const auto out = get(futures[s]);
      ASSERT_TRUE(out.ok()) << out.status.message();
      hidden[s] = cell.step(x[s], hidden[s]);
      const auto got = out.output("OUTPUT__0").values<float>();
      ASSERT_EQ(got.size(), hidden[s].size());
      for (std::size_t k = 0; k < got.size(); ++k) {
        EXPECT_NEAR(got[k], hidden[s][k], 1e-5F) << "sequence " << s << ", step " << step;
      }
    }
  }
}

#if defined(SERVEKIT_HAS_ONNX)
TEST(BundledModels, OnnxClassifierCompletesItsConfigFromTheGraph) {
  const bundled_repository repo;
  ASSERT_EQ(repo.load_errors(), "");
  const auto m = repo.find("image_classifier_onnx");
  ASSERT_NE(m, nullptr);
  // config.pbtxt names no tensors: the graph's, without its batch dimension.
  const auto& config = m->options();
  ASSERT_EQ(config.input.size(), 1U);
  EXPECT_EQ(config.input[0].name, "image");
  EXPECT_EQ(config.input[0].type, servekit::data_type::fp32);
  EXPECT_EQ(config.input[0].dims, (shape{1, 8, 8}));
  ASSERT_EQ(config.output.size(), 1U);
  EXPECT_EQ(config.output[0].name, "scores");
  EXPECT_EQ(config.output[0].dims, (shape{10}));

  const auto pixels = images(3, 300);
  servekit::request r;
  r.inputs.push_back(servekit::make_tensor("image", shape{3, 1, 8, 8}, pixels));
  const auto out = infer_now(m->model(), std::move(r));
  ASSERT_TRUE(out.ok()) << out.status.message();
  expect_scores(out.output("scores"), pixels);
}

TEST(BundledModels, EnsemblePreprocessesUint8ImagesThenClassifies) {
  const bundled_repository repo;
  ASSERT_EQ(repo.load_errors(), "");
  const auto m = repo.find("image_ensemble");
  ASSERT_NE(m, nullptr);
  std::vector<std::uint8_t> image(2 * classifier::pixels);
  for (std::size_t i = 0; i < image.size(); ++i) {
    image[i] = static_cast<std::uint8_t>((i * 37 + 11) % 256);
  }
  std::vector<float> pixels(image.size());
  for (std::size_t i = 0; i < image.size(); ++i) {
    pixels[i] = reference_models::preprocess(image[i]);
  }
  servekit::request r;
  r.inputs.push_back(servekit::make_tensor("IMAGE", shape{2, 8, 8}, image));
  const auto out = infer_now(m->model(), std::move(r));
  ASSERT_TRUE(out.ok()) << out.status.message();
  expect_scores(out.output("SCORES"), pixels);
}
#endif

} // namespace bundled_models_test
