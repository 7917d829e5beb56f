// any_model and backend_list: the composition a config asks for, picked at run time from the
// five each backend is compiled into, and the errors for what a backend cannot take.
#include "repository_backends.hpp"

#include <servekit/config/model_config_json.hpp>
#include <servekit/repository/any_model.hpp>
#include <servekit/repository/backend_list.hpp>

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace backend_list_test {

using namespace repository_tests;
using servekit::config_error;
using servekit::named_backend;

using backends = servekit::backend_list<
    named_backend<"add", add_backend>, named_backend<"unbatched", unbatched_backend>,
    named_backend<"failing", failing_backend>, named_backend<"sum", sum_backend>>;
using add_models = servekit::compositions<add_backend, servekit::host_state_store>;
using sum_models = servekit::compositions<sum_backend, servekit::host_state_store>;

/// A state store of its own type, to see that a named_backend's store is the one used.
struct own_store : servekit::host_state_store {
  using servekit::host_state_store::host_state_store;
};

servekit::model_options config(const std::string& text) {
  auto options = servekit::load_model_config(text);
  options.name = "m";
  return options;
}

config_error make_error(const std::string& text) {
  try {
    auto m = backends::make(config(text));
  } catch (const config_error& e) {
    return e;
  }
  ADD_FAILURE() << "the model was built";
  return config_error{servekit::config_error_code::bad_value, "", ""};
}

class BackendList : public ::testing::Test {
protected:
  void SetUp() override { probe().reset(); }
};

TEST(AnyModel, OwnsAndErasesAServable) {
  servekit::model_options options;
  options.name = "owned";
  auto m = servekit::any_model::make<add_models::default_model>(options);
  ASSERT_TRUE(m);
  EXPECT_EQ(m.ref().name(), "owned");
  ASSERT_NE(m.get<add_models::default_model>(), nullptr);
  EXPECT_EQ(m.get<add_models::batching_model>(), nullptr);
  EXPECT_EQ(static_cast<const void*>(m.get<add_models::default_model>()), m.ref().address());

  // Moving keeps refs valid (the servable stays where it is), and the source is left empty.
  const auto ref = m.ref();
  servekit::any_model moved = std::move(m);
  EXPECT_FALSE(m); // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(moved.ref().address(), ref.address());
  auto f = infer(ref, add_request(1.0F));
  const auto r = get(f);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.find_output("OUT")->values<float>()[0], 2.0F);

  moved.shutdown(servekit::shutdown_mode::drain);
  EXPECT_FALSE(ref.submit(add_request(1.0F), [](servekit::response&&) {}).ok());
  const int live = probe().live.load();
  moved.reset();
  EXPECT_FALSE(moved);
  EXPECT_EQ(probe().live.load(), live - 1);
}

TEST_F(BackendList, NamesInOrder) {
  ASSERT_EQ(backends::names.size(), 4U);
  EXPECT_EQ(backends::names[0], "add");
  EXPECT_EQ(backends::names[3], "sum");
  static_assert(backends::contains("unbatched"));
  static_assert(!backends::contains("nope"));
}

TEST_F(BackendList, DefaultSchedulerWithoutSchedulingFields) {
  auto m = backends::make(config(R"({"backend": "add"})"));
  EXPECT_NE(m.get<add_models::default_model>(), nullptr);
}

TEST_F(BackendList, DynamicBatchingPicksTheBatcher) {
  auto m = backends::make(config(R"({"backend": "add", "max_batch_size": 8,
                                     "dynamic_batching": {}})"));
  EXPECT_NE(m.get<add_models::batching_model>(), nullptr);
}

TEST_F(BackendList, AnAdaptiveObjectivePicksTheAdaptiveBatcher) {
  auto m = backends::make(config(R"({"backend": "add", "max_batch_size": 8,
      "dynamic_batching": {"adaptive": {"target_latency_microseconds": 50000}}})"));
  ASSERT_NE(m.get<add_models::adaptive_batching_model>(), nullptr);
  EXPECT_EQ(m.get<add_models::batching_model>(), nullptr);
  auto f = infer(m.ref(), add_request(2.0F));
  const auto r = get(f);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.find_output("OUT")->values<float>()[0], 3.0F);
  // Adaptive settings without an objective: the plain dynamic batcher.
  auto plain = backends::make(config(R"({"backend": "add", "max_batch_size": 8,
      "dynamic_batching": {"adaptive": {"target_percentile": 95}}})"));
  EXPECT_NE(plain.get<add_models::batching_model>(), nullptr);
}

TEST_F(BackendList, SequenceBatchingPicksTheStrategy) {
  auto direct = backends::make(config(sum_config("direct")));
  EXPECT_NE(direct.get<sum_models::direct_sequence_model>(), nullptr);
  auto oldest = backends::make(config(sum_config("oldest")));
  EXPECT_NE(oldest.get<sum_models::oldest_sequence_model>(), nullptr);
}

TEST_F(BackendList, SequenceBatchingUsesTheNamedBackendsStore) {
  using with_own_store = servekit::backend_list<named_backend<"sum", sum_backend, own_store>>;
  using own_models = servekit::compositions<sum_backend, own_store>;
  auto direct = with_own_store::make(config(sum_config("direct")));
  EXPECT_NE(direct.get<own_models::direct_sequence_model>(), nullptr);
  EXPECT_EQ(direct.get<sum_models::direct_sequence_model>(), nullptr);
  auto oldest = with_own_store::make(config(sum_config("oldest")));
  EXPECT_NE(oldest.get<own_models::oldest_sequence_model>(), nullptr);
}

TEST_F(BackendList, InstanceGroupCountsComeFromTheConfig) {
  auto m = backends::make(config(R"({"backend": "add",
      "instance_group": [{"kind": "KIND_CPU", "count": 3}]})"));
  ASSERT_NE(m.get<add_models::default_model>(), nullptr);
  EXPECT_EQ(m.get<add_models::default_model>()->instance_count(), 3U);
}

TEST_F(BackendList, TestHooksReachTheModel) {
  // The batcher holds until two requests are queued, so both run as one batch.
  servekit::test_hooks hooks;
  hooks.delay_scheduler = 2;
  auto m = backends::make(config(R"({"backend": "add", "max_batch_size": 8,
                                     "dynamic_batching": {}})"),
                          hooks);
  auto a = infer(m.ref(), add_request(1.0F, "a"));
  auto b = infer(m.ref(), add_request(2.0F, "b"));
  ASSERT_TRUE(get(a).ok());
  ASSERT_TRUE(get(b).ok());
  const auto stats = m.ref().statistics();
  EXPECT_EQ(stats.execution_count, 1U);
  EXPECT_EQ(stats.inference_count, 2U);
}

TEST_F(BackendList, UnknownBackendListsTheKnownOnes) {
  const auto e = make_error(R"({"backend": "nope"})");
  EXPECT_EQ(e.path(), "/backend");
  EXPECT_NE(std::string{e.what()}.find("unknown backend 'nope'"), std::string::npos) << e.what();
  EXPECT_NE(std::string{e.what()}.find("known backends: add, unbatched, failing, sum"),
            std::string::npos)
      << e.what();
}

TEST_F(BackendList, MissingBackendIsAnError) {
  const auto e = make_error(R"({"max_batch_size": 0})");
  EXPECT_EQ(e.path(), "/backend");
  EXPECT_NE(std::string{e.what()}.find("names no backend"), std::string::npos) << e.what();
}

// Triton serves a config without `backend` by its platform's backend: a Triton repository's
// `platform: "pytorch_libtorch"` finds the backend registered as "pytorch".
TEST_F(BackendList, APlatformWithoutABackendPicksTritonsBackendForIt) {
  using by_platform = servekit::backend_list<named_backend<"pytorch", add_backend>>;
  auto m = by_platform::make(config(R"({"platform": "pytorch_libtorch", "max_batch_size": 8})"));
  auto f = infer(m.ref(), add_request(1.0F));
  const auto r = get(f);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.find_output("OUT")->values<float>()[0], 2.0F);
  // `backend` wins over `platform`, as in Triton.
  const auto e = make_error(R"({"backend": "nope", "platform": "pytorch_libtorch"})");
  EXPECT_NE(std::string{e.what()}.find("unknown backend 'nope'"), std::string::npos) << e.what();
}

TEST_F(BackendList, APlatformWhoseBackendIsMissingSaysWhichBackendItNeeds) {
  const auto e = make_error(R"({"platform": "onnxruntime_onnx"})");
  EXPECT_EQ(e.path(), "/backend");
  EXPECT_NE(std::string{e.what()}.find("unknown backend 'onnx'"), std::string::npos) << e.what();
  const auto unknown = make_error(R"({"platform": "caffe2_netdef"})");
  EXPECT_NE(std::string{unknown.what()}.find("names no backend (platform 'caffe2_netdef' implies "
                                             "none)"),
            std::string::npos)
      << unknown.what();
}

TEST_F(BackendList, BatchingOnANonBatchingBackendNamesTheField) {
  const auto e = make_error(R"({"backend": "unbatched", "dynamic_batching": {}})");
  EXPECT_EQ(e.path(), "/dynamic_batching");
  EXPECT_NE(std::string{e.what()}.find("does not support batching"), std::string::npos) << e.what();
}

TEST_F(BackendList, ModelErrorsKeepTheirField) {
  // resolve_config's checks reach the caller unchanged.
  const auto e = make_error(R"({"backend": "add", "max_batch_size": 16})");
  EXPECT_EQ(e.path(), "/max_batch_size");
}

TEST_F(BackendList, ABackendThatThrowsIsAConfigError) {
  const auto e = make_error(R"({"backend": "failing"})");
  EXPECT_EQ(e.code(), servekit::config_error_code::backend_error);
  EXPECT_NE(std::string{e.what()}.find("no device for this backend"), std::string::npos)
      << e.what();
}

} // namespace backend_list_test
