// model_repository versions: Triton's version_policy (latest N, all, specific) over a model's
// version folders, one index row per version, find() by version, reloads that add and retire
// versions without downtime, and ensemble steps that name a version.
#include "ensemble/pipeline_backends.hpp"
#include "repository_backends.hpp"

#include <servekit/repository.hpp>
#include <servekit/repository/detail/version_selection.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace model_versions_test {

using namespace repository_tests;
using servekit::model_ready_state;
using servekit::named_backend;
using servekit::status_code;
using servekit::version_policy_options;
using servekit::detail::select_versions;
using servekit::detail::version_selection;
using versions = std::vector<std::int64_t>;

using pre_backend =
    ensemble_tests::unary_backend<ensemble_tests::plus_one, "RAW_IMAGE", "PREPROCESSED_OUTPUT">;
using cls_backend = ensemble_tests::unary_backend<ensemble_tests::times_two, "FORMATTED_IMAGE",
                                                  "CLASSIFICATION_OUTPUT">;

using backends = servekit::backend_list<
    named_backend<"add", add_backend>, named_backend<"failing", failing_backend>,
    named_backend<"plus_one", pre_backend>, named_backend<"times_two", cls_backend>>;

std::string add_config_with_policy(const std::string& policy) {
  return R"({"backend": "add", "max_batch_size": 8, "version_policy": )" + policy + "}";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

version_policy_options latest(std::uint32_t n) {
  version_policy_options p;
  p.kind = version_policy_options::kind_type::latest;
  p.num_versions = n;
  return p;
}

version_policy_options specific(versions v) {
  version_policy_options p;
  p.kind = version_policy_options::kind_type::specific;
  p.versions = std::move(v);
  return p;
}

// -- the pure selection --------------------------------------------------------------------------

TEST(SelectVersions, LatestIsTheDefaultAndTakesTheHighest) {
  EXPECT_EQ(select_versions(std::nullopt, {1, 2, 7}), (version_selection{{7}, {}}));
  EXPECT_EQ(select_versions(latest(2), {1, 2, 7}), (version_selection{{2, 7}, {}}));
  EXPECT_EQ(select_versions(latest(5), {1, 2}), (version_selection{{1, 2}, {}}));
}

TEST(SelectVersions, AllTakesEveryFolder) {
  version_policy_options all;
  all.kind = version_policy_options::kind_type::all;
  EXPECT_EQ(select_versions(all, {1, 3, 10}), (version_selection{{1, 3, 10}, {}}));
}

TEST(SelectVersions, SpecificSplitsServedAndMissing) {
  EXPECT_EQ(select_versions(specific({4, 1, 1}), {1, 3}), (version_selection{{1}, {4}}));
  EXPECT_EQ(select_versions(specific({3}), {1, 3}), (version_selection{{3}, {}}));
}

TEST(SelectVersions, PoliciesThatServeNothingAreConfigErrors) {
  const auto error_path = [](const version_policy_options& p) {
    try {
      (void)select_versions(p, {1});
    } catch (const servekit::config_error& e) {
      return std::string{e.path()};
    }
    return std::string{"no error"};
  };
  EXPECT_EQ(error_path(latest(0)), "/version_policy/latest/num_versions");
  EXPECT_EQ(error_path(specific({})), "/version_policy/specific/versions");
  EXPECT_EQ(error_path(specific({2, 0})), "/version_policy/specific/versions/1");
}

TEST(VersionFolders, OnlyNumericFoldersAscending) {
  temp_repository dir;
  dir.write("m", "{}");
  for (const char* f : {"10", "2", "notes", "-1", "+3", "0", "1x"}) {
    dir.add_folder("m", f);
  }
  EXPECT_EQ(servekit::detail::version_folders(dir.root() / "m"), (versions{2, 10}));
  EXPECT_TRUE(servekit::detail::version_folders(dir.root() / "none").empty());
}

// -- the repository ------------------------------------------------------------------------------

class Versions : public ::testing::Test {
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

  void add_versions(const std::string& model, const versions& vs) const {
    for (const auto v : vs) {
      dir.add_folder(model, std::to_string(v));
    }
  }

  temp_repository dir;
};

TEST_F(Versions, LatestTwoOfThreeFolders) {
  dir.write("add", add_config_with_policy(R"({"latest": {"num_versions": 2}})"));
  add_versions("add", {1, 2, 3});
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  ASSERT_EQ(index.size(), 2U);
  EXPECT_EQ(index[0], (servekit::model_index_entry{"add", 2, model_ready_state::ready, ""}));
  EXPECT_EQ(index[1], (servekit::model_index_entry{"add", 3, model_ready_state::ready, ""}));
  EXPECT_TRUE(repo.all_ready());
  EXPECT_EQ(repo.versions_of("add"), (versions{2, 3}));
  EXPECT_TRUE(repo.versions_of("nope").empty());

  const auto v2 = repo.find("add", 2);
  const auto v3 = repo.find("add", 3);
  ASSERT_TRUE(v2 && v3);
  EXPECT_NE(v2, v3);
  EXPECT_EQ(repo.find("add"), v3);
  EXPECT_EQ(repo.find("add", -1), v3);
  EXPECT_EQ(repo.find("add", 1), nullptr);
  EXPECT_EQ(v2->options().version, 2);
  EXPECT_EQ(v2->model().version(), 2);
  EXPECT_EQ(v2->options().directory, (dir.root() / "add" / "2").string());
  EXPECT_EQ(v3->options().directory, (dir.root() / "add" / "3").string());
  EXPECT_EQ(probe().live.load(), 2); // one instance per version

  EXPECT_EQ(repo.status_of("add")->version, 3);
  EXPECT_EQ(repo.status_of("add", 2)->state, model_ready_state::ready);
  EXPECT_FALSE(repo.status_of("add", 1));
  EXPECT_EQ(repo.status_of("add", -1), repo.status_of("add"));

  const auto ready = repo.ready_models();
  ASSERT_EQ(ready.size(), 2U);
  EXPECT_EQ(ready[0], v2);
  EXPECT_EQ(ready[1], v3);
  for (const auto& m : {v2, v3}) {
    auto f = infer(m->model(), add_request(1.0F));
    const auto r = get(f);
    ASSERT_TRUE(r.ok()) << r.status.message();
    EXPECT_EQ(r.find_output("OUT")->values<float>()[0], 2.0F);
  }
}

TEST_F(Versions, AllServesEveryVersionFolder) {
  dir.write("add", add_config_with_policy(R"({"all": {}})"));
  add_versions("add", {1, 2, 5});
  dir.add_folder("add", "notes");
  servekit::model_repository repo{dir.root(), backends{}};
  EXPECT_EQ(repo.load_all().size(), 3U);
  EXPECT_EQ(repo.versions_of("add"), (versions{1, 2, 5}));
  EXPECT_EQ(repo.find("add")->options().version, 5);
}

TEST_F(Versions, SpecificWithAMissingVersionFolder) {
  dir.write("add", add_config_with_policy(R"({"specific": {"versions": [4, 1]}})"));
  add_versions("add", {1, 3});
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  ASSERT_EQ(index.size(), 2U);
  EXPECT_EQ(index[0], (servekit::model_index_entry{"add", 1, model_ready_state::ready, ""}));
  EXPECT_EQ(index[1].version, 4);
  EXPECT_EQ(index[1].state, model_ready_state::unavailable);
  EXPECT_EQ(index[1].reason, file("add").string() +
                                 ": /version_policy/specific/versions/0: version 4 of model 'add' "
                                 "has no version folder '" +
                                 "add/4'");
  EXPECT_FALSE(repo.all_ready());
  EXPECT_EQ(repo.versions_of("add"), (versions{1}));
  EXPECT_EQ(repo.find("add", 3), nullptr);
  EXPECT_EQ(repo.find("add", 4), nullptr);
  EXPECT_EQ(repo.find("add")->options().version, 1);
  EXPECT_EQ(repo.status_of("add")->version, 1); // the serving version sums it up
  EXPECT_EQ(repo.status_of("add", 4), index[1]);

  // load() reports the missing version and still serves the others.
  const auto s = repo.load("add");
  EXPECT_EQ(s.code(), status_code::invalid_argument);
  EXPECT_EQ(s.message(), index[1].reason);
  EXPECT_EQ(repo.versions_of("add"), (versions{1}));

  // Once the folder exists, a load serves it.
  dir.add_folder("add", "4");
  ASSERT_TRUE(repo.load("add").ok());
  EXPECT_EQ(repo.versions_of("add"), (versions{1, 4}));
  EXPECT_TRUE(repo.all_ready());
}

TEST_F(Versions, OnlyMissingVersionsMakeTheModelUnavailable) {
  dir.write("add", add_config_with_policy(R"({"specific": {"versions": [2]}})"));
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  EXPECT_EQ(repo.find("add"), nullptr);
  const auto entry = repo.status_of("add");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->version, 2);
  EXPECT_EQ(entry->state, model_ready_state::unavailable);
  EXPECT_TRUE(contains(entry->reason, "version 2 of model 'add' has no version folder"))
      << entry->reason;
}

TEST_F(Versions, AModelWithoutVersionFoldersServesVersionOne) {
  dir.write("all", add_config_with_policy(R"({"all": {}})"));
  dir.write("one", add_config_with_policy(R"({"specific": {"versions": [1]}})"));
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  ASSERT_TRUE(repo.all_ready());
  for (const char* name : {"all", "one"}) {
    EXPECT_EQ(repo.versions_of(name), (versions{1})) << name;
    EXPECT_EQ(repo.find(name, 1)->options().directory, (dir.root() / name).string()) << name;
  }
}

TEST_F(Versions, BadPolicyNamesTheField) {
  dir.write("add", add_config_with_policy(R"({"latest": {"num_versions": 0}})"));
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  const auto entry = repo.status_of("add");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->state, model_ready_state::unavailable);
  EXPECT_TRUE(
      contains(entry->reason, file("add").string() + ": /version_policy/latest/num_versions"))
      << entry->reason;
}

// A reload whose versions fail to build: the serving versions keep serving, a new one is
// UNAVAILABLE with the reason.
TEST_F(Versions, FailedReloadKeepsServingVersions) {
  dir.write("add", add_config_with_policy(R"({"all": {}})"));
  add_versions("add", {1, 2});
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  const auto v1 = repo.find("add", 1);
  const auto v2 = repo.find("add", 2);
  ASSERT_TRUE(v1 && v2);
  dir.write("add", R"({"backend": "failing", "version_policy": {"all": {}}})");
  add_versions("add", {3});
  const auto s = repo.load("add");
  EXPECT_EQ(s.code(), status_code::invalid_argument);
  EXPECT_TRUE(contains(s.message(), "no device for this backend")) << s.message();
  EXPECT_EQ(repo.find("add", 1), v1); // serving versions keep serving
  EXPECT_EQ(repo.find("add", 2), v2);
  EXPECT_EQ(repo.find("add"), v2);
  const auto v3 = repo.status_of("add", 3);
  ASSERT_TRUE(v3);
  EXPECT_EQ(v3->state, model_ready_state::unavailable);
  EXPECT_TRUE(contains(v3->reason, file("add").string() + ": /instance_group: ")) << v3->reason;
}

TEST_F(Versions, ReloadRetiresVersionsThatLeaveThePolicy) {
  dir.write("add", add_config_with_policy(R"({"all": {}})"));
  add_versions("add", {1, 2, 3});
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  EXPECT_EQ(probe().live.load(), 3);

  dir.write("add", add_config_with_policy(R"({"latest": {"num_versions": 1}})"));
  ASSERT_TRUE(repo.load("add").ok());
  EXPECT_EQ(repo.versions_of("add"), (versions{3}));
  const auto index = repo.index();
  ASSERT_EQ(index.size(), 3U);
  EXPECT_EQ(index[0],
            (servekit::model_index_entry{"add", 1, model_ready_state::unavailable, "unloaded"}));
  EXPECT_EQ(index[1],
            (servekit::model_index_entry{"add", 2, model_ready_state::unavailable, "unloaded"}));
  EXPECT_EQ(index[2], (servekit::model_index_entry{"add", 3, model_ready_state::ready, ""}));
  EXPECT_TRUE(repo.all_ready()); // versions a policy retires do not make the server unready
  repo.wait_retired();
  EXPECT_EQ(probe().live.load(), 1);

  // And back: a version that comes back into the policy serves again.
  dir.write("add", add_config_with_policy(R"({"latest": {"num_versions": 2}})"));
  ASSERT_TRUE(repo.load("add").ok());
  EXPECT_EQ(repo.versions_of("add"), (versions{2, 3}));
  EXPECT_EQ(repo.index().size(), 3U);
}

TEST_F(Versions, UnloadUnpublishesEveryVersion) {
  dir.write("add", add_config_with_policy(R"({"all": {}})"));
  add_versions("add", {1, 2});
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  ASSERT_TRUE(repo.unload("add").ok());
  EXPECT_TRUE(repo.versions_of("add").empty());
  EXPECT_EQ(repo.find("add", 1), nullptr);
  EXPECT_EQ(repo.find("add"), nullptr);
  for (const auto& row : repo.index()) {
    EXPECT_EQ(row.state, model_ready_state::unavailable);
    EXPECT_EQ(row.reason, "unloaded");
  }
  EXPECT_EQ(repo.status_of("add"),
            (servekit::model_index_entry{"add", 2, model_ready_state::unavailable, "unloaded"}));
  EXPECT_TRUE(repo.all_ready());
  EXPECT_EQ(repo.unload("add").code(), status_code::not_found);
  ASSERT_TRUE(repo.load("add").ok());
  EXPECT_EQ(repo.versions_of("add"), (versions{1, 2}));
}

// Submitters keep sending to the latest version and to version 2 while a reload adds version 3
// (latest 2: version 1 leaves). Every request is accepted and answered exactly once; version 1,
// busy with a held request when it leaves, finishes it and is then destroyed.
TEST_F(Versions, ReloadAddingAVersionUnderLoad) {
  dir.write("add", add_config_with_policy(R"({"latest": {"num_versions": 2}})"));
  add_versions("add", {1, 2});
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  // Make version 1 serve too, then hold a request on it.
  dir.write("add", add_config_with_policy(R"({"all": {}})"));
  ASSERT_TRUE(repo.load("add").ok());
  ASSERT_EQ(repo.versions_of("add"), (versions{1, 2}));
  repo.wait_retired();
  ASSERT_EQ(probe().live.load(), 2);
  probe().reset();

  execution_hold hold;
  probe().hold = &hold;
  auto held = infer(repo.find("add", 1)->model(), add_request(1.0F, "held"));
  ASSERT_TRUE(hold.started.wait());

  struct tally {
    std::mutex mutex;
    std::condition_variable cv;
    std::uint64_t answered = 0;
    std::uint64_t failed = 0;
  };
  auto t = std::make_shared<tally>();
  std::atomic<bool> reloading{true};
  std::atomic<std::uint64_t> submitted{0};
  std::atomic<std::uint64_t> missing{0};
  std::atomic<std::uint64_t> rejected{0};
  std::atomic<std::uint64_t> from_v3{0};
  const auto submit_loop = [&](std::int64_t version) {
    std::uint64_t mine = 0;
    while (reloading.load() || mine < 100) {
      const auto m = repo.find("add", version);
      if (!m) {
        ++missing;
        continue;
      }
      if (m->options().version == 3) {
        ++from_v3;
      }
      auto once = std::make_shared<std::atomic<int>>(0);
      auto s = m->model().submit(add_request(1.0F), [t, once](servekit::response&& r) {
        const bool bad = once->fetch_add(1) != 0 || !r.ok();
        {
          const std::lock_guard lock{t->mutex};
          ++t->answered;
          t->failed += bad ? 1U : 0U;
        }
        t->cv.notify_all();
      });
      if (s.ok()) {
        ++submitted;
        ++mine;
      } else {
        ++rejected;
      }
    }
  };
  std::thread latest_submitter{submit_loop, -1};
  std::thread v2_submitter{submit_loop, 2};

  dir.write("add", add_config_with_policy(R"({"latest": {"num_versions": 2}})"));
  add_versions("add", {3});
  EXPECT_TRUE(repo.load("add").ok());
  EXPECT_EQ(repo.versions_of("add"), (versions{2, 3}));
  EXPECT_EQ(repo.find("add", 1), nullptr);
  EXPECT_EQ(repo.status_of("add", 1)->reason, "unloaded");
  for (int i = 0; i < 4; ++i) { // a few more reloads while they submit
    EXPECT_TRUE(repo.load("add").ok());
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (from_v3.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  reloading = false;
  latest_submitter.join();
  v2_submitter.join();
  EXPECT_GT(from_v3.load(), 0U);

  {
    std::unique_lock lock{t->mutex};
    ASSERT_TRUE(t->cv.wait_for(lock, std::chrono::seconds{10},
                               [&] { return t->answered >= submitted.load(); }));
    EXPECT_EQ(t->answered, submitted.load());
    EXPECT_EQ(t->failed, 0U);
  }
  EXPECT_EQ(missing.load(), 0U);
  EXPECT_EQ(rejected.load(), 0U);

  // Version 1 left the policy while busy: it still answers its held request, then goes.
  hold.release.open();
  const auto r = get(held);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.find_output("OUT")->values<float>()[0], 2.0F);
  repo.wait_retired();
  EXPECT_EQ(probe().live.load(), 2); // versions 2 and 3, one instance each
}

// -- ensembles ------------------------------------------------------------------------------------

std::string pipeline_with_versions(std::int64_t pre_version, std::int64_t cls_version) {
  return R"({
  "platform": "ensemble", "max_batch_size": 8,
  "input": [{"name": "IMAGE", "data_type": "TYPE_FP32", "dims": [4]}],
  "output": [{"name": "CLASSIFICATION", "data_type": "TYPE_FP32", "dims": [4]}],
  "ensemble_scheduling": {"step": [
    {"model_name": "preprocess", "model_version": )" +
         std::to_string(pre_version) + R"(,
     "input_map": {"RAW_IMAGE": "IMAGE"},
     "output_map": {"PREPROCESSED_OUTPUT": "preprocessed"}},
    {"model_name": "classify", "model_version": )" +
         std::to_string(cls_version) + R"(,
     "input_map": {"FORMATTED_IMAGE": "preprocessed"},
     "output_map": {"CLASSIFICATION_OUTPUT": "CLASSIFICATION"}}]}})";
}

TEST_F(Versions, EnsembleStepsPickAVersion) {
  dir.write("preprocess",
            R"({"backend": "plus_one", "max_batch_size": 8, "version_policy": {"all": {}}})");
  add_versions("preprocess", {1, 2});
  dir.write("classify", R"({"backend": "times_two", "max_batch_size": 8})");
  dir.write("pinned", pipeline_with_versions(1, -1));
  dir.write("latest", pipeline_with_versions(-1, -1));
  dir.write("absent", pipeline_with_versions(3, -1));
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();

  const auto pinned = repo.find("pinned");
  const auto newest = repo.find("latest");
  ASSERT_TRUE(pinned && newest);
  EXPECT_EQ(pinned->composing_models()[0], repo.find("preprocess", 1));
  EXPECT_EQ(newest->composing_models()[0], repo.find("preprocess", 2));
  auto f = infer(pinned->model(), ensemble_tests::make_request("IMAGE", 1.0F));
  const auto r = get(f);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(ensemble_tests::first_value(r, "CLASSIFICATION"), 4.0F);

  const auto absent = repo.status_of("absent");
  ASSERT_TRUE(absent);
  EXPECT_EQ(absent->state, model_ready_state::unavailable);
  EXPECT_TRUE(contains(absent->reason, "/ensemble_scheduling/step/0/model_name: "))
      << absent->reason;
  EXPECT_TRUE(contains(absent->reason, "'preprocess' version 3")) << absent->reason;

  // A reload that retires version 1 takes the pinned ensemble down and keeps the other serving.
  dir.write("preprocess", R"({"backend": "plus_one", "max_batch_size": 8})");
  ASSERT_TRUE(repo.load("preprocess").ok());
  EXPECT_EQ(repo.find("pinned"), nullptr);
  EXPECT_TRUE(contains(repo.status_of("pinned")->reason, "'preprocess' version 1"))
      << repo.status_of("pinned")->reason;
  ASSERT_NE(repo.find("latest"), nullptr);
  EXPECT_EQ(repo.find("latest")->composing_models()[0], repo.find("preprocess", 2));
}

} // namespace model_versions_test
