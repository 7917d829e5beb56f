// model_repository::add: servables the program constructs (a compile-time ensemble that owns its
// composing models, a hand-made model<...>) served next to the folders' models, with their
// readiness, index rows, statistics, unload and load; and the errors of a name that clashes.
#include "ensemble/pipeline_backends.hpp"
#include "repository_backends.hpp"

#include <servekit/ensemble.hpp>
#include <servekit/repository.hpp>
#include <servekit/schedule.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace registered_models_test {

using namespace repository_tests;
using ensemble_tests::first_value;
using ensemble_tests::make_request;
using servekit::in;
using servekit::model_ready_state;
using servekit::out;
using servekit::status_code;
using servekit::step;

using pre_backend =
    ensemble_tests::unary_backend<ensemble_tests::plus_one, "RAW_IMAGE", "PREPROCESSED_OUTPUT">;
using cls_backend = ensemble_tests::unary_backend<ensemble_tests::times_two, "FORMATTED_IMAGE",
                                                  "CLASSIFICATION_OUTPUT">;
using preprocess = servekit::model<pre_backend, servekit::dynamic_batcher<>>;
using classify = servekit::model<cls_backend>;

using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"CLASSIFICATION">,
    step<preprocess, in<"RAW_IMAGE", "IMAGE">, out<"PREPROCESSED_OUTPUT", "prepped">>,
    step<classify, in<"FORMATTED_IMAGE", "prepped">,
         out<"CLASSIFICATION_OUTPUT", "CLASSIFICATION">>>;

servekit::model_options named(const char* name, std::int64_t version = 1) {
  servekit::model_options o;
  o.name = name;
  o.version = version;
  return o;
}

/// The compile-time ensemble with the composing models it refers to, declared first.
struct served_pipeline {
  explicit served_pipeline(std::int64_t version = 1)
      : ensemble{{.name = "compiled", .version = version}, pre, cls} {}
  preprocess pre{named("compiled.preprocess")};
  classify cls{named("compiled.classify")};
  pipeline ensemble;
};

servekit::any_model make_pipeline() {
  return servekit::any_model::make_owning<&served_pipeline::ensemble>();
}

/// A model held with a shutdown of its own, which make_owning calls rather than the model's.
struct counted_parts {
  static inline std::atomic<int> shutdowns{0}; // NOLINT: test-only
  preprocess pre{named("counted")};
  void shutdown(servekit::shutdown_mode mode) {
    ++shutdowns;
    pre.shutdown(mode);
  }
};

using backends = servekit::backend_list<servekit::named_backend<"add", add_backend>>;

constexpr const char* add_config = R"({"backend": "add", "max_batch_size": 8})";
// An ensemble of the repository whose steps are models the program registers.
constexpr const char* configured_pipeline = R"({
  "platform": "ensemble", "max_batch_size": 8,
  "input": [{"name": "IMAGE", "data_type": "TYPE_FP32", "dims": [4]}],
  "output": [{"name": "CLASSIFICATION", "data_type": "TYPE_FP32", "dims": [4]}],
  "ensemble_scheduling": {"step": [
    {"model_name": "preprocess", "model_version": -1,
     "input_map": {"RAW_IMAGE": "IMAGE"},
     "output_map": {"PREPROCESSED_OUTPUT": "prepped"}},
    {"model_name": "classify", "model_version": -1,
     "input_map": {"FORMATTED_IMAGE": "prepped"},
     "output_map": {"CLASSIFICATION_OUTPUT": "CLASSIFICATION"}}]}})";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class Registered : public ::testing::Test {
protected:
  void SetUp() override {
    probe().reset();
    pre_backend::reset();
    cls_backend::reset();
  }
  temp_repository dir;
};

TEST_F(Registered, CompileTimeEnsembleServesBesideTheFolders) {
  dir.write("add", add_config);
  servekit::model_repository repo{dir.root(), backends{}};
  ASSERT_TRUE(repo.add("compiled", 1, make_pipeline).ok());
  const auto index = repo.load_all();
  ASSERT_EQ(index.size(), 2U);
  EXPECT_EQ(index[0], (servekit::model_index_entry{"add", 1, model_ready_state::ready, ""}));
  EXPECT_EQ(index[1], (servekit::model_index_entry{"compiled", 1, model_ready_state::ready, ""}));
  EXPECT_TRUE(repo.all_ready());
  EXPECT_EQ(repo.versions_of("compiled"), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(repo.ready_models().size(), 2U);

  const auto m = repo.find("compiled");
  ASSERT_NE(m, nullptr);
  // What metadata and /config show: the tensors and batch size the ensemble derives.
  EXPECT_EQ(m->options().name, "compiled");
  EXPECT_EQ(m->options().version, 1);
  ASSERT_EQ(m->options().input.size(), 1U);
  EXPECT_EQ(m->options().input[0].name, "IMAGE");
  ASSERT_EQ(m->options().output.size(), 1U);
  EXPECT_EQ(m->options().output[0].name, "CLASSIFICATION");
  EXPECT_EQ(m->options().max_batch_size, 8);
  EXPECT_EQ(m->options().platform, "ensemble"); // as Triton reports an ensemble

  auto f = infer(m->model(), make_request("IMAGE", 1.0F));
  const auto r = get(f);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(first_value(r, "CLASSIFICATION"), 4.0F); // (1 + 1) * 2
  EXPECT_EQ(m->model().statistics().success.count, 1U);
}

TEST_F(Registered, HandMadeModelKeepsItsOwnOptions) {
  servekit::model_repository repo{dir.root(), backends{}};
  ASSERT_TRUE(repo.add("pre", 1,
                       [] {
                         auto o = named("pre");
                         o.dynamic_batching = servekit::dynamic_batching_options{};
                         return servekit::any_model::make<preprocess>(o);
                       })
                  .ok());
  const auto m = repo.find("pre");
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->options().dynamic_batching.has_value()); // /config shows its scheduling
  EXPECT_NE(m->servable().get<preprocess>(), nullptr);
  auto f = infer(m->model(), make_request("RAW_IMAGE", 1.0F));
  EXPECT_EQ(first_value(get(f), "PREPROCESSED_OUTPUT"), 2.0F);
}

// What the options leave to the type is shown as the model runs it (Triton's auto-complete):
// the scheduler as composed, the tensors and max_batch_size as resolved; a compile-time
// ensemble reports Triton's platform "ensemble".
TEST_F(Registered, TheConfigShowsTheSchedulerAsComposed) {
  servekit::model_repository repo{dir.root(), backends{}};
  ASSERT_TRUE(
      repo.add("pre", 1, [] { return servekit::any_model::make<preprocess>(named("pre")); }).ok());
  const auto m = repo.find("pre");
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->options().dynamic_batching.has_value()); // composed: dynamic_batcher<>
  EXPECT_EQ(*m->options().dynamic_batching, servekit::dynamic_batching_options{});
  EXPECT_FALSE(m->options().sequence_batching.has_value());
  EXPECT_FALSE(m->options().model_transaction_policy.has_value()); // not decoupled
  ASSERT_EQ(m->options().input.size(), 1U);
  EXPECT_EQ(m->options().input[0].name, "RAW_IMAGE");
  EXPECT_EQ(m->options().max_batch_size, m->model().max_batch_size());

  ASSERT_TRUE(
      repo.add("cls", 1, [] { return servekit::any_model::make<classify>(named("cls")); }).ok());
  const auto plain = repo.find("cls");
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->options().dynamic_batching.has_value()); // the default scheduler
}

TEST_F(Registered, ClashesAndBadRegistrationsAreRefused) {
  dir.write("taken", add_config);
  servekit::model_repository repo{dir.root(), backends{}};
  auto s = repo.add("taken", 1, make_pipeline);
  EXPECT_EQ(s.code(), status_code::invalid_argument);
  EXPECT_TRUE(contains(s.message(), "the model repository has a folder 'taken'")) << s.message();

  ASSERT_TRUE(repo.add("compiled", 1, make_pipeline).ok());
  s = repo.add("compiled", 1, make_pipeline);
  EXPECT_EQ(s.code(), status_code::invalid_argument);
  EXPECT_TRUE(contains(s.message(), "registered already")) << s.message();

  for (const char* bad : {"", "..", "a/b", ".hidden"}) {
    EXPECT_EQ(repo.add(bad, 1, make_pipeline).code(), status_code::invalid_argument) << bad;
  }
  EXPECT_EQ(repo.add("v0", 0, make_pipeline).code(), status_code::invalid_argument);
  EXPECT_EQ(repo.add("empty", 1, {}).code(), status_code::invalid_argument);
  // None of them left a row.
  const auto index = repo.index();
  ASSERT_EQ(index.size(), 1U);
  EXPECT_EQ(index[0].name, "compiled");
}

TEST_F(Registered, AServableNamedOtherwiseIsUnavailableWithTheReason) {
  servekit::model_repository repo{dir.root(), backends{}};
  // served_pipeline names its ensemble "compiled".
  const auto s = repo.add("other", 1, make_pipeline);
  EXPECT_EQ(s.code(), status_code::invalid_argument);
  EXPECT_TRUE(contains(s.message(), "the servable is named 'compiled', not 'other'"))
      << s.message();
  const auto row = repo.status_of("other");
  ASSERT_TRUE(row);
  EXPECT_EQ(row->state, model_ready_state::unavailable);
  EXPECT_EQ(row->reason, s.message());
  EXPECT_FALSE(repo.all_ready());
  EXPECT_EQ(repo.find("other"), nullptr);

  // A factory that throws: the same, with its message.
  const auto thrown = repo.add(
      "throws", 1, []() -> servekit::any_model { throw std::runtime_error("weights missing"); });
  EXPECT_TRUE(contains(thrown.message(), "failed to build: weights missing")) << thrown.message();
}

TEST_F(Registered, UnloadUnpublishesAndLoadBuildsAgain) {
  std::atomic<int> built{0};
  servekit::model_repository repo{dir.root(), backends{}};
  const auto factory = [&built] {
    ++built;
    return make_pipeline();
  };
  ASSERT_TRUE(repo.add("compiled", 1, factory).ok());
  const auto first = repo.find("compiled");
  ASSERT_NE(first, nullptr);

  ASSERT_TRUE(repo.unload("compiled").ok());
  EXPECT_EQ(repo.find("compiled"), nullptr);
  EXPECT_EQ(repo.status_of("compiled"),
            (servekit::model_index_entry{"compiled", 1, model_ready_state::unavailable,
                                         std::string{servekit::unloaded_reason}}));
  EXPECT_TRUE(repo.all_ready()); // unloaded on request: readiness does not wait for it
  EXPECT_EQ(repo.unload("compiled").code(), status_code::not_found);

  ASSERT_TRUE(repo.load("compiled").ok());
  EXPECT_EQ(built, 2);
  const auto second = repo.find("compiled");
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second.get(), first.get());
  // The old one still answers whoever holds it, as a reloaded folder model does.
  auto old = infer(first->model(), make_request("IMAGE", 0.0F));
  EXPECT_EQ(first_value(get(old), "CLASSIFICATION"), 2.0F);

  // A load of a serving one is a reload; load_all leaves a serving one alone and builds an
  // unloaded one.
  ASSERT_TRUE(repo.load("compiled").ok());
  EXPECT_EQ(built, 3);
  (void)repo.load_all();
  EXPECT_EQ(built, 3);
  ASSERT_TRUE(repo.unload("compiled").ok());
  (void)repo.load_all();
  EXPECT_EQ(built, 4);
  EXPECT_EQ(repo.status_of("compiled")->state, model_ready_state::ready);
}

TEST_F(Registered, SeveralVersionsOfOneName) {
  servekit::model_repository repo{dir.root(), backends{}};
  ASSERT_TRUE(repo.add("compiled", 1, make_pipeline).ok());
  ASSERT_TRUE(
      repo.add("compiled", 2,
               [] { return servekit::any_model::make_owning<&served_pipeline::ensemble>(2); })
          .ok());
  EXPECT_EQ(repo.versions_of("compiled"), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(repo.find("compiled")->options().version, 2);
  EXPECT_EQ(repo.find("compiled", 1)->model().version(), 1);
  EXPECT_EQ(repo.index().size(), 2U);
}

TEST_F(Registered, AFolderEnsembleUsesRegisteredModelsAsSteps) {
  dir.write("pipeline", configured_pipeline);
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  EXPECT_EQ(repo.status_of("pipeline")->state, model_ready_state::unavailable); // no steps yet

  ASSERT_TRUE(repo.add("preprocess", 1,
                       [] { return servekit::any_model::make<preprocess>(named("preprocess")); })
                  .ok());
  ASSERT_TRUE(
      repo.add("classify", 1, [] { return servekit::any_model::make<classify>(named("classify")); })
          .ok());
  const auto p = repo.find("pipeline");
  ASSERT_NE(p, nullptr);
  auto f = infer(p->model(), make_request("IMAGE", 1.0F));
  EXPECT_EQ(first_value(get(f), "CLASSIFICATION"), 4.0F);
  EXPECT_TRUE(repo.all_ready());

  // Unloading a step takes the ensemble out of service, naming it; loading it brings it back.
  ASSERT_TRUE(repo.unload("classify").ok());
  EXPECT_EQ(repo.find("pipeline"), nullptr);
  ASSERT_TRUE(repo.load("classify").ok());
  EXPECT_NE(repo.find("pipeline"), nullptr);
}

TEST_F(Registered, APollLeavesRegisteredModelsAlone) {
  dir.write("add", add_config);
  servekit::model_repository repo{dir.root(), backends{}};
  ASSERT_TRUE(repo.add("compiled", 1, make_pipeline).ok());
  (void)repo.load_all();
  servekit::repository_poller poller{repo, std::chrono::milliseconds{0}};
  poller.start();
  dir.remove("add");
  const auto changes = poller.poll_once();
  EXPECT_EQ(changes.removed, (std::vector<std::string>{"add"}));
  EXPECT_EQ(repo.find("add"), nullptr);
  EXPECT_NE(repo.find("compiled"), nullptr);

  // A folder that later takes a registered name is not loaded over it.
  dir.write("compiled", add_config);
  (void)repo.load_all();
  EXPECT_EQ(repo.find("compiled")->options().backend, "");
  EXPECT_EQ(repo.load("compiled").code(), status_code::invalid_argument);
  EXPECT_NE(repo.find("compiled"), nullptr);
}

TEST_F(Registered, ShutdownReachesWhatMakeOwningHolds) {
  servekit::model_repository repo;
  ASSERT_TRUE(repo.add("compiled", 1, make_pipeline).ok());
  ASSERT_TRUE(
      repo.add("counted", 1, [] { return servekit::any_model::make_owning<&counted_parts::pre>(); })
          .ok());
  counted_parts::shutdowns = 0;
  EXPECT_TRUE(
      servekit::shutdown_models(repo, servekit::shutdown_mode::drain, std::chrono::seconds{5}));
  EXPECT_EQ(counted_parts::shutdowns, 1);
  // Both stopped accepting: the ensemble through its own shutdown, the model through the parts'.
  auto a = infer(repo.find("compiled")->model(), make_request("IMAGE", 1.0F));
  EXPECT_EQ(get(a).status.code(), status_code::unavailable);
  auto b = infer(repo.find("counted")->model(), make_request("RAW_IMAGE", 1.0F));
  EXPECT_EQ(get(b).status.code(), status_code::unavailable);
}

TEST_F(Registered, ARepositoryWithoutBackendsOrFolders) {
  servekit::model_repository bare; // no root: only what the program adds
  EXPECT_TRUE(bare.load_all().empty());
  ASSERT_TRUE(bare.add("compiled", 1, make_pipeline).ok());
  EXPECT_EQ(bare.load("missing").code(), status_code::not_found);
  EXPECT_EQ(bare.index().size(), 1U);

  // Folders that name a backend cannot be built without a backend_list, and say so.
  dir.write("add", add_config);
  servekit::model_repository no_backends{dir.root()};
  (void)no_backends.load_all();
  const auto row = no_backends.status_of("add");
  ASSERT_TRUE(row);
  EXPECT_EQ(row->state, model_ready_state::unavailable);
  EXPECT_TRUE(contains(row->reason, "/backend: model 'add' names a backend, and this repository "
                                    "has none"))
      << row->reason;
}

} // namespace registered_models_test
