// The LibTorch backend serving a Triton-layout repository (config.pbtxt + <version>/model.pt):
// the image classifier against the same network computed in plain C++, a batch of requests
// against each request alone, every data type bit for bit, Triton's naming conventions,
// requested outputs, and a GRU cell keeping its hidden state as implicit state under the
// sequence batcher. The models are made at build time by make_models.cpp.
#include "libtorch_test_support.hpp"
#include "reference_models.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <future>
#include <string>
#include <string_view>
#include <vector>

namespace libtorch_backend_test {

using namespace libtorch_tests;
using reference_models::classifier;
using servekit::data_type;
using servekit::shape;

// -- the image classifier -------------------------------------------------------------------

constexpr std::string_view classifier_pbtxt = R"(
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1, 8, 8 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 10 ] } ]
dynamic_batching { }
instance_group [ { count: 2 kind: KIND_CPU } ]
)";

/// A request of `images` seeded images, [images, 1, 8, 8], starting at seed `first_seed`.
servekit::request image_request(std::uint64_t first_seed, std::int64_t images) {
  std::vector<float> pixels;
  for (std::int64_t k = 0; k < images; ++k) {
    const auto one = reference_models::image(first_seed + static_cast<std::uint64_t>(k));
    pixels.insert(pixels.end(), one.begin(), one.end());
  }
  servekit::request r;
  r.id = "images-" + std::to_string(first_seed);
  r.inputs.push_back(servekit::make_tensor("INPUT__0", shape{images, 1, 8, 8}, pixels));
  return r;
}

/// Every row of `scores` ([images, 10]) against the plain C++ network, within float rounding.
void expect_reference_scores(const servekit::response& r, std::uint64_t first_seed,
                             std::int64_t images) {
  ASSERT_TRUE(r.ok()) << r.status.message();
  const servekit::tensor* scores = r.find_output("OUTPUT__0");
  ASSERT_NE(scores, nullptr);
  EXPECT_EQ(scores->type, data_type::fp32);
  EXPECT_EQ(scores->shape, (shape{images, classifier::classes}));
  const auto network = classifier::seeded();
  const auto got = scores->values<float>();
  for (std::int64_t k = 0; k < images; ++k) {
    const auto pixels = reference_models::image(first_seed + static_cast<std::uint64_t>(k));
    const auto expected = network.forward(pixels.data());
    for (std::size_t c = 0; c < expected.size(); ++c) {
      EXPECT_NEAR(got[static_cast<std::size_t>(k) * expected.size() + c], expected[c], 1e-4F)
          << "image " << k << ", class " << c;
    }
  }
}

TEST(LibTorchBackend, ClassifierMatchesTheNetworkComputedInPlainCpp) {
  torch_repository dir;
  dir.add("classifier", classifier_pbtxt, "classifier");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  ASSERT_EQ(load_error(index, "classifier"), "");
  const auto m = repo.find("classifier");
  ASSERT_NE(m, nullptr);
  expect_reference_scores(infer_now(m->model(), image_request(1, 1)), 1, 1);
  expect_reference_scores(infer_now(m->model(), image_request(10, 3)), 10, 3);
}

TEST(LibTorchBackend, ABatchOfRequestsGivesWhatEachGivesAlone) {
  torch_repository dir;
  dir.add("classifier", classifier_pbtxt, "classifier");
  servekit::test_hooks hooks;
  hooks.delay_scheduler = 4; // the first batch forms once 4 requests wait: one execution
  servekit::model_repository repo{dir.root(), backends{}, hooks};
  ASSERT_EQ(load_error(repo.load_all(), "classifier"), "");
  const auto m = repo.find("classifier");
  ASSERT_NE(m, nullptr);
  // Requests of 1, 2, 1 and 3 images concatenated along dimension 0, then split back.
  const std::array<std::int64_t, 4> sizes{1, 2, 1, 3};
  std::vector<std::future<servekit::response>> batched;
  std::uint64_t seed = 100;
  for (const auto n : sizes) {
    batched.push_back(infer(m->model(), image_request(seed, n)));
    seed += 10;
  }
  std::vector<servekit::response> together;
  for (auto& f : batched) {
    together.push_back(get(f));
    ASSERT_TRUE(together.back().ok()) << together.back().status.message();
  }
  EXPECT_EQ(m->model().statistics().execution_count, 1U);
  seed = 100;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const auto alone = infer_now(m->model(), image_request(seed, sizes[k]));
    ASSERT_TRUE(alone.ok()) << alone.status.message();
    const auto& a = alone.output("OUTPUT__0");
    const auto& t = together[k].output("OUTPUT__0");
    EXPECT_EQ(t.shape, (shape{sizes[k], classifier::classes}));
    ASSERT_EQ(a.shape, t.shape);
    const auto av = a.values<float>();
    const auto tv = t.values<float>();
    for (std::size_t i = 0; i < av.size(); ++i) {
      EXPECT_NEAR(av[i], tv[i], 1e-5F) << "request " << k << ", value " << i;
    }
    expect_reference_scores(together[k], seed, sizes[k]);
    seed += 10;
  }
  EXPECT_EQ(m->model().statistics().execution_count, 1U + sizes.size());
}

// -- data types -------------------------------------------------------------------------------

/// The data types the backend takes, as identity10's INPUT__k / OUTPUT__k.
constexpr std::array<data_type, 10> every_type{
    data_type::boolean, data_type::uint8, data_type::int8, data_type::int16, data_type::int32,
    data_type::int64,   data_type::fp16,  data_type::bf16, data_type::fp32,  data_type::fp64};

std::string identity10_pbtxt() {
  std::string inputs;
  std::string outputs;
  for (std::size_t k = 0; k < every_type.size(); ++k) {
    const std::string type{servekit::to_config_string(every_type[k])};
    inputs += (k == 0 ? "" : ", ") + std::string{"{ name: \"INPUT__"} + std::to_string(k) +
              "\" data_type: " + type + " dims: [ 3 ] }";
    outputs += (k == 0 ? "" : ", ") + std::string{"{ name: \"OUTPUT__"} + std::to_string(k) +
               "\" data_type: " + type + " dims: [ 3 ] }";
  }
  return "backend: \"pytorch\"\nmax_batch_size: 4\ninput [ " + inputs + " ]\noutput [ " + outputs +
         " ]\ndynamic_batching { }\n";
}

/// Three elements of `type` whose bytes differ per `salt`: valid values of the type (BOOL 0 or
/// 1; FP16 and BF16 small numbers), as a [1, 3] input.
servekit::tensor typed_input(std::size_t k, data_type type, unsigned salt) {
  auto t = servekit::make_tensor("INPUT__" + std::to_string(k), type, shape{1, 3});
  auto bytes = t.data.bytes();
  for (std::size_t e = 0; e < 3; ++e) {
    const unsigned v = salt * 3 + static_cast<unsigned>(e) + 1;
    switch (type) {
    case data_type::boolean:
      t.values<bool>()[e] = (v % 2) == 1;
      break;
    case data_type::fp16: // 1.0 + v/1024 in IEEE half: 0x3C00 + v
      t.values<std::uint16_t>()[e] = static_cast<std::uint16_t>(0x3C00U + v);
      break;
    case data_type::bf16: // 1.0 + v/128 in bfloat16: 0x3F80 + v
      t.values<std::uint16_t>()[e] = static_cast<std::uint16_t>(0x3F80U + v);
      break;
    case data_type::fp32:
      t.values<float>()[e] = -1.5F * static_cast<float>(v);
      break;
    case data_type::fp64:
      t.values<double>()[e] = 1e300 / static_cast<double>(v);
      break;
    default: { // integers: a pattern that uses every byte, sign bits included
      const std::size_t size = servekit::byte_size(type);
      for (std::size_t b = 0; b < size; ++b) {
        bytes[e * size + b] = static_cast<std::byte>((v * 37U + b * 101U) & 0xFFU);
      }
    }
    }
  }
  return t;
}

servekit::request typed_request(unsigned salt) {
  servekit::request r;
  r.id = "types-" + std::to_string(salt);
  for (std::size_t k = 0; k < every_type.size(); ++k) {
    r.inputs.push_back(typed_input(k, every_type[k], salt));
  }
  return r;
}

void expect_types_echoed(const servekit::response& r, unsigned salt) {
  ASSERT_TRUE(r.ok()) << r.status.message();
  for (std::size_t k = 0; k < every_type.size(); ++k) {
    const auto in = typed_input(k, every_type[k], salt);
    const servekit::tensor* out = r.find_output("OUTPUT__" + std::to_string(k));
    ASSERT_NE(out, nullptr) << k;
    EXPECT_EQ(out->type, every_type[k]) << k;
    EXPECT_EQ(out->shape, (shape{1, 3})) << k;
    ASSERT_EQ(out->data.size(), in.data.size()) << k;
    EXPECT_EQ(std::memcmp(out->data.data(), in.data.data(), in.data.size()), 0)
        << servekit::to_string(every_type[k]);
  }
}

TEST(LibTorchBackend, EveryDataTypeRoundTripsAloneAndBatched) {
  torch_repository dir;
  dir.add("identity10", identity10_pbtxt(), "identity10");
  servekit::test_hooks hooks;
  hooks.delay_scheduler = 3;
  servekit::model_repository repo{dir.root(), backends{}, hooks};
  ASSERT_EQ(load_error(repo.load_all(), "identity10"), "");
  const auto m = repo.find("identity10");
  ASSERT_NE(m, nullptr);
  std::vector<std::future<servekit::response>> batched;
  for (unsigned salt = 0; salt < 3; ++salt) {
    batched.push_back(infer(m->model(), typed_request(salt)));
  }
  for (unsigned salt = 0; salt < 3; ++salt) {
    expect_types_echoed(get(batched[salt]), salt);
  }
  EXPECT_EQ(m->model().statistics().execution_count, 1U);
  expect_types_echoed(infer_now(m->model(), typed_request(7)), 7);
}

// -- naming conventions -----------------------------------------------------------------------

TEST(LibTorchBackend, InputsAndOutputsFollowTritonsNamingConventions) {
  torch_repository dir;
  // <name>__<index>, listed out of order: INPUT__1 is b, OUT__0 is a - b.
  dir.add("by_index", pair_pbtxt("B__1", "A__0", "SUM__1", "DIFF__0"), "pair");
  // forward()'s argument names, listed out of order; outputs in the config's order.
  dir.add("by_argument", pair_pbtxt("b", "a", "difference", "sum"), "pair");
  // neither: the config's order for both.
  dir.add("by_order", pair_pbtxt("x", "y", "p", "q"), "pair");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  for (const auto* name : {"by_index", "by_argument", "by_order"}) {
    ASSERT_EQ(load_error(index, name), "") << name;
  }
  const auto by_index =
      infer_now(repo.find("by_index")->model(), pair_request("A__0", 5, "B__1", 2));
  ASSERT_TRUE(by_index.ok()) << by_index.status.message();
  EXPECT_EQ(value_of(by_index, "DIFF__0"), 3.0F);
  EXPECT_EQ(value_of(by_index, "SUM__1"), 9.0F);

  const auto by_argument =
      infer_now(repo.find("by_argument")->model(), pair_request("a", 5, "b", 2));
  ASSERT_TRUE(by_argument.ok()) << by_argument.status.message();
  EXPECT_EQ(value_of(by_argument, "difference"), 3.0F);
  EXPECT_EQ(value_of(by_argument, "sum"), 9.0F);

  const auto by_order = infer_now(repo.find("by_order")->model(), pair_request("x", 5, "y", 2));
  ASSERT_TRUE(by_order.ok()) << by_order.status.message();
  EXPECT_EQ(value_of(by_order, "p"), 3.0F);
  EXPECT_EQ(value_of(by_order, "q"), 9.0F);
}

TEST(LibTorchBackend, OnlyTheRequestedOutputsAreReturned) {
  torch_repository dir;
  dir.add("pair", pair_pbtxt("INPUT__0", "INPUT__1", "OUTPUT__0", "OUTPUT__1"), "pair");
  servekit::model_repository repo{dir.root(), backends{}};
  ASSERT_EQ(load_error(repo.load_all(), "pair"), "");
  auto request = pair_request("INPUT__0", 1, "INPUT__1", 1);
  request.requested_outputs = {"OUTPUT__1"};
  const auto r = infer_now(repo.find("pair")->model(), std::move(request));
  ASSERT_TRUE(r.ok()) << r.status.message();
  ASSERT_EQ(r.outputs.size(), 1U);
  EXPECT_EQ(value_of(r, "OUTPUT__1"), 3.0F);
}

// -- a stateful model --------------------------------------------------------------------------

using gru_input = std::array<float, reference_models::gru_cell::inputs>;
using gru_hidden = std::array<float, reference_models::gru_cell::hidden>;

servekit::request gru_request(std::uint64_t sequence, const gru_input& x, bool start, bool end) {
  servekit::request r;
  r.id = "sequence-" + std::to_string(sequence);
  r.sequence_id = sequence;
  r.sequence_start = start;
  r.sequence_end = end;
  r.requested_outputs = {"OUTPUT__0"}; // the state is kept whatever the client asks for
  r.inputs.push_back(servekit::make_tensor("INPUT__0", shape{1, 3}, x));
  return r;
}

TEST(LibTorchBackend, AGruCellKeepsItsHiddenStatePerSequence) {
  torch_repository dir;
  dir.add("gru", gru_pbtxt, "gru");
  servekit::model_repository repo{dir.root(), backends{}};
  ASSERT_EQ(load_error(repo.load_all(), "gru"), "");
  const auto m = repo.find("gru");
  const auto cell = reference_models::gru_cell::seeded();
  reference_models::seeded_values inputs{77};
  constexpr std::size_t steps = 4;
  // Two sequences side by side, twice: ids used again after their END start from a fresh state.
  for (int pass = 0; pass < 2; ++pass) {
    std::array<gru_hidden, 2> hidden{};
    for (std::size_t step = 0; step < steps; ++step) {
      std::array<gru_input, 2> x{};
      std::vector<std::future<servekit::response>> futures;
      for (std::size_t s = 0; s < 2; ++s) {
        for (auto& v : x[s]) {
          v = inputs.next();
        }
        futures.push_back(
            infer(m->model(), gru_request(s + 1, x[s], step == 0, step + 1 == steps)));
      }
      for (std::size_t s = 0; s < 2; ++s) {
        const auto r = get(futures[s]);
        ASSERT_TRUE(r.ok()) << r.status.message();
        ASSERT_EQ(r.outputs.size(), 1U); // OUTPUT_STATE__1 stays with the server
        const auto& out = r.output("OUTPUT__0");
        ASSERT_EQ(out.shape, (shape{1, 4}));
        hidden[s] = cell.step(x[s], hidden[s]);
        for (std::size_t k = 0; k < hidden[s].size(); ++k) {
          EXPECT_NEAR(out.values<float>()[k], hidden[s][k], 1e-5F)
              << "sequence " << s << ", step " << step << ", unit " << k;
        }
      }
    }
  }
}

// Triton's PyTorch backend hands a control to forward() as [batch, 1] (the control's dims [1]
// after the batch dimension); models written for Triton rely on it.
TEST(LibTorchBackend, ControlInputsReachForwardAsBatchByOne) {
  const torch_repository dir;
  dir.add("control_echo", R"(
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
sequence_batching {
  control_input [ { name: "START__1"
                    control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] } ]
}
)",
          "control_echo");
  servekit::model_repository repo{dir.root(), backends{}};
  ASSERT_EQ(load_error(repo.load_all(), "control_echo"), "");
  const auto m = repo.find("control_echo");
  for (const bool start : {true, false}) {
    servekit::request r;
    r.sequence_id = 9;
    r.sequence_start = start;
    r.sequence_end = !start;
    r.inputs.push_back(servekit::make_tensor("INPUT__0", shape{1, 1}, {0.5F}));
    const auto out = infer_now(m->model(), std::move(r));
    ASSERT_TRUE(out.ok()) << out.status.message();
    const auto& t = out.output("OUTPUT__0");
    EXPECT_EQ(t.shape, (shape{1, 1})) << "a control of shape [batch] reached forward()";
    EXPECT_EQ(t.values<float>()[0], start ? 1.0F : 0.0F);
  }
}

} // namespace libtorch_backend_test
