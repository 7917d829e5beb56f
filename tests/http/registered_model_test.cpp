// A servable the program constructs, served over HTTP: a compile-time ensemble registered with
// model_repository::add answers metadata, /config, infer, statistics, metrics and the
// repository's index, load and unload as a folder's model does.
#include "http_client.hpp"

#include "ensemble/pipeline_backends.hpp"

#include <servekit/ensemble.hpp>
#include <servekit/http/server.hpp>
#include <servekit/repository.hpp>
#include <servekit/runtime.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <thread>
#include <utility>

namespace registered_model_test {

using json = nlohmann::json;
using servekit::in;
using servekit::out;
using servekit::step;

using preprocess = servekit::model<
    ensemble_tests::unary_backend<ensemble_tests::plus_one, "RAW_IMAGE", "PREPROCESSED_OUTPUT">>;
using classify =
    servekit::model<ensemble_tests::unary_backend<ensemble_tests::times_two, "FORMATTED_IMAGE",
                                                  "CLASSIFICATION_OUTPUT">>;
using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"CLASSIFICATION">,
    step<preprocess, in<"RAW_IMAGE", "IMAGE">, out<"PREPROCESSED_OUTPUT", "prepped">>,
    step<classify, in<"FORMATTED_IMAGE", "prepped">,
         out<"CLASSIFICATION_OUTPUT", "CLASSIFICATION">>>;

/// The ensemble and the composing models it refers to, declared first.
struct served_pipeline {
  preprocess pre;
  classify cls;
  pipeline ensemble{{.name = "compiled"}, pre, cls};
};

/// Registers the compile-time ensemble as "compiled".
void add_compiled_pipeline(servekit::model_repository& repository) {
  const auto added = repository.add(
      "compiled", 1, [] { return servekit::any_model::make_owning<&served_pipeline::ensemble>(); });
  EXPECT_TRUE(added.ok()) << added.message();
}

/// A model repository without folders holding what `add` registers (the compile-time
/// ensemble by default), served on a free loopback port in explicit model control mode.
class served_pipeline_server {
public:
  explicit served_pipeline_server(
      void (*add)(servekit::model_repository&) = add_compiled_pipeline) {
    add(repository_);
    (void)repository_.load_all();
    servekit::http::server_options o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.thread_count = 2;
    o.model_control.mode = servekit::http::model_control_mode::explicit_;
    server_.emplace(repository_, std::move(o));
    thread_ = std::thread{[this] { server_->run(); }};
  }
  served_pipeline_server(const served_pipeline_server&) = delete;
  served_pipeline_server& operator=(const served_pipeline_server&) = delete;
  ~served_pipeline_server() {
    server_->stop();
    thread_.join();
    server_.reset();
  }

  [[nodiscard]] test_http::client client() const { return {"127.0.0.1", server_->port()}; }

private:
  servekit::model_repository repository_; // no root: only what the program adds
  std::optional<servekit::http::server> server_;
  std::thread thread_;
};

json parse(const test_http::reply& r) { return json::parse(r.body); }

constexpr const char* infer_body =
    R"({"inputs": [{"name": "IMAGE", "shape": [1, 4], "datatype": "FP32",
                    "data": [1, 2, 3, 4]}]})";

TEST(RegisteredModel, CompileTimeEnsembleAnswersOverHttp) {
  served_pipeline_server s;
  auto c = s.client();

  const auto index = c.post("/v2/repository/index", "");
  ASSERT_EQ(index.status, 200U) << index.body;
  EXPECT_EQ(parse(index), json::parse(R"([{"name": "compiled", "version": "1",
                                            "state": "READY", "reason": ""}])"));
  EXPECT_EQ(c.get("/v2/health/ready").status, 200U);
  EXPECT_EQ(c.get("/v2/models/compiled/ready").status, 200U);

  const auto metadata = c.get("/v2/models/compiled");
  ASSERT_EQ(metadata.status, 200U) << metadata.body;
  const auto m = parse(metadata);
  EXPECT_EQ(m.at("name"), "compiled");
  EXPECT_EQ(m.at("versions"), json::parse(R"(["1"])"));
  EXPECT_EQ(m.at("platform"), "ensemble"); // as Triton shows an ensemble
  ASSERT_EQ(m.at("inputs").size(), 1U);
  EXPECT_EQ(m["inputs"][0].at("name"), "IMAGE");
  EXPECT_EQ(m["inputs"][0].at("datatype"), "FP32");
  ASSERT_EQ(m.at("outputs").size(), 1U);
  EXPECT_EQ(m["outputs"][0].at("name"), "CLASSIFICATION");

  const auto config = c.get("/v2/models/compiled/config");
  ASSERT_EQ(config.status, 200U) << config.body;
  EXPECT_EQ(parse(config).at("max_batch_size"), 8);
  EXPECT_EQ(parse(config).at("platform"), "ensemble");

  const auto r = c.post("/v2/models/compiled/infer", infer_body);
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto outputs = parse(r).at("outputs");
  ASSERT_EQ(outputs.size(), 1U);
  EXPECT_EQ(outputs[0].at("name"), "CLASSIFICATION");
  EXPECT_EQ(outputs[0].at("data"), json::parse("[4.0, 6.0, 8.0, 10.0]")); // (x + 1) * 2
  EXPECT_EQ(parse(r).at("model_name"), "compiled");

  const auto stats = c.get("/v2/models/compiled/stats");
  ASSERT_EQ(stats.status, 200U) << stats.body;
  EXPECT_EQ(parse(stats).at("model_stats")[0].at("inference_stats").at("success").at("count"), 1);
  const auto metrics = c.get("/metrics");
  EXPECT_NE(metrics.body.find("nv_inference_request_success{model=\"compiled\",version=\"1\"} 1\n"),
            std::string::npos)
      << metrics.body;
}

/// A hand-made model whose type composes a dynamic batcher, registered with options that name
/// it and nothing else.
using batched_preprocess = servekit::model<
    ensemble_tests::unary_backend<ensemble_tests::plus_one, "RAW_IMAGE", "PREPROCESSED_OUTPUT">,
    servekit::dynamic_batcher<>>;

// /config shows what the type composes, as Triton's auto-complete shows what a backend fills
// in: the dynamic_batching block the model runs with, its tensors and max_batch_size.
TEST(RegisteredModel, ConfigShowsTheSchedulerTheTypeComposes) {
  served_pipeline_server s{[](servekit::model_repository& repository) {
    const auto added = repository.add("prep", 1, [] {
      servekit::model_options o;
      o.name = "prep";
      return servekit::any_model::make<batched_preprocess>(o);
    });
    EXPECT_TRUE(added.ok()) << added.message();
  }};
  auto c = s.client();
  const auto config = c.get("/v2/models/prep/config");
  ASSERT_EQ(config.status, 200U) << config.body;
  const auto j = parse(config);
  EXPECT_TRUE(j.contains("dynamic_batching")) << j.dump();
  EXPECT_FALSE(j.contains("sequence_batching")) << j.dump();
  ASSERT_EQ(j.at("input").size(), 1U) << j.dump();
  EXPECT_EQ(j["input"][0].at("name"), "RAW_IMAGE");
  EXPECT_EQ(j.at("max_batch_size"), 8); // the backend's declaration (unary_backend's default)
  EXPECT_EQ(j["input"][0].at("dims"), json::array({4}));
  const auto metadata = parse(c.get("/v2/models/prep"));
  EXPECT_EQ(metadata.at("inputs")[0].at("shape"), json::array({-1, 4})); // batching: -1 first
  EXPECT_EQ(metadata.at("platform"), ""); // a model<> names no backend or platform
}

TEST(RegisteredModel, UnloadAndLoadThroughTheRepositoryApi) {
  served_pipeline_server s;
  auto c = s.client();
  ASSERT_EQ(c.post("/v2/repository/models/compiled/unload", "").status, 200U);
  EXPECT_NE(c.get("/v2/models/compiled/ready").status, 200U);
  EXPECT_NE(c.post("/v2/models/compiled/infer", infer_body).status, 200U);
  EXPECT_EQ(parse(c.post("/v2/repository/index", ""))[0].at("reason"), "unloaded");
  EXPECT_EQ(c.get("/v2/health/ready").status, 200U); // unloaded on request

  // It has no folder: load builds it again from its factory.
  const auto loaded = c.post("/v2/repository/models/compiled/load", "");
  ASSERT_EQ(loaded.status, 200U) << loaded.body;
  EXPECT_EQ(c.get("/v2/models/compiled/ready").status, 200U);
  EXPECT_EQ(c.post("/v2/models/compiled/infer", infer_body).status, 200U);
}

} // namespace registered_model_test
