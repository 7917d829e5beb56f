// The example server's bundled backends (examples/server/backends) run through servekit::model
// directly, configured by the bundled repository's config files (examples/models): values,
// shapes, per-request errors, implicit state under both sequence strategies, and the pipeline
// ensemble over the two. The HTTP path over the same models is server_e2e_test.cpp.
#include "backends/accumulate.hpp"
#include "backends/add_sub.hpp"
#include "backends/identity.hpp"
#include "bundled_backends.hpp"

#include <servekit/config/model_config_json.hpp>
#include <servekit/config/model_config_pbtxt.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/ensemble/runtime_ensemble.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_registry.hpp>
#include <servekit/state/host_state_store.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace bundled_backends_test {

using servekit::data_type;
using servekit::shape;
using servekit_server::accumulate_backend;
using servekit_server::add_sub_backend;
using servekit_server::identity_backend;

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in{p};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A bundled model's config, with the model's folder as its directory.
servekit::model_options bundled(std::string_view model) {
  const auto dir = std::filesystem::path{SERVEKIT_SOURCE_DIR} / "examples" / "models" / model;
  // config.pbtxt where the folder has one, as the repository reads it.
  auto options = std::filesystem::exists(dir / "config.pbtxt")
                     ? servekit::load_model_config_pbtxt(read_text(dir / "config.pbtxt"))
                     : servekit::load_model_config(read_text(dir / "config.json"));
  options.directory = dir.string();
  return options;
}

std::vector<float> iota(float first, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = first + static_cast<float>(i);
  }
  return v;
}

servekit::tensor fp32(std::string name, const shape& s, const std::vector<float>& v) {
  return servekit::make_tensor(std::move(name), data_type::fp32, s, std::span<const float>{v});
}

servekit::tensor int32_scalar(std::string name, std::int32_t v) {
  const std::array<std::int32_t, 1> values{v};
  return servekit::make_tensor(std::move(name), data_type::int32, shape{1, 1},
                               std::span<const std::int32_t>{values});
}

std::vector<float> floats(const servekit::tensor& t) {
  const auto v = t.values<float>();
  return {v.begin(), v.end()};
}

using add_sub_model = servekit::model<add_sub_backend, servekit::dynamic_batcher<>>;
using identity_model = servekit::model<identity_backend, servekit::dynamic_batcher<>>;
using accumulate_direct =
    servekit::model<accumulate_backend,
                    servekit::sequence_batcher<servekit::direct, servekit::host_state_store>>;
using accumulate_oldest =
    servekit::model<accumulate_backend,
                    servekit::sequence_batcher<servekit::oldest, servekit::host_state_store>>;

TEST(BundledBackends, TheListBuildsEveryBundledModelByBackendName) {
#if defined(SERVEKIT_HAS_ONNX)
  EXPECT_EQ(servekit_server::bundled_backends::names.size(), 10U); // with `onnx`
#else
  EXPECT_EQ(servekit_server::bundled_backends::names.size(), 9U);
#endif
  for (const char* name : {"add_sub", "identity_delay", "accumulate", "accumulate_oldest",
                           "gpu_mlp", "gpu_accumulate", "repeat_int32", "add_sub_versions"}) {
    const auto options = bundled(name);
    const servekit::any_model m = servekit_server::bundled_backends::make(options);
    EXPECT_EQ(m.ref().name(), name);
  }
  auto unknown = bundled("add_sub");
  unknown.backend = "tensorrt"; // Triton's TensorRT backend: servekit has none
  try {
    (void)servekit_server::bundled_backends::make(unknown);
    FAIL() << "expected a config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/backend");
    EXPECT_NE(std::string{e.what()}.find("accumulate"), std::string::npos) << e.what();
  }
}

TEST(BundledBackends, AddSubAddsAndSubtracts) {
  add_sub_model m{bundled("add_sub")};
  servekit::request r;
  r.id = "r1";
  r.inputs.push_back(fp32("INPUT0", shape{1, 16}, iota(0, 16)));
  r.inputs.push_back(fp32("INPUT1", shape{1, 16}, std::vector<float>(16, 1.0F)));
  const auto resp = m.infer(std::move(r)).get();
  ASSERT_TRUE(resp.ok()) << resp.status.message();
  EXPECT_EQ(resp.id, "r1");
  ASSERT_NE(resp.find_output("OUTPUT0"), nullptr);
  ASSERT_NE(resp.find_output("OUTPUT1"), nullptr);
  EXPECT_EQ(resp.find_output("OUTPUT0")->shape, (shape{1, 16}));
  EXPECT_EQ(floats(*resp.find_output("OUTPUT0")), iota(1, 16));
  EXPECT_EQ(floats(*resp.find_output("OUTPUT1")), iota(-1, 16));
}

TEST(BundledBackends, AddSubComputesOnlyTheRequestedOutput) {
  add_sub_model m{bundled("add_sub")};
  servekit::request r;
  r.inputs.push_back(fp32("INPUT0", shape{2, 16}, iota(0, 32)));
  r.inputs.push_back(fp32("INPUT1", shape{2, 16}, iota(0, 32)));
  r.requested_outputs = {"OUTPUT1"};
  const auto resp = m.infer(std::move(r)).get();
  ASSERT_TRUE(resp.ok()) << resp.status.message();
  ASSERT_EQ(resp.outputs.size(), 1U);
  EXPECT_EQ(resp.outputs[0].name, "OUTPUT1");
  EXPECT_EQ(floats(resp.outputs[0]), std::vector<float>(32, 0.0F));
}

TEST(BundledBackends, AddSubWithVariableDimsRefusesUnequalShapesPerRequest) {
  auto options = servekit::load_model_config(R"({
    "name": "add_sub_any", "backend": "add_sub", "max_batch_size": 4,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]},
              {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [-1]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]},
               {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [-1]}]})");
  add_sub_model m{options};
  servekit::request bad;
  bad.inputs.push_back(fp32("INPUT0", shape{1, 3}, iota(0, 3)));
  bad.inputs.push_back(fp32("INPUT1", shape{1, 2}, iota(0, 2)));
  const auto failed = m.infer(std::move(bad)).get();
  EXPECT_EQ(failed.status.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(failed.status.message().find("same shape"), std::string::npos)
      << failed.status.message();

  servekit::request good;
  good.inputs.push_back(fp32("INPUT0", shape{1, 3}, {1, 2, 3}));
  good.inputs.push_back(fp32("INPUT1", shape{1, 3}, {3, 2, 1}));
  const auto ok = m.infer(std::move(good)).get();
  ASSERT_TRUE(ok.ok()) << ok.status.message();
  EXPECT_EQ(floats(*ok.find_output("OUTPUT0")), (std::vector<float>{4, 4, 4}));
}

TEST(BundledBackends, AddSubRefusesAConfigThatChangesItsDataType) {
  const auto options = servekit::load_model_config(R"({
    "name": "add_sub_int", "backend": "add_sub",
    "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [16]}]})");
  try {
    add_sub_model m{options};
    FAIL() << "expected a config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/input/0/data_type");
  }
}

TEST(BundledBackends, IdentityCopiesAnyTypeAndShapeByPosition) {
  auto options = servekit::load_model_config(R"({
    "name": "identity_bytes", "backend": "identity", "max_batch_size": 8,
    "input": [{"name": "TEXT", "data_type": "TYPE_STRING", "dims": [-1]},
              {"name": "NUMBERS", "data_type": "TYPE_INT64", "dims": [-1, 2]}],
    "output": [{"name": "TEXT_OUT", "data_type": "TYPE_STRING", "dims": [-1]},
               {"name": "NUMBERS_OUT", "data_type": "TYPE_INT64", "dims": [-1, 2]}]})");
  identity_model m{options};
  servekit::request r;
  const std::array<std::string_view, 3> words{"alpha", "", "gamma"};
  r.inputs.push_back(
      servekit::tensor{"TEXT", data_type::bytes, shape{1, 3}, servekit::encode_bytes(words)});
  const std::vector<std::int64_t> numbers{1, 2, 3, 4};
  r.inputs.push_back(servekit::make_tensor("NUMBERS", data_type::int64, shape{1, 2, 2},
                                           std::span<const std::int64_t>{numbers}));
  const auto resp = m.infer(std::move(r)).get();
  ASSERT_TRUE(resp.ok()) << resp.status.message();
  const auto* text = resp.find_output("TEXT_OUT");
  ASSERT_NE(text, nullptr);
  EXPECT_EQ(text->shape, (shape{1, 3}));
  const auto decoded = servekit::decode_bytes(text->data.bytes());
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, (std::vector<std::string_view>{"alpha", "", "gamma"}));
  const auto* n = resp.find_output("NUMBERS_OUT");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->shape, (shape{1, 2, 2}));
  const auto got = n->values<std::int64_t>();
  EXPECT_EQ((std::vector<std::int64_t>{got.begin(), got.end()}), numbers);
}

TEST(BundledBackends, IdentityRefusesMismatchedInputsAndOutputs) {
  const auto options = servekit::load_model_config(R"({
    "name": "identity_bad", "backend": "identity",
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [4]}]})");
  try {
    identity_model m{options};
    FAIL() << "expected a config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_NE(std::string{e.what()}.find("OUTPUT0"), std::string::npos) << e.what();
  }
}

TEST(BundledBackends, ExecuteDelayMustBeANumber) {
  const auto options = servekit::load_model_config(R"({
    "name": "identity_slow", "backend": "identity",
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
    "parameters": {"execute_delay_ms": {"string_value": "soon"}}})");
  try {
    identity_model m{options};
    FAIL() << "expected a config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_NE(std::string{e.what()}.find("execute_delay_ms"), std::string::npos) << e.what();
  }
}

/// Sends one sequence request and waits for it.
template <class Model>
servekit::response step(Model& m, servekit::correlation_id id, std::int32_t value, bool start,
                        bool end) {
  servekit::request r;
  r.inputs.push_back(int32_scalar("INPUT", value));
  r.sequence_id = std::move(id);
  r.sequence_start = start;
  r.sequence_end = end;
  return m.infer(std::move(r)).get();
}

std::int32_t output_of(const servekit::response& r) {
  EXPECT_TRUE(r.ok()) << r.status.message();
  const auto* t = r.find_output("OUTPUT");
  EXPECT_NE(t, nullptr);
  EXPECT_EQ(r.find_output("OUTPUT_STATE"), nullptr) << "implicit state must not reach clients";
  return t == nullptr ? -1 : t->values<std::int32_t>()[0];
}

template <class Model>
void interleaved_sums(Model& m, servekit::correlation_id a, servekit::correlation_id b) {
  EXPECT_EQ(output_of(step(m, a, 1, true, false)), 1);
  EXPECT_EQ(output_of(step(m, b, 10, true, false)), 10);
  EXPECT_EQ(output_of(step(m, a, 2, false, false)), 3);
  EXPECT_EQ(output_of(step(m, b, 20, false, false)), 30);
  EXPECT_EQ(output_of(step(m, a, 3, false, true)), 6);
  EXPECT_EQ(output_of(step(m, b, 30, false, true)), 60);
  // A new sequence under a finished id starts from its own first value.
  EXPECT_EQ(output_of(step(m, a, 5, true, true)), 5);
}

TEST(BundledBackends, AccumulateDirectSumsInterleavedSequences) {
  accumulate_direct m{bundled("accumulate")};
  interleaved_sums(m, servekit::correlation_id{std::uint64_t{7}},
                   servekit::correlation_id{std::string{"session-b"}});
}

TEST(BundledBackends, AccumulateOldestSumsInterleavedSequences) {
  accumulate_oldest m{bundled("accumulate_oldest")};
  interleaved_sums(m, servekit::correlation_id{std::uint64_t{7}},
                   servekit::correlation_id{std::uint64_t{8}});
}

TEST(BundledBackends, AccumulateWithoutSequenceBatchingFailsItsRequests) {
  const auto options = servekit::load_model_config(R"({
    "name": "accumulate_plain", "backend": "accumulate",
    "input": [{"name": "INPUT", "data_type": "TYPE_INT32", "dims": [1]}],
    "output": [{"name": "OUTPUT", "data_type": "TYPE_INT32", "dims": [1]}]})");
  servekit::model<accumulate_backend> m{options};
  servekit::request r;
  const std::array<std::int32_t, 1> one{1};
  r.inputs.push_back(servekit::make_tensor("INPUT", data_type::int32, shape{1},
                                           std::span<const std::int32_t>{one}));
  const auto resp = m.infer(std::move(r)).get();
  EXPECT_EQ(resp.status.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(resp.status.message().find("sequence_batching"), std::string::npos);
}

TEST(BundledBackends, PipelineEnsembleOverAddSubAndIdentity) {
  auto identity_options = bundled("identity_delay");
  identity_options.parameters.erase("execute_delay_ms"); // the wiring is under test, not the delay
  add_sub_model add_sub{bundled("add_sub")};
  identity_model identity{identity_options};
  servekit::model_registry registry;
  registry.add(servekit::model_ref{add_sub});
  registry.add(servekit::model_ref{identity});
  servekit::runtime_ensemble pipeline{bundled("pipeline"), registry};

  servekit::request r;
  r.inputs.push_back(fp32("INPUT0", shape{1, 16}, iota(10, 16)));
  r.inputs.push_back(fp32("INPUT1", shape{1, 16}, iota(0, 16)));
  const auto resp = pipeline.infer(std::move(r)).get();
  ASSERT_TRUE(resp.ok()) << resp.status.message();
  ASSERT_NE(resp.find_output("OUTPUT"), nullptr);
  ASSERT_NE(resp.find_output("DIFF"), nullptr);
  std::vector<float> sums(16);
  for (std::size_t i = 0; i < 16; ++i) {
    sums[i] = 10.0F + 2.0F * static_cast<float>(i);
  }
  EXPECT_EQ(floats(*resp.find_output("OUTPUT")), sums);
  EXPECT_EQ(floats(*resp.find_output("DIFF")), std::vector<float>(16, 10.0F));
  pipeline.shutdown(servekit::shutdown_mode::drain);
}

} // namespace bundled_backends_test
