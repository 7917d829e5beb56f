// model_repository: Triton's repository over a directory. Loading (compositions picked by
// config, versions, ensembles in dependency order), errors that name the file and the JSON path,
// reloads without downtime, unloads, and retirement on the reaper thread.
#include "ensemble/pipeline_backends.hpp"
#include "repository_backends.hpp"

#include <servekit/repository.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace model_repository_test {

using namespace repository_tests;
using servekit::model_ready_state;
using servekit::named_backend;
using servekit::status_code;

using pre_backend =
    ensemble_tests::unary_backend<ensemble_tests::plus_one, "RAW_IMAGE", "PREPROCESSED_OUTPUT">;
using cls_backend = ensemble_tests::unary_backend<ensemble_tests::times_two, "FORMATTED_IMAGE",
                                                  "CLASSIFICATION_OUTPUT">;

using backends = servekit::backend_list<
    named_backend<"add", add_backend>, named_backend<"unbatched", unbatched_backend>,
    named_backend<"failing", failing_backend>, named_backend<"sum", sum_backend>,
    named_backend<"plus_one", pre_backend>, named_backend<"times_two", cls_backend>>;

using add_models = servekit::compositions<add_backend>;
using sum_models = servekit::compositions<sum_backend>;

constexpr const char* add_config = R"({"backend": "add", "max_batch_size": 8})";
constexpr const char* batched_add_config =
    R"({"backend": "add", "max_batch_size": 8, "dynamic_batching": {}})";

constexpr const char* preprocess_config = R"({"backend": "plus_one", "max_batch_size": 8})";
constexpr const char* classify_config = R"({"backend": "times_two", "max_batch_size": 8})";
constexpr const char* pipeline_config = R"({
  "platform": "ensemble", "max_batch_size": 8,
  "input": [{"name": "IMAGE", "data_type": "TYPE_FP32", "dims": [4]}],
  "output": [{"name": "CLASSIFICATION", "data_type": "TYPE_FP32", "dims": [4]}],
  "ensemble_scheduling": {"step": [
    {"model_name": "preprocess", "model_version": -1,
     "input_map": {"RAW_IMAGE": "IMAGE"},
     "output_map": {"PREPROCESSED_OUTPUT": "preprocessed"}},
    {"model_name": "classify", "model_version": -1,
     "input_map": {"FORMATTED_IMAGE": "preprocessed"},
     "output_map": {"CLASSIFICATION_OUTPUT": "CLASSIFICATION"}}]}})";
// An ensemble over the ensemble; its name sorts first, so load order must follow dependencies.
constexpr const char* outer_config = R"({
  "platform": "ensemble", "max_batch_size": 8,
  "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [4]}],
  "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [4]}],
  "ensemble_scheduling": {"step": [
    {"model_name": "pipeline", "input_map": {"IMAGE": "X"},
     "output_map": {"CLASSIFICATION": "Y"}}]}})";

std::string add_config_with(int addend) {
  return R"({"backend": "add", "max_batch_size": 8, "dynamic_batching": {},
             "parameters": {"addend": {"string_value": ")" +
         std::to_string(addend) + R"("}}})";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class Repository : public ::testing::Test {
protected:
  void SetUp() override {
    probe().reset();
    pre_backend::reset();
    cls_backend::reset();
  }

  /// How messages name a model's config: within the repository, never by the host path.
  static std::filesystem::path file(const std::string& model) {
    return std::filesystem::path{model} / "config.json";
  }

  temp_repository dir;
};

TEST_F(Repository, LoadAllLoadsEveryModelSortedByName) {
  dir.write("b_add", add_config);
  dir.write("a_batched", batched_add_config);
  dir.write("c_sum", sum_config("direct"));
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  ASSERT_EQ(index.size(), 3U);
  EXPECT_EQ(index[0], (servekit::model_index_entry{"a_batched", 1, model_ready_state::ready, ""}));
  EXPECT_EQ(index[1].name, "b_add");
  EXPECT_EQ(index[2].name, "c_sum");
  EXPECT_EQ(repo.index(), index);
  EXPECT_TRUE(repo.all_ready());

  const auto ready = repo.ready_models();
  ASSERT_EQ(ready.size(), 3U);
  EXPECT_EQ(ready[0]->options().name, "a_batched");
  EXPECT_EQ(ready[2]->options().name, "c_sum");

  const auto m = repo.find("b_add");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->options().backend, "add");
  EXPECT_EQ(m->config_file(), dir.root() / "b_add" / "config.json"); // the host path, server-side
  EXPECT_FALSE(m->is_ensemble());
  EXPECT_EQ(m->model().name(), "b_add");
  auto f = infer(m->model(), add_request(2.0F));
  const auto r = get(f);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.find_output("OUT")->values<float>()[0], 3.0F);

  EXPECT_EQ(repo.find("nope"), nullptr);
  EXPECT_FALSE(repo.status_of("nope"));
  ASSERT_TRUE(repo.status_of("c_sum"));
  EXPECT_EQ(repo.status_of("c_sum")->state, model_ready_state::ready);
  EXPECT_EQ(servekit::to_string(model_ready_state::ready), "READY");
  EXPECT_EQ(servekit::to_string(model_ready_state::unavailable), "UNAVAILABLE");
}

TEST_F(Repository, EmptyOrMissingRootIsReadyWithNoModels) {
  servekit::model_repository repo{dir.root() / "missing", backends{}};
  EXPECT_TRUE(repo.load_all().empty());
  EXPECT_TRUE(repo.all_ready());
}

// One instance, its first execution held: the requests submitted meanwhile run as one batch
// under dynamic batching and one by one under the default scheduler.
std::uint64_t executions_for_four_requests(servekit::model_ref m) {
  execution_hold hold;
  probe().hold = &hold;
  std::vector<std::future<servekit::response>> pending;
  pending.push_back(infer(m, add_request(0.0F, "first")));
  EXPECT_TRUE(hold.started.wait());
  for (int i = 0; i < 3; ++i) {
    pending.push_back(infer(m, add_request(static_cast<float>(i), "queued")));
  }
  hold.release.open();
  for (auto& f : pending) {
    EXPECT_TRUE(get(f).ok());
  }
  return m.statistics().execution_count;
}

TEST_F(Repository, DynamicBatchingConfigFormsBatches) {
  dir.write("batched", batched_add_config);
  dir.write("single", add_config);
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  const auto batched = repo.find("batched");
  const auto single = repo.find("single");
  ASSERT_TRUE(batched && single);
  EXPECT_NE(batched->servable().get<add_models::batching_model>(), nullptr);
  EXPECT_NE(single->servable().get<add_models::default_model>(), nullptr);
  EXPECT_EQ(executions_for_four_requests(batched->model()), 2U);
  EXPECT_EQ(executions_for_four_requests(single->model()), 4U);
}

TEST_F(Repository, SequenceBatchingConfigKeepsState) {
  dir.write("direct", sum_config("direct"));
  dir.write("oldest", sum_config("oldest"));
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  ASSERT_TRUE(repo.all_ready());
  EXPECT_NE(repo.find("direct")->servable().get<sum_models::direct_sequence_model>(), nullptr);
  EXPECT_NE(repo.find("oldest")->servable().get<sum_models::oldest_sequence_model>(), nullptr);
  for (const char* name : {"direct", "oldest"}) {
    const auto m = repo.find(name)->model();
    std::int32_t expected = 0;
    for (std::int32_t v = 1; v <= 3; ++v) {
      expected += v;
      auto f = infer(m, sum_request(7, v, v == 1, v == 3));
      const auto r = get(f);
      ASSERT_TRUE(r.ok()) << name << ": " << r.status.message();
      EXPECT_EQ(r.find_output("OUTPUT")->values<std::int32_t>()[0], expected) << name;
    }
  }
}

TEST_F(Repository, InstanceGroupFromTheConfig) {
  dir.write("two", R"({"backend": "add", "instance_group": [{"kind": "KIND_CPU", "count": 2}]})");
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  const auto m = repo.find("two");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->servable().get<add_models::default_model>()->instance_count(), 2U);
  EXPECT_EQ(m->model().statistics().instances.size(), 2U);
}

TEST_F(Repository, UnknownBackendListsTheKnownNames) {
  dir.write("odd", R"({"backend": "nope"})");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  ASSERT_EQ(index.size(), 1U);
  EXPECT_EQ(index[0].state, model_ready_state::unavailable);
  EXPECT_EQ(index[0].version, 1);
  EXPECT_EQ(index[0].reason, file("odd").string() +
                                 ": /backend: unknown backend 'nope'; known backends: add, "
                                 "unbatched, failing, sum, plus_one, times_two");
  const auto s = repo.load("odd");
  EXPECT_EQ(s.code(), status_code::invalid_argument);
  EXPECT_EQ(s.message(), index[0].reason);
}

TEST_F(Repository, BadConfigNamesFileAndPathWhileOthersLoad) {
  dir.write("bad_type", R"({"backend": "add", "max_batch_size": "eight"})");
  dir.write("bad_field", R"({"backend": "add", "dynamic_batching": {"max_queue_delay": 1}})");
  dir.write("bad_value", R"({"backend": "add", "max_batch_size": 64})");
  dir.write("bad_syntax", R"({"backend": "add",)");
  dir.write("good", add_config);
  dir.add_folder("no_config", "1");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  ASSERT_EQ(index.size(), 6U);
  EXPECT_FALSE(repo.all_ready());
  EXPECT_EQ(repo.status_of("good")->state, model_ready_state::ready);
  ASSERT_NE(repo.find("good"), nullptr);

  const auto reason = [&](const char* name) {
    const auto entry = repo.status_of(name);
    EXPECT_TRUE(entry && entry->state == model_ready_state::unavailable) << name;
    return entry ? entry->reason : std::string{};
  };
  EXPECT_TRUE(contains(reason("bad_type"), file("bad_type").string() + ": /max_batch_size: "))
      << reason("bad_type");
  EXPECT_TRUE(contains(reason("bad_field"),
                       file("bad_field").string() + ": /dynamic_batching/max_queue_delay: "))
      << reason("bad_field");
  EXPECT_TRUE(contains(reason("bad_value"), file("bad_value").string() + ": /max_batch_size: "))
      << reason("bad_value");
  EXPECT_TRUE(contains(reason("bad_syntax"),
                       file("bad_syntax").string() + ": model config is not valid JSON: "))
      << reason("bad_syntax");
  EXPECT_TRUE(contains(reason("no_config"), file("no_config").string() + ": "))
      << reason("no_config");
  // Unreadable configs have no known version; a config that parsed has one.
  EXPECT_EQ(repo.status_of("bad_type")->version, 0);
  EXPECT_EQ(repo.status_of("bad_syntax")->version, 0);
  EXPECT_EQ(repo.status_of("bad_value")->version, 1);

  const auto s = repo.load("bad_syntax");
  EXPECT_EQ(s.code(), status_code::invalid_argument);
  EXPECT_TRUE(contains(s.message(), file("bad_syntax").string() + ": ")) << s.message();
}

TEST_F(Repository, FailingBackendIsUnavailableWithItsMessage) {
  dir.write("broken", R"({"backend": "failing"})");
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  const auto entry = repo.status_of("broken");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->state, model_ready_state::unavailable);
  EXPECT_TRUE(contains(entry->reason, file("broken").string() + ": /instance_group: "))
      << entry->reason;
  EXPECT_TRUE(contains(entry->reason, "no device for this backend")) << entry->reason;
}

// A name past the small-string buffer: g++ 12 once destroyed the failing version's index row
// twice (a double free) when the backend threw while the row was being built.
TEST_F(Repository, AFailingBackendWithALongModelNameIsUnavailable) {
  const std::string name = "a_model_name_longer_than_the_small_string_buffer";
  dir.write(name, R"({"backend": "failing"})");
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  const auto entry = repo.status_of(name);
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->state, model_ready_state::unavailable);
  EXPECT_TRUE(contains(entry->reason, "no device for this backend")) << entry->reason;
}

TEST_F(Repository, LatestVersionFolderIsServed) {
  dir.write("versioned", add_config);
  dir.add_folder("versioned", "1");
  dir.add_folder("versioned", "3");
  dir.add_folder("versioned", "10");
  dir.add_folder("versioned", "notes");
  dir.write("plain", add_config);
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  const auto m = repo.find("versioned");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->options().version, 10);
  EXPECT_EQ(m->model().version(), 10);
  EXPECT_EQ(m->options().directory, (dir.root() / "versioned" / "10").string());
  EXPECT_EQ(repo.status_of("versioned")->version, 10);
  EXPECT_EQ(repo.find("versioned", 10), m);
  EXPECT_EQ(repo.find("versioned", 3), nullptr);

  const auto plain = repo.find("plain");
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->options().version, 1);
  EXPECT_EQ(plain->options().directory, (dir.root() / "plain").string());
  EXPECT_EQ(repo.find("plain", 1), plain);
}

TEST_F(Repository, ConfigNameMustMatchTheFolder) {
  dir.write("named", R"({"name": "named", "backend": "add"})");
  dir.write("unnamed", R"({"backend": "add"})");
  dir.write("mismatch", R"({"name": "other", "backend": "add"})");
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  EXPECT_EQ(repo.find("named")->options().name, "named");
  EXPECT_EQ(repo.find("unnamed")->options().name, "unnamed");
  const auto entry = repo.status_of("mismatch");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->state, model_ready_state::unavailable);
  EXPECT_TRUE(contains(entry->reason, file("mismatch").string() + ": /name: ")) << entry->reason;
  EXPECT_TRUE(contains(entry->reason, "'other'")) << entry->reason;
}

TEST_F(Repository, EnsemblesLoadInDependencyOrder) {
  dir.write("preprocess", preprocess_config);
  dir.write("classify", classify_config);
  dir.write("pipeline", pipeline_config);
  dir.write("a_outer", outer_config);
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  ASSERT_TRUE(repo.all_ready()) << repo.status_of("a_outer")->reason;

  const auto pipeline = repo.find("pipeline");
  ASSERT_NE(pipeline, nullptr);
  EXPECT_TRUE(pipeline->is_ensemble());
  EXPECT_EQ(pipeline->options().platform, "ensemble");
  ASSERT_EQ(pipeline->composing_models().size(), 2U);
  EXPECT_EQ(pipeline->composing_models()[0], repo.find("preprocess"));
  auto f = infer(pipeline->model(), ensemble_tests::make_request("IMAGE", 1.0F));
  auto r = get(f);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(ensemble_tests::first_value(r, "CLASSIFICATION"), 4.0F); // (1 + 1) * 2

  const auto outer = repo.find("a_outer");
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(outer->composing_models()[0], pipeline);
  auto g = infer(outer->model(), ensemble_tests::make_request("X", 2.0F));
  r = get(g);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(ensemble_tests::first_value(r, "Y"), 6.0F);
}

TEST_F(Repository, EnsembleWithoutItsComposingModelIsUnavailableUntilItLoads) {
  dir.write("preprocess", preprocess_config);
  dir.write("pipeline", pipeline_config);
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  auto entry = repo.status_of("pipeline");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->state, model_ready_state::unavailable);
  EXPECT_TRUE(contains(entry->reason,
                       file("pipeline").string() + ": /ensemble_scheduling/step/1/model_name: "))
      << entry->reason;
  EXPECT_TRUE(contains(entry->reason, "'classify'")) << entry->reason;
  EXPECT_EQ(repo.find("pipeline"), nullptr);
  EXPECT_EQ(repo.load("pipeline").code(), status_code::invalid_argument);

  // Loading the missing model rebuilds the ensemble waiting for it.
  dir.write("classify", classify_config);
  ASSERT_TRUE(repo.load("classify").ok());
  EXPECT_EQ(repo.status_of("pipeline")->state, model_ready_state::ready);
  ASSERT_NE(repo.find("pipeline"), nullptr);
  EXPECT_TRUE(repo.all_ready());
}

TEST_F(Repository, ReloadingAComposingModelRebuildsTheEnsemble) {
  dir.write("preprocess", preprocess_config);
  dir.write("classify", classify_config);
  dir.write("pipeline", pipeline_config);
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  const auto old_pipeline = repo.find("pipeline");
  const auto old_pre = repo.find("preprocess");
  ASSERT_TRUE(old_pipeline && old_pre);

  ASSERT_TRUE(repo.load("preprocess").ok());
  const auto new_pre = repo.find("preprocess");
  const auto new_pipeline = repo.find("pipeline");
  ASSERT_TRUE(new_pre && new_pipeline);
  EXPECT_NE(new_pre, old_pre);
  EXPECT_NE(new_pipeline, old_pipeline);
  EXPECT_EQ(new_pipeline->composing_models()[0], new_pre);
  EXPECT_EQ(old_pipeline->composing_models()[0], old_pre);

  // The old ensemble still serves over the old composing model it keeps alive.
  for (const auto& p : {old_pipeline, new_pipeline}) {
    auto f = infer(p->model(), ensemble_tests::make_request("IMAGE", 3.0F));
    const auto r = get(f);
    ASSERT_TRUE(r.ok()) << r.status.message();
    EXPECT_EQ(ensemble_tests::first_value(r, "CLASSIFICATION"), 8.0F);
  }
}

TEST_F(Repository, UnloadingAComposingModelMakesTheEnsembleUnavailable) {
  dir.write("preprocess", preprocess_config);
  dir.write("classify", classify_config);
  dir.write("pipeline", pipeline_config);
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  ASSERT_TRUE(repo.unload("classify").ok());
  const auto entry = repo.status_of("pipeline");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->state, model_ready_state::unavailable);
  EXPECT_TRUE(contains(entry->reason, "'classify'")) << entry->reason;
  EXPECT_EQ(repo.find("pipeline"), nullptr);

  // An unloaded ensemble stays unloaded when its composing models come back.
  ASSERT_TRUE(repo.unload("preprocess").ok());
  ASSERT_TRUE(repo.load("classify").ok());
  ASSERT_TRUE(repo.load("preprocess").ok());
  EXPECT_EQ(repo.status_of("pipeline")->state, model_ready_state::ready);
  ASSERT_TRUE(repo.unload("pipeline").ok());
  ASSERT_TRUE(repo.load("classify").ok());
  EXPECT_EQ(repo.status_of("pipeline")->state, model_ready_state::unavailable);
  EXPECT_EQ(repo.status_of("pipeline")->reason, "unloaded");
}

TEST_F(Repository, UnloadDependentsUnloadsTheEnsemblesUsingTheModel) {
  dir.write("preprocess", preprocess_config);
  dir.write("classify", classify_config);
  dir.write("pipeline", pipeline_config);
  dir.write("outer", outer_config);
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  ASSERT_EQ(repo.status_of("outer")->state, model_ready_state::ready);
  // Triton's unload_dependents: the ensembles using it, directly or not, are unloaded with it.
  ASSERT_TRUE(repo.unload("classify", /*unload_dependents=*/true).ok());
  for (const auto* name : {"classify", "pipeline", "outer"}) {
    EXPECT_EQ(repo.status_of(name)->state, model_ready_state::unavailable) << name;
    EXPECT_EQ(repo.status_of(name)->reason, "unloaded") << name;
  }
  EXPECT_EQ(repo.status_of("preprocess")->state, model_ready_state::ready);
  // Unloaded on request: the repository stays ready, and they stay unloaded when the model
  // comes back.
  EXPECT_TRUE(repo.all_ready());
  ASSERT_TRUE(repo.load("classify").ok());
  EXPECT_EQ(repo.find("pipeline"), nullptr);
  EXPECT_EQ(repo.find("outer"), nullptr);
  ASSERT_TRUE(repo.load("pipeline").ok());
  ASSERT_TRUE(repo.load("outer").ok());
  EXPECT_NE(repo.find("outer"), nullptr);
}

TEST_F(Repository, WhatIsNotAModelCannotBeLoadedAndChangesNothing) {
  dir.write("add", add_config);
  dir.write(".hidden", add_config); // a dot-folder is never a model, even with a config
  dir.add_folder(".cache", "x");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  ASSERT_EQ(index.size(), 1U);
  for (const auto* name : {".hidden", ".cache", "missing", "../add", "add/1", ""}) {
    const auto s = repo.load(name);
    EXPECT_FALSE(s.ok()) << name;
    EXPECT_FALSE(contains(s.message(), dir.root().string())) << s.message();
    EXPECT_FALSE(repo.status_of(name)) << name;
  }
  EXPECT_EQ(repo.load(".cache").message(),
            "failed to load '.cache', failed to poll from model repository: a hidden folder "
            "is not a model");
  EXPECT_EQ(repo.index().size(), 1U);
  EXPECT_TRUE(repo.all_ready());
}

TEST_F(Repository, UnloadAndLoadAgain) {
  dir.write("add", add_config);
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  ASSERT_TRUE(repo.unload("add").ok());
  EXPECT_EQ(repo.find("add"), nullptr);
  EXPECT_EQ(repo.status_of("add"),
            (servekit::model_index_entry{"add", 1, model_ready_state::unavailable, "unloaded"}));
  // As Triton: a model unloaded on request does not make the server unready.
  EXPECT_TRUE(repo.all_ready());
  EXPECT_EQ(repo.unload("add").code(), status_code::not_found);
  EXPECT_EQ(repo.unload("never").code(), status_code::not_found);
  ASSERT_TRUE(repo.load("add").ok());
  EXPECT_NE(repo.find("add"), nullptr);
  EXPECT_TRUE(repo.all_ready());
}

TEST_F(Repository, LoadErrors) {
  dir.write("add", add_config);
  servekit::model_repository repo{dir.root(), backends{}};
  auto s = repo.load("missing");
  EXPECT_EQ(s.code(), status_code::not_found);
  // Messages name the model, never the host path of the repository.
  EXPECT_EQ(s.message(),
            "failed to load 'missing', failed to poll from model repository: the model "
            "repository has no folder 'missing'");
  EXPECT_FALSE(repo.status_of("missing"));
  // Names are single folder names: nothing outside the root (Triton's INVALID_ARG).
  EXPECT_EQ(repo.load("../add").code(), status_code::invalid_argument);
  EXPECT_EQ(repo.load("../add").message(),
            "invalid model name '../add', model name must not contain path traversal characters");
  EXPECT_EQ(repo.load("..").code(), status_code::invalid_argument);
  EXPECT_EQ(repo.load("").code(), status_code::invalid_argument);
  EXPECT_EQ(repo.load("a\\b").code(), status_code::invalid_argument);
  EXPECT_FALSE(repo.status_of("../add"));
  EXPECT_TRUE(repo.index().empty());

  // A model loaded one at a time, without load_all.
  ASSERT_TRUE(repo.load("add").ok());
  const auto serving = repo.find("add");
  ASSERT_NE(serving, nullptr);

  // A failed reload leaves the serving model serving.
  dir.write("add", R"({"backend": "add", "max_batch_size": -1})");
  s = repo.load("add");
  EXPECT_EQ(s.code(), status_code::invalid_argument);
  EXPECT_TRUE(contains(s.message(), file("add").string() + ": /max_batch_size: ")) << s.message();
  EXPECT_EQ(repo.find("add"), serving);
  EXPECT_EQ(repo.status_of("add")->state, model_ready_state::ready);
  dir.write("add", R"({"backend": "failing"})");
  EXPECT_EQ(repo.load("add").code(), status_code::invalid_argument);
  EXPECT_EQ(repo.find("add"), serving);
}

TEST_F(Repository, ReloadPicksUpTheNewConfig) {
  dir.write("add", add_config_with(1));
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  dir.write("add", add_config_with(5));
  dir.add_folder("add", "2");
  ASSERT_TRUE(repo.load("add").ok());
  const auto m = repo.find("add");
  EXPECT_EQ(m->options().version, 2);
  auto f = infer(m->model(), add_request(1.0F));
  const auto r = get(f);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.find_output("OUT")->values<float>()[0], 6.0F);
}

// A thread keeps submitting through find() while another reloads the model 20 times: every
// request is accepted and answered exactly once, by the old or the new model.
TEST_F(Repository, ReloadWithoutDowntimeUnderConcurrentSubmitters) {
  dir.write("add", add_config_with(1));
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();

  struct tally {
    std::mutex mutex;
    std::condition_variable cv;
    std::uint64_t answered = 0;
    std::uint64_t failed = 0;
    std::uint64_t wrong = 0;
  };
  auto t = std::make_shared<tally>();
  std::atomic<bool> reloading{true};
  std::uint64_t submitted = 0;
  std::uint64_t not_found = 0;
  std::uint64_t rejected = 0;

  std::thread submitter{[&] {
    while (reloading.load() || submitted < 200) {
      const auto m = repo.find("add");
      if (!m) {
        ++not_found;
        continue;
      }
      auto once = std::make_shared<std::atomic<int>>(0);
      auto s = m->model().submit(add_request(1.0F), [t, once](servekit::response&& r) {
        const bool first = once->fetch_add(1) == 0;
        const float out = r.ok() ? r.find_output("OUT")->values<float>()[0] : 0.0F;
        {
          const std::lock_guard lock{t->mutex};
          ++t->answered;
          t->failed += r.ok() ? 0U : 1U;
          t->wrong += (first && (out == 2.0F || out == 3.0F)) ? 0U : 1U;
        }
        t->cv.notify_all();
      });
      if (s.ok()) {
        ++submitted;
      } else {
        ++rejected;
      }
    }
  }};
  for (int i = 0; i < 20; ++i) {
    dir.write("add", add_config_with(1 + (i % 2)));
    EXPECT_TRUE(repo.load("add").ok());
  }
  reloading = false;
  submitter.join();

  std::unique_lock lock{t->mutex};
  ASSERT_TRUE(
      t->cv.wait_for(lock, std::chrono::seconds{10}, [&] { return t->answered >= submitted; }));
  EXPECT_EQ(not_found, 0U);
  EXPECT_EQ(rejected, 0U);
  EXPECT_EQ(t->answered, submitted);
  EXPECT_EQ(t->failed, 0U);
  EXPECT_EQ(t->wrong, 0U);
  lock.unlock();
  repo.wait_retired();
  EXPECT_EQ(probe().live.load(), 1); // only the serving model's instance is left
}

// The last reference dropped inside a response sink, on the model's own instance thread: the
// reaper destroys the model, so nothing joins the instance thread from itself.
TEST_F(Repository, LastReferenceDroppedInASinkIsReapedElsewhere) {
  dir.write("add", add_config);
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  execution_hold hold;
  probe().hold = &hold;

  auto m = repo.find("add");
  ASSERT_NE(m, nullptr);
  std::promise<std::thread::id> sink_thread;
  auto sink_thread_id = sink_thread.get_future();
  const auto model = m->model();
  auto s = model.submit(add_request(1.0F), [held = m, &sink_thread](servekit::response&&) mutable {
    held.reset(); // the last reference goes here
    sink_thread.set_value(std::this_thread::get_id());
  });
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(hold.started.wait());
  ASSERT_TRUE(repo.unload("add").ok());
  m.reset(); // now only the sink holds it
  EXPECT_EQ(probe().live.load(), 1);
  hold.release.open();

  ASSERT_TRUE(probe().wait_destroyed(1)); // would deadlock (or abort) if destroyed in the sink
  const auto instance_thread = sink_thread_id.get();
  repo.wait_retired();
  const std::lock_guard lock{probe().mutex};
  ASSERT_EQ(probe().destroyed_on.size(), 1U);
  EXPECT_NE(probe().destroyed_on[0], instance_thread);
  EXPECT_NE(probe().destroyed_on[0], std::this_thread::get_id());
  EXPECT_EQ(probe().live.load(), 0);
}

TEST_F(Repository, DestructorDrainsWhatItRetires) {
  dir.write("add", batched_add_config);
  std::vector<std::future<servekit::response>> pending;
  {
    execution_hold hold; // outlives the repository, whose destructor drains the held execution
    servekit::model_repository repo{dir.root(), backends{}};
    (void)repo.load_all();
    const auto m = repo.find("add");
    ASSERT_NE(m, nullptr);
    probe().hold = &hold;
    for (int i = 0; i < 5; ++i) {
      pending.push_back(infer(m->model(), add_request(1.0F)));
    }
    ASSERT_TRUE(hold.started.wait());
    hold.release.open();
  }
  EXPECT_EQ(probe().live.load(), 0);
  for (auto& f : pending) {
    EXPECT_TRUE(get(f).ok()); // accepted requests were drained, not dropped
  }
}

TEST_F(Repository, AModelHeldPastTheRepositoryIsStillReaped) {
  dir.write("add", add_config);
  std::shared_ptr<const servekit::loaded_model> kept;
  {
    servekit::model_repository repo{dir.root(), backends{}};
    (void)repo.load_all();
    kept = repo.find("add");
  }
  ASSERT_NE(kept, nullptr);
  auto f = infer(kept->model(), add_request(1.0F));
  EXPECT_TRUE(get(f).ok());
  kept.reset();
  ASSERT_TRUE(probe().wait_destroyed(1));
  const std::lock_guard lock{probe().mutex};
  ASSERT_EQ(probe().destroyed_on.size(), 1U);
  EXPECT_NE(probe().destroyed_on[0], std::this_thread::get_id());
}

TEST_F(Repository, CustomFactory) {
  dir.write("add", add_config);
  int built = 0;
  servekit::model_repository repo{dir.root(), [&](const servekit::model_options& c) {
                                    ++built;
                                    return backends::make(c);
                                  }};
  (void)repo.load_all();
  EXPECT_EQ(built, 1);
  EXPECT_NE(repo.find("add"), nullptr);
}

} // namespace model_repository_test
