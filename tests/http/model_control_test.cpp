// Model control and restricted APIs (http/model_control.hpp) as Triton has them: the flag
// syntax, the endpoint categories, and over loopback the answers of load and unload in each mode,
// of a restricted API without its header, of loads of things that are not models (readiness and
// the index unchanged, no host path in any message), and unload_dependents.
#include "http_client.hpp"

#include "bundled_backends.hpp"

#include <servekit/http/model_control.hpp>
#include <servekit/http/server.hpp>
#include <servekit/repository/model_repository.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

namespace model_control_test {

namespace fs = std::filesystem;
using json = nlohmann::json;
using servekit::http::endpoint;
using servekit::http::model_control_mode;
using servekit::http::model_control_options;
using servekit::http::restricted_api;
using servekit::http::restricted_apis;
using test_http::reply;

const fs::path bundled_models = fs::path{SERVEKIT_SOURCE_DIR} / "examples" / "models";

// -- flags and categories -------------------------------------------------------------------

TEST(RestrictedApi, ParsesTritonSyntax) {
  restricted_apis r;
  servekit::http::parse_restricted_api("model-repository,model-config:admin-key=s3cret", r);
  servekit::http::parse_restricted_api("statistics:stats-key=a=b", r);
  ASSERT_NE(r.find(restricted_api::model_repository), nullptr);
  EXPECT_EQ(*r.find(restricted_api::model_repository),
            (servekit::http::api_restriction{"admin-key", "s3cret"}));
  EXPECT_EQ(*r.find(restricted_api::model_config),
            (servekit::http::api_restriction{"admin-key", "s3cret"}));
  // The value is everything after the first '=' (as Triton's parser splits it).
  EXPECT_EQ(r.find(restricted_api::statistics)->value, "a=b");
  EXPECT_EQ(r.find(restricted_api::inference), nullptr);
  EXPECT_FALSE(r.empty());
  EXPECT_TRUE(restricted_apis{}.empty());
}

TEST(RestrictedApi, RefusesWhatTritonRefuses) {
  const auto error = [](std::string_view spec) {
    restricted_apis r;
    try {
      servekit::http::parse_restricted_api(spec, r);
    } catch (const std::invalid_argument& e) {
      return std::string{e.what()};
    }
    return std::string{};
  };
  for (const auto* bad : {"model-repository", "model-repository:key", ":k=v", "model-repository:=v",
                          "model-repository:k="}) {
    EXPECT_EQ(error(bad), "--http-restricted-api option format is "
                          "'<config name>:<setting>=<value>'. Got " +
                              std::string{bad});
  }
  EXPECT_EQ(error("repository:k=v"), "unknown restricted api 'repository'");
  EXPECT_EQ(error("health,,metadata:k=v"), "unknown restricted api ''");
  EXPECT_EQ(error("health,health:k=v"),
            "restricted api 'health' can not be specified in multiple config groups");
}

TEST(RestrictedApi, EndpointCategoriesAreTritons) {
  using servekit::http::restricted_api_of;
  EXPECT_EQ(restricted_api_of(endpoint::health_live), restricted_api::health);
  EXPECT_EQ(restricted_api_of(endpoint::health_ready), restricted_api::health);
  EXPECT_EQ(restricted_api_of(endpoint::model_ready), restricted_api::health);
  EXPECT_EQ(restricted_api_of(endpoint::server_metadata), restricted_api::metadata);
  EXPECT_EQ(restricted_api_of(endpoint::model_metadata), restricted_api::metadata);
  EXPECT_EQ(restricted_api_of(endpoint::model_config), restricted_api::model_config);
  EXPECT_EQ(restricted_api_of(endpoint::model_infer), restricted_api::inference);
  EXPECT_EQ(restricted_api_of(endpoint::model_generate), restricted_api::inference);
  EXPECT_EQ(restricted_api_of(endpoint::model_generate_stream), restricted_api::inference);
  EXPECT_EQ(restricted_api_of(endpoint::model_stats), restricted_api::statistics);
  EXPECT_EQ(restricted_api_of(endpoint::all_model_stats), restricted_api::statistics);
  EXPECT_EQ(restricted_api_of(endpoint::repository_index), restricted_api::model_repository);
  EXPECT_EQ(restricted_api_of(endpoint::repository_load), restricted_api::model_repository);
  EXPECT_EQ(restricted_api_of(endpoint::repository_unload), restricted_api::model_repository);
  EXPECT_EQ(restricted_api_of(endpoint::admin_drain), restricted_api::model_repository);
  EXPECT_EQ(restricted_api_of(endpoint::metrics), std::nullopt);
  EXPECT_EQ(restricted_api_of(endpoint::unknown), std::nullopt);
}

TEST(ModelControlFlags, ModesLoadModelsAndPollInterval) {
  model_control_options o;
  EXPECT_EQ(o.mode, model_control_mode::none); // Triton's default
  EXPECT_FALSE(o.load_unload_allowed());
  EXPECT_EQ(servekit::http::parse_model_control_flag("--model-control-mode", "EXPLICIT", o),
            std::nullopt);
  EXPECT_EQ(o.mode, model_control_mode::explicit_);
  EXPECT_TRUE(o.load_unload_allowed());
  EXPECT_EQ(servekit::http::parse_model_control_flag("--model-control-mode", "poll", o),
            std::nullopt);
  EXPECT_FALSE(o.load_unload_allowed());
  EXPECT_NE(servekit::http::parse_model_control_flag("--model-control-mode", "auto", o),
            std::nullopt);
  EXPECT_EQ(servekit::http::parse_model_control_flag("--repository-poll-secs", "3", o),
            std::nullopt);
  EXPECT_EQ(o.poll_interval, std::chrono::seconds{3});
  // 0: no polling after the start, as Triton (its explicit-mode command lines often pass it).
  EXPECT_EQ(servekit::http::parse_model_control_flag("--repository-poll-secs", "0", o),
            std::nullopt);
  EXPECT_EQ(o.poll_interval, std::chrono::seconds{0});
  EXPECT_NE(servekit::http::parse_model_control_flag("--repository-poll-secs", "x", o),
            std::nullopt);
  // --load-model needs explicit mode, and * stands alone (Triton's post-parse checks).
  EXPECT_EQ(servekit::http::parse_model_control_flag("--load-model", "add_sub", o), std::nullopt);
  EXPECT_EQ(servekit::http::check_model_control_flags(o),
            "Use of '--load-model' requires setting '--model-control-mode=explicit' as well.");
  o.mode = model_control_mode::explicit_;
  EXPECT_EQ(servekit::http::check_model_control_flags(o), std::nullopt);
  EXPECT_EQ(servekit::http::parse_model_control_flag("--load-model", "*", o), std::nullopt);
  EXPECT_NE(servekit::http::check_model_control_flags(o), std::nullopt);
}

// -- over loopback ----------------------------------------------------------------------------

/// A copy of some bundled models in a fresh temporary folder, served by a server on a free
/// loopback port (load_all at start, as in modes none and explicit with --load-model=*).
class served_copy {
public:
  served_copy(const std::vector<std::string>& models, servekit::http::server_options options)
      : root_{make_root(models)}, repository_{root_, servekit_server::bundled_backends{}} {
    (void)repository_.load_all();
    options.host = "127.0.0.1";
    options.port = 0;
    options.thread_count = 2;
    server_.emplace(repository_, std::move(options));
    thread_ = std::thread{[this] { server_->run(); }};
  }
  served_copy(const served_copy&) = delete;
  served_copy& operator=(const served_copy&) = delete;
  ~served_copy() {
    server_->stop();
    thread_.join();
    server_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  [[nodiscard]] test_http::client client() const { return {"127.0.0.1", server_->port()}; }
  [[nodiscard]] const fs::path& root() const { return root_; }
  [[nodiscard]] servekit::model_repository& repository() { return repository_; }

private:
  static fs::path make_root(const std::vector<std::string>& models) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    auto root = fs::temp_directory_path() /
                ("servekit_control_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(root);
    fs::create_directories(root);
    for (const auto& m : models) {
      fs::copy(bundled_models / m, root / m, fs::copy_options::recursive);
    }
    return root;
  }

  fs::path root_;
  servekit::model_repository repository_;
  std::optional<servekit::http::server> server_;
  std::thread thread_;
};

servekit::http::server_options with_mode(model_control_mode mode) {
  servekit::http::server_options o;
  o.model_control.mode = mode;
  return o;
}

std::string error_of(const reply& r) {
  const auto j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") && j["error"].is_string()
             ? j["error"].get<std::string>()
             : "<not a KServe error body: " + r.body + ">";
}

TEST(ModelControl, NoneAndPollRefuseLoadAndUnloadWithTritonsAnswer) {
  for (const auto mode : {model_control_mode::none, model_control_mode::poll}) {
    served_copy s{{"add_sub"}, with_mode(mode)};
    auto c = s.client();
    for (const auto* action : {"load", "unload"}) {
      const auto r = c.post(std::string{"/v2/repository/models/add_sub/"} + action, "");
      EXPECT_EQ(r.status, 503U) << to_string(mode) << " " << action;
      EXPECT_EQ(error_of(r), "explicit model load / unload is not allowed if polling is enabled");
    }
    // Nothing changed: the model serves and the server is ready.
    EXPECT_EQ(c.get("/v2/models/add_sub/ready").status, 200U);
    EXPECT_EQ(c.get("/v2/health/ready").status, 200U);
  }
}

TEST(ModelControl, ExplicitAllowsLoadAndUnload) {
  served_copy s{{"add_sub"}, with_mode(model_control_mode::explicit_)};
  auto c = s.client();
  EXPECT_EQ(c.post("/v2/repository/models/add_sub/unload", "").status, 200U);
  EXPECT_EQ(c.get("/v2/models/add_sub/ready").status, 400U);
  EXPECT_EQ(c.post("/v2/repository/models/add_sub/load", "").status, 200U);
  EXPECT_EQ(c.get("/v2/models/add_sub/ready").status, 200U);
}

TEST(ModelControl, RestrictedApiNeedsItsHeader) {
  auto options = with_mode(model_control_mode::explicit_);
  servekit::http::parse_restricted_api("model-repository,model-config:Admin-Key=s3cret",
                                       options.model_control.restricted);
  served_copy s{{"add_sub"}, std::move(options)};
  auto c = s.client();
  for (const auto& [target, get] :
       std::vector<std::pair<std::string, bool>>{{"/v2/repository/index", false},
                                                 {"/v2/repository/models/add_sub/unload", false},
                                                 {"/v2/repository/models/add_sub/load", false},
                                                 {"/v2/models/add_sub/config", true}}) {
    const auto r = get ? c.get(target) : c.post(target, "");
    EXPECT_EQ(r.status, 403U) << target;
    EXPECT_EQ(error_of(r), "This API is restricted, expecting header 'Admin-Key'") << target;
    // A wrong value is no better than none.
    const auto wrong = c.post(target, "", {{"admin-key", "guess"}});
    EXPECT_EQ(wrong.status, 403U) << target;
  }
  // The restriction is checked before the method, as Triton does.
  EXPECT_EQ(c.get("/v2/repository/index").status, 403U);
  // Nothing was unloaded by the refused requests.
  EXPECT_EQ(c.get("/v2/models/add_sub/ready").status, 200U);
  // Header names compare case-insensitively; values exactly.
  EXPECT_EQ(c.post("/v2/repository/index", "", {{"admin-key", "s3cret"}}).status, 200U);
  EXPECT_EQ(c.post("/v2/repository/models/add_sub/unload", "", {{"ADMIN-KEY", "s3cret"}}).status,
            200U);
  EXPECT_EQ(c.post("/v2/repository/models/add_sub/load", "", {{"admin-key", "s3cret"}}).status,
            200U);
  // APIs not restricted need nothing.
  EXPECT_EQ(c.get("/v2/health/ready").status, 200U);
  EXPECT_EQ(c.get("/v2/models/add_sub").status, 200U);
}

TEST(ModelControl, LoadingWhatIsNotAModelChangesNothing) {
  served_copy s{{"add_sub"}, with_mode(model_control_mode::explicit_)};
  fs::create_directories(s.root() / ".cache");
  auto c = s.client();
  const auto index_before = c.post("/v2/repository/index", "").body;
  ASSERT_EQ(c.get("/v2/health/ready").status, 200U);

  const auto hidden = c.post("/v2/repository/models/.cache/load", "");
  EXPECT_EQ(hidden.status, 404U);
  EXPECT_EQ(error_of(hidden),
            "failed to load '.cache', failed to poll from model repository: a hidden folder "
            "is not a model");
  const auto missing = c.post("/v2/repository/models/no_such_model/load", "");
  EXPECT_EQ(missing.status, 404U);
  EXPECT_EQ(error_of(missing),
            "failed to load 'no_such_model', failed to poll from model repository: the model "
            "repository has no folder 'no_such_model'");
  for (const auto* target :
       {"/v2/repository/models/a%2Fb/load", "/v2/repository/models/%2E%2E/load",
        "/v2/repository/models/..%5Cadd_sub/load"}) {
    const auto r = c.post(target, "");
    EXPECT_EQ(r.status, 400U) << target;
    EXPECT_NE(error_of(r).find("must not contain path traversal characters"), std::string::npos)
        << target << ": " << error_of(r);
  }
  for (const auto& r : {hidden, missing}) {
    EXPECT_EQ(error_of(r).find(s.root().string()), std::string::npos) << error_of(r);
  }
  EXPECT_EQ(c.get("/v2/health/ready").status, 200U);
  EXPECT_EQ(c.post("/v2/repository/index", "").body, index_before);
}

TEST(ModelControl, ErrorsNameTheModelNotTheHostPath) {
  served_copy s{{"add_sub"}, with_mode(model_control_mode::explicit_)};
  auto c = s.client();
  fs::create_directories(s.root() / "broken");
  std::ofstream{s.root() / "broken" / "config.json"} << "{ not json";
  const auto r = c.post("/v2/repository/models/broken/load", "");
  EXPECT_EQ(r.status, 400U);
  EXPECT_EQ(error_of(r).rfind("broken/config.json: model config is not valid JSON", 0), 0U)
      << error_of(r);
  const auto index = c.post("/v2/repository/index", "").body;
  const auto infer = c.post("/v2/models/broken/infer", "{}");
  EXPECT_EQ(infer.status, 503U);
  for (const auto& text : {error_of(r), index, error_of(infer)}) {
    EXPECT_EQ(text.find(s.root().string()), std::string::npos) << text;
  }
}

TEST(ModelControl, UnloadDependentsAsTriton) {
  served_copy s{{"add_sub", "identity_delay", "pipeline"},
                with_mode(model_control_mode::explicit_)};
  auto c = s.client();
  ASSERT_EQ(c.get("/v2/models/pipeline/ready").status, 200U);
  // tritonclient's unload body: the ensemble goes unavailable and comes back with its model.
  ASSERT_EQ(c.post("/v2/repository/models/add_sub/unload",
                   R"({"parameters": {"unload_dependents": false}})")
                .status,
            200U);
  EXPECT_EQ(c.get("/v2/models/pipeline/ready").status, 400U);
  ASSERT_EQ(c.post("/v2/repository/models/add_sub/load", "").status, 200U);
  EXPECT_EQ(c.get("/v2/models/pipeline/ready").status, 200U);
  // With unload_dependents the ensemble is unloaded too: loading the model does not bring it
  // back, and an unloaded model keeps the server ready.
  ASSERT_EQ(c.post("/v2/repository/models/add_sub/unload",
                   R"({"parameters": {"unload_dependents": true}})")
                .status,
            200U);
  ASSERT_EQ(c.post("/v2/repository/models/add_sub/load", "").status, 200U);
  EXPECT_EQ(c.get("/v2/models/pipeline/ready").status, 400U);
  const auto row = s.repository().status_of("pipeline");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->reason, "unloaded");
  EXPECT_EQ(c.get("/v2/health/ready").status, 200U);
  ASSERT_EQ(c.post("/v2/repository/models/pipeline/load", "").status, 200U);
  EXPECT_EQ(c.get("/v2/models/pipeline/ready").status, 200U);
}

TEST(ModelControl, RepositoryBodiesAreBoundedAndChecked) {
  served_copy s{{"add_sub"}, with_mode(model_control_mode::explicit_)};
  auto c = s.client();
  const auto bad_dependents = c.post("/v2/repository/models/add_sub/unload",
                                     R"({"parameters": {"unload_dependents": "yes"}})");
  EXPECT_EQ(bad_dependents.status, 400U);
  EXPECT_EQ(error_of(bad_dependents),
            "Unable to parse 'unload_dependents': attempt to access JSON non-boolean as boolean");
  const auto config =
      c.post("/v2/repository/models/add_sub/load", R"({"parameters": {"config": "{}"}})");
  EXPECT_EQ(config.status, 400U);
  EXPECT_NE(error_of(config).find("'config'"), std::string::npos) << error_of(config);
  const auto other =
      c.post("/v2/repository/models/add_sub/unload", R"({"parameters": {"force": true}})");
  EXPECT_EQ(other.status, 400U);
  EXPECT_NE(error_of(other).find("'force'"), std::string::npos) << error_of(other);
  EXPECT_EQ(c.post("/v2/repository/models/add_sub/load", R"({"parameters": 3})").status, 400U);
  EXPECT_EQ(c.post("/v2/repository/models/add_sub/load", "[1]").status, 400U);
  const std::string big = R"({"parameters": {}, "pad": ")" + std::string(70 << 10, 'x') + "\"}";
  EXPECT_EQ(c.post("/v2/repository/models/add_sub/load", big).status, 413U);
  EXPECT_EQ(c.post("/v2/repository/index", big).status, 413U);
  // None of it unloaded the model.
  EXPECT_EQ(c.get("/v2/models/add_sub/ready").status, 200U);
}

} // namespace model_control_test
