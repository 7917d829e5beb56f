// End to end: servekit::http::server in-process on a free loopback port, over a model repository
// of the example server's bundled backends (examples/models, or a temporary copy when a test
// needs other configs), driven by a real HTTP/1.1 client (tests/http/http_client.hpp). Covers
// every endpoint, the bundled models' values, batching seen through statistics, sequences, the
// pipeline ensemble, each error status, malformed bodies, reloads under load and stop() with
// requests in flight. Threads are coordinated with latches and the scheduler's hold hook
// (test_hooks::delay_scheduler), never with sleeps; where the server's state must be awaited,
// it is polled with a deadline.
#include "http_client.hpp"

#include "bundled_backends.hpp"

#include <servekit/http/server.hpp>
#include <servekit/repository/model_repository.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <latch>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <unistd.h>

namespace server_e2e_test {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test_http::reply;

/// The bundled models these tests serve, the bundled backends' ones: a copy of examples/models
/// without its TorchScript and ONNX models (this server has no LibTorch; those models are served
/// by tests/libtorch/bundled_models_test.cpp, tests/libtorch/causal_lm_test.cpp and
/// example.server.real_models), made once per
/// process.
class bundled_backends_models {
public:
  bundled_backends_models() {
    path_ = fs::temp_directory_path() / ("servekit_e2e_bundled_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
    const fs::path examples = fs::path{SERVEKIT_SOURCE_DIR} / "examples" / "models";
    for (const auto& entry : fs::directory_iterator{examples}) {
      const auto name = entry.path().filename().string();
      if (entry.is_directory() && !real_models.contains(name)) {
        fs::copy(entry.path(), path_ / name, fs::copy_options::recursive);
      }
    }
  }
  bundled_backends_models(const bundled_backends_models&) = delete;
  bundled_backends_models& operator=(const bundled_backends_models&) = delete;
  ~bundled_backends_models() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  operator const fs::path&() const noexcept { return path_; } // NOLINT: used as the folder
  [[nodiscard]] fs::path operator/(const std::string& model) const { return path_ / model; }

private:
  inline static const std::set<std::string> real_models = {
      "gru_sequence",   "image_classifier", "image_classifier_onnx",
      "image_ensemble", "image_preprocess", "tiny_lm"};
  fs::path path_;
};
const bundled_backends_models bundled_models;

// -- fixtures ----------------------------------------------------------------------------------

/// A model repository in a fresh temporary folder, removed with it.
class temp_repository {
public:
  temp_repository() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("servekit_e2e_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  temp_repository(const temp_repository&) = delete;
  temp_repository& operator=(const temp_repository&) = delete;
  ~temp_repository() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }

  /// Copies a model folder of examples/models.
  void copy_bundled(const std::string& model) const {
    fs::copy(bundled_models / model, path_ / model, fs::copy_options::recursive);
  }
  /// Writes `<model>/config.json`.
  void write(const std::string& model, std::string_view config) const {
    fs::create_directories(path_ / model);
    std::ofstream out{path_ / model / "config.json", std::ios::trunc};
    out << config;
  }
  [[nodiscard]] const fs::path& path() const noexcept { return path_; }

private:
  fs::path path_;
};

/// A model repository and the server over it, serving on a background thread.
class running_server {
public:
  explicit running_server(const fs::path& root, servekit::http::server_options options = {},
                          servekit::test_hooks hooks = {})
      : repository_{root, servekit_server::bundled_backends{}, hooks} {
    index_ = repository_.load_all();
    // These tests drive load and unload: Triton's explicit model control mode, with every model
    // loaded at start (--load-model=*). tests/http/model_control_test.cpp covers the others.
    options.model_control.mode = servekit::http::model_control_mode::explicit_;
    options.host = "127.0.0.1";
    options.port = 0;
    if (options.thread_count == 0) {
      options.thread_count = 2;
    }
    server_.emplace(repository_, std::move(options));
    thread_ = std::thread{[this] { server_->run(); }};
  }
  running_server(const running_server&) = delete;
  running_server& operator=(const running_server&) = delete;
  ~running_server() { stop(); }

  /// stop(), then waits for run() to return.
  void stop() {
    if (thread_.joinable()) {
      server_->stop();
      thread_.join();
    }
  }
  [[nodiscard]] std::uint16_t port() const { return server_->port(); }
  [[nodiscard]] servekit::http::server& server() { return *server_; }
  [[nodiscard]] servekit::model_repository& repository() { return repository_; }
  [[nodiscard]] const std::vector<servekit::model_index_entry>& load_index() const {
    return index_;
  }
  [[nodiscard]] std::unique_ptr<test_http::client> client() const {
    return std::make_unique<test_http::client>("127.0.0.1", server_->port());
  }
  /// A model's statistics, straight from the model (not over HTTP).
  [[nodiscard]] servekit::statistics_snapshot statistics(std::string_view model) const {
    const auto m = repository_.find(model);
    return m ? m->model().statistics() : servekit::statistics_snapshot{};
  }

private:
  servekit::model_repository repository_;
  std::vector<servekit::model_index_entry> index_;
  std::optional<servekit::http::server> server_;
  std::thread thread_;
};

/// Polls `done` until it holds or 30 s pass (for server-side state no event announces).
bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

// -- requests ----------------------------------------------------------------------------------

json parse(const reply& r) {
  auto j = json::parse(r.body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.body << r.error;
  return j;
}

std::vector<float> iota(float first, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = first + static_cast<float>(i);
  }
  return v;
}

json fp32_input(const std::string& name, const std::vector<float>& data, std::int64_t rows = 1) {
  const auto cols = static_cast<std::int64_t>(data.size()) / rows;
  return json{{"name", name}, {"datatype", "FP32"}, {"shape", {rows, cols}}, {"data", data}};
}

json add_sub_request(const std::vector<float>& a, const std::vector<float>& b) {
  return json{{"inputs", {fp32_input("INPUT0", a), fp32_input("INPUT1", b)}}};
}

/// The outputs of an infer response by name.
std::map<std::string, json> outputs_of(const json& response) {
  std::map<std::string, json> out;
  for (const auto& o : response.at("outputs")) {
    out[o.at("name").get<std::string>()] = o;
  }
  return out;
}

std::vector<float> floats_of(const json& output) {
  return output.at("data").get<std::vector<float>>();
}

std::vector<float> add(const std::vector<float>& a, const std::vector<float>& b, float sign) {
  std::vector<float> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    out[i] = a[i] + sign * b[i];
  }
  return out;
}

/// EXPECTs an error reply: `status` and a KServe {"error": "..."} body containing `fragment`.
void expect_error(const reply& r, unsigned status, std::string_view fragment = {}) {
  EXPECT_EQ(r.status, status) << r.body << r.error;
  const auto j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error") && j["error"].is_string())
      << "not a KServe error body: " << r.body;
  EXPECT_NE(j["error"].get<std::string>().find(fragment), std::string::npos)
      << "'" << fragment << "' not in: " << j["error"];
}

/// A model folder's config for the identity backend (INPUT0 -> OUTPUT0) with extra fields.
std::string identity_config(const std::string& name, const std::string& type,
                            const std::string& extra, int max_batch_size = 8) {
  return R"({"name": ")" + name + R"(", "backend": "identity", "max_batch_size": )" +
         std::to_string(max_batch_size) + R"(,
    "input": [{"name": "INPUT0", "data_type": ")" +
         type + R"(", "dims": [-1]}],
    "output": [{"name": "OUTPUT0", "data_type": ")" +
         type + R"(", "dims": [-1]}])" + extra + "}";
}

// -- health and metadata -----------------------------------------------------------------------

/// The bundled models as the repository lists them (one row per served version).
const std::vector<std::string> bundled_rows = {
    "accumulate",     "accumulate_oldest", "add_sub",        "add_sub_versions", "add_sub_versions",
    "gpu_accumulate", "gpu_mlp",           "identity_delay", "pipeline",         "repeat_int32"};

TEST(ServerE2E, BundledRepositoryLoadsReady) {
  running_server s{bundled_models};
  std::vector<std::string> names;
  for (const auto& e : s.load_index()) {
    names.push_back(e.name);
    EXPECT_EQ(e.state, servekit::model_ready_state::ready) << e.name << ": " << e.reason;
    if (e.name != "add_sub_versions") { // versions 1 and 2 (version_policy all)
      EXPECT_EQ(e.version, 1) << e.name;
    }
  }
  EXPECT_EQ(names, bundled_rows);
}

TEST(ServerE2E, HealthLiveAndReady) {
  running_server s{bundled_models};
  auto c = s.client();
  const auto live = c->get("/v2/health/live");
  EXPECT_EQ(live.status, 200U) << live.body << live.error;
  const auto ready = c->get("/v2/health/ready");
  EXPECT_EQ(ready.status, 200U) << ready.body;
  EXPECT_EQ(c->connections_opened(), 1) << "keep-alive: one connection for both";
}

TEST(ServerE2E, ServerMetadataListsExtensions) {
  running_server s{bundled_models};
  auto c = s.client();
  const auto r = c->get("/v2");
  ASSERT_EQ(r.status, 200U) << r.body;
  EXPECT_NE(r.header("content-type").find("application/json"), std::string::npos);
  const auto j = parse(r);
  EXPECT_EQ(j.at("name"), "servekit");
  EXPECT_TRUE(j.at("version").is_string());
  const auto extensions = j.at("extensions").get<std::vector<std::string>>();
  for (const char* e : {"statistics", "model_repository", "binary_tensor_data"}) {
    EXPECT_NE(std::find(extensions.begin(), extensions.end(), e), extensions.end()) << e;
  }
}

TEST(ServerE2E, ModelMetadataHasTheBatchDimension) {
  running_server s{bundled_models};
  auto c = s.client();
  for (const char* target : {"/v2/models/add_sub", "/v2/models/add_sub/versions/1"}) {
    const auto r = c->get(target);
    ASSERT_EQ(r.status, 200U) << target << ": " << r.body;
    const auto j = parse(r);
    EXPECT_EQ(j.at("name"), "add_sub");
    EXPECT_EQ(j.at("versions"), json::array({"1"}));
    EXPECT_EQ(j.at("platform"), "add_sub");
    ASSERT_EQ(j.at("inputs").size(), 2U);
    EXPECT_EQ(j["inputs"][0],
              (json{{"name", "INPUT0"}, {"datatype", "FP32"}, {"shape", {-1, 16}}}));
    EXPECT_EQ(j["inputs"][1].at("name"), "INPUT1");
    ASSERT_EQ(j.at("outputs").size(), 2U);
    EXPECT_EQ(j["outputs"][1],
              (json{{"name", "OUTPUT1"}, {"datatype", "FP32"}, {"shape", {-1, 16}}}));
  }
  const auto pipeline = parse(c->get("/v2/models/pipeline"));
  EXPECT_EQ(pipeline.at("platform"), "ensemble");
  EXPECT_EQ(pipeline.at("outputs")[0].at("name"), "OUTPUT");
  const auto identity = parse(c->get("/v2/models/identity_delay"));
  EXPECT_EQ(identity.at("inputs")[0].at("shape"), json::array({-1, -1}));
}

// A config that leaves the tensors and max_batch_size to the backend's declarations: metadata and
// /config describe the model as it resolved them (Triton's auto-complete), not the file's empty
// lists (perf_analyzer and Triton's clients read the inputs from the metadata).
TEST(ServerE2E, MetadataAndConfigShowWhatTheBackendDeclares) {
  temp_repository repo;
  repo.write("auto_add_sub", R"({"name": "auto_add_sub", "backend": "add_sub"})");
  running_server s{repo.path()};
  auto c = s.client();
  const auto metadata = c->get("/v2/models/auto_add_sub");
  ASSERT_EQ(metadata.status, 200U) << metadata.body;
  const auto m = parse(metadata);
  ASSERT_EQ(m.at("inputs").size(), 2U) << m.dump();
  EXPECT_EQ(m["inputs"][0], (json{{"name", "INPUT0"}, {"datatype", "FP32"}, {"shape", {-1}}}));
  EXPECT_EQ(m["inputs"][1].at("name"), "INPUT1");
  ASSERT_EQ(m.at("outputs").size(), 2U) << m.dump();
  EXPECT_EQ(m["outputs"][1], (json{{"name", "OUTPUT1"}, {"datatype", "FP32"}, {"shape", {-1}}}));
  const auto config = c->get("/v2/models/auto_add_sub/config");
  ASSERT_EQ(config.status, 200U) << config.body;
  const auto j = parse(config);
  EXPECT_EQ(j.at("max_batch_size"), 0) << j.dump();
  ASSERT_EQ(j.at("input").size(), 2U) << j.dump();
  EXPECT_EQ(j["input"][0].at("name"), "INPUT0");
  EXPECT_EQ(j["input"][0].at("data_type"), "TYPE_FP32");
  EXPECT_EQ(j["input"][0].at("dims"), json::array({-1}));
  ASSERT_EQ(j.at("output").size(), 2U) << j.dump();
  EXPECT_EQ(j["output"][0].at("name"), "OUTPUT0");
  ASSERT_EQ(j.at("instance_group").size(), 1U) << j.dump(); // as placed
  EXPECT_EQ(j["instance_group"][0].at("kind"), "KIND_CPU");
}

TEST(ServerE2E, ModelReadyAndConfig) {
  running_server s{bundled_models};
  auto c = s.client();
  EXPECT_EQ(c->get("/v2/models/add_sub/ready").status, 200U);
  EXPECT_EQ(c->get("/v2/models/add_sub/versions/1/ready").status, 200U);
  const auto r = c->get("/v2/models/add_sub/config");
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto j = parse(r);
  EXPECT_EQ(j.at("name"), "add_sub");
  EXPECT_EQ(j.at("backend"), "add_sub");
  EXPECT_EQ(j.at("max_batch_size"), 8);
  EXPECT_TRUE(j.contains("dynamic_batching"));
  EXPECT_EQ(j.at("input")[0].at("data_type"), "TYPE_FP32");
  EXPECT_EQ(j.at("input")[0].at("dims"), json::array({16}));
  const auto accumulate = parse(c->get("/v2/models/accumulate/config"));
  EXPECT_EQ(accumulate.at("sequence_batching").at("state")[0].at("input_name"), "INPUT_STATE");
  EXPECT_FALSE(accumulate.at("sequence_batching").contains("oldest")); // direct, the default
  const auto oldest = parse(c->get("/v2/models/accumulate_oldest/config"));
  EXPECT_EQ(oldest.at("sequence_batching").at("oldest").at("max_candidate_sequences"), 16);
  const auto identity = parse(c->get("/v2/models/identity_delay/config"));
  EXPECT_EQ(identity.at("parameters").at("execute_delay_ms").at("string_value"), "100");
}

// -- inference ---------------------------------------------------------------------------------

TEST(ServerE2E, AddSubInfersSumAndDifference) {
  running_server s{bundled_models};
  auto c = s.client();
  const auto a = iota(1, 16);
  const std::vector<float> b(16, 0.5F);
  for (const char* target : {"/v2/models/add_sub/infer", "/v2/models/add_sub/versions/1/infer"}) {
    const auto r = c->post(target, add_sub_request(a, b).dump());
    ASSERT_EQ(r.status, 200U) << target << ": " << r.body;
    const auto j = parse(r);
    EXPECT_EQ(j.at("model_name"), "add_sub");
    EXPECT_EQ(j.at("model_version"), "1");
    EXPECT_FALSE(j.contains("id"));
    auto outputs = outputs_of(j);
    ASSERT_EQ(outputs.size(), 2U);
    EXPECT_EQ(outputs["OUTPUT0"].at("datatype"), "FP32");
    EXPECT_EQ(outputs["OUTPUT0"].at("shape"), json::array({1, 16}));
    EXPECT_EQ(floats_of(outputs["OUTPUT0"]), add(a, b, 1));
    EXPECT_EQ(floats_of(outputs["OUTPUT1"]), add(a, b, -1));
  }
}

TEST(ServerE2E, OutputsSelectionAndRequestId) {
  running_server s{bundled_models};
  auto c = s.client();
  auto body = add_sub_request(iota(0, 16), iota(0, 16));
  body["id"] = "request-42";
  body["outputs"] = json::array({json{{"name", "OUTPUT1"}}});
  const auto r = c->post("/v2/models/add_sub/infer", body.dump());
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto j = parse(r);
  EXPECT_EQ(j.at("id"), "request-42");
  ASSERT_EQ(j.at("outputs").size(), 1U);
  EXPECT_EQ(j["outputs"][0].at("name"), "OUTPUT1");
  EXPECT_EQ(floats_of(j["outputs"][0]), std::vector<float>(16, 0.0F));
}

TEST(ServerE2E, NestedDataWithABatchOfTwo) {
  running_server s{bundled_models};
  auto c = s.client();
  json nested0 = json::array({iota(0, 16), iota(100, 16)});
  json nested1 = json::array({std::vector<float>(16, 1.0F), std::vector<float>(16, 2.0F)});
  const json body{
      {"inputs",
       {json{{"name", "INPUT0"}, {"datatype", "FP32"}, {"shape", {2, 16}}, {"data", nested0}},
        json{{"name", "INPUT1"}, {"datatype", "FP32"}, {"shape", {2, 16}}, {"data", nested1}}}}};
  const auto r = c->post("/v2/models/add_sub/infer", body.dump());
  ASSERT_EQ(r.status, 200U) << r.body;
  auto outputs = outputs_of(parse(r));
  EXPECT_EQ(outputs["OUTPUT0"].at("shape"), json::array({2, 16}));
  auto expected = add(iota(0, 16), std::vector<float>(16, 1.0F), 1);
  const auto second = add(iota(100, 16), std::vector<float>(16, 2.0F), 1);
  expected.insert(expected.end(), second.begin(), second.end());
  EXPECT_EQ(floats_of(outputs["OUTPUT0"]), expected);
}

TEST(ServerE2E, BytesThroughIdentity) {
  temp_repository repo;
  repo.write("identity_bytes", identity_config("identity_bytes", "TYPE_STRING", ""));
  running_server s{repo.path()};
  auto c = s.client();
  const json body{{"inputs",
                   {json{{"name", "INPUT0"},
                         {"datatype", "BYTES"},
                         {"shape", {1, 3}},
                         {"data", {"hello", "", "w\u00f6rld \"quoted\""}}}}}};
  const auto r = c->post("/v2/models/identity_bytes/infer", body.dump());
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto out = parse(r).at("outputs")[0];
  EXPECT_EQ(out.at("name"), "OUTPUT0");
  EXPECT_EQ(out.at("datatype"), "BYTES");
  EXPECT_EQ(out.at("shape"), json::array({1, 3}));
  EXPECT_EQ(out.at("data"), json::array({"hello", "", "w\u00f6rld \"quoted\""}));
}

TEST(ServerE2E, BinaryTensorDataExtension) {
  running_server s{bundled_models};
  auto c = s.client();
  const auto a = iota(0, 16);
  const std::vector<float> b(16, 3.0F);
  const json header{{"inputs",
                     {json{{"name", "INPUT0"},
                           {"datatype", "FP32"},
                           {"shape", {1, 16}},
                           {"parameters", {{"binary_data_size", 64}}}},
                      json{{"name", "INPUT1"},
                           {"datatype", "FP32"},
                           {"shape", {1, 16}},
                           {"parameters", {{"binary_data_size", 64}}}}}},
                    {"outputs",
                     {json{{"name", "OUTPUT0"}, {"parameters", {{"binary_data", true}}}},
                      json{{"name", "OUTPUT1"}, {"parameters", {{"binary_data", false}}}}}}};
  std::string body = header.dump();
  const std::size_t header_length = body.size();
  body.append(reinterpret_cast<const char*>(a.data()), 64);
  body.append(reinterpret_cast<const char*>(b.data()), 64);
  const auto r = c->post("/v2/models/add_sub/infer", body,
                         {{"Inference-Header-Content-Length", std::to_string(header_length)},
                          {"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto length_text = r.header("inference-header-content-length");
  ASSERT_FALSE(length_text.empty()) << "binary output without Inference-Header-Content-Length";
  const auto json_length = std::stoul(length_text);
  ASSERT_LE(json_length, r.body.size());
  const auto j = json::parse(r.body.substr(0, json_length));
  auto outputs = outputs_of(j);
  ASSERT_EQ(outputs.size(), 2U);
  EXPECT_EQ(outputs["OUTPUT0"].at("parameters").at("binary_data_size"), 64);
  EXPECT_FALSE(outputs["OUTPUT0"].contains("data"));
  EXPECT_EQ(floats_of(outputs["OUTPUT1"]), add(a, b, -1));
  ASSERT_EQ(r.body.size(), json_length + 64);
  std::vector<float> sum(16);
  std::memcpy(sum.data(), r.body.data() + json_length, 64);
  EXPECT_EQ(sum, add(a, b, 1));
}

/// Sends `n` identity_delay requests at once, each on its own connection; returns their replies.
std::vector<reply> concurrent_identity(const running_server& s, const std::string& model, int n) {
  std::vector<reply> replies(static_cast<std::size_t>(n));
  std::latch go{n};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      auto c = s.client();
      const json body{{"inputs", {fp32_input("INPUT0", iota(static_cast<float>(10 * i), 4))}}};
      const std::string text = body.dump();
      go.arrive_and_wait(); // every client is connected and ready before the first one sends
      replies[static_cast<std::size_t>(i)] = c->post("/v2/models/" + model + "/infer", text);
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (int i = 0; i < n; ++i) {
    const auto& r = replies[static_cast<std::size_t>(i)];
    EXPECT_EQ(r.status, 200U) << r.body << r.error;
    if (r.status == 200) {
      EXPECT_EQ(floats_of(parse(r).at("outputs")[0]), iota(static_cast<float>(10 * i), 4));
    }
  }
  return replies;
}

TEST(ServerE2E, BatchingObservedThroughStatistics) {
  // identity_delay waits up to 100 ms for a preferred batch of 4 or 8 and executes for 100 ms:
  // eight requests sent together share executions.
  running_server s{bundled_models};
  concurrent_identity(s, "identity_delay", 8);
  auto c = s.client();
  const auto r = c->get("/v2/models/identity_delay/stats");
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto stats = parse(r).at("model_stats")[0];
  EXPECT_EQ(stats.at("inference_count"), 8);
  EXPECT_LT(stats.at("execution_count").get<int>(), 8);
  EXPECT_EQ(stats.at("inference_stats").at("success").at("count"), 8);
}

TEST(ServerE2E, DelaySchedulerHookFormsOneBatchOfEight) {
  // Triton's TRITONSERVER_DELAY_SCHEDULER: the batcher holds until 8 requests are queued, so the
  // outcome does not depend on when the requests arrive.
  servekit::test_hooks hooks;
  hooks.delay_scheduler = 8;
  running_server s{bundled_models, {}, hooks};
  concurrent_identity(s, "identity_delay", 8);
  auto c = s.client();
  const auto stats = parse(c->get("/v2/models/identity_delay/stats")).at("model_stats")[0];
  EXPECT_EQ(stats.at("inference_count"), 8);
  EXPECT_EQ(stats.at("execution_count"), 1);
  ASSERT_EQ(stats.at("batch_stats").size(), 1U);
  EXPECT_EQ(stats["batch_stats"][0].at("batch_size"), 8);
}

/// One accumulate request: the OUTPUT value, or -1 after an EXPECT failure.
int accumulate(test_http::client& c, const std::string& model, const json& sequence_id, int value,
               bool start, bool end) {
  json parameters{{"sequence_id", sequence_id}};
  if (start) {
    parameters["sequence_start"] = true;
  }
  if (end) {
    parameters["sequence_end"] = true;
  }
  const json body{
      {"parameters", parameters},
      {"inputs",
       {json{{"name", "INPUT"}, {"datatype", "INT32"}, {"shape", {1, 1}}, {"data", {value}}}}}};
  const auto r = c.post("/v2/models/" + model + "/infer", body.dump());
  EXPECT_EQ(r.status, 200U) << r.body;
  if (r.status != 200) {
    return -1;
  }
  const auto j = parse(r);
  EXPECT_EQ(j.at("outputs").size(), 1U) << "OUTPUT_STATE must not reach clients: " << r.body;
  EXPECT_EQ(j.at("outputs")[0].at("name"), "OUTPUT");
  return j.at("outputs")[0].at("data")[0].get<int>();
}

TEST(ServerE2E, AccumulateSumsInterleavedSequences) {
  running_server s{bundled_models};
  auto c = s.client();
  const json numeric = 1001;
  const json text = "session-b";
  EXPECT_EQ(accumulate(*c, "accumulate", numeric, 1, true, false), 1);
  EXPECT_EQ(accumulate(*c, "accumulate", text, 100, true, false), 100);
  EXPECT_EQ(accumulate(*c, "accumulate", numeric, 2, false, false), 3);
  EXPECT_EQ(accumulate(*c, "accumulate", text, 200, false, false), 300);
  EXPECT_EQ(accumulate(*c, "accumulate", numeric, 3, false, true), 6);
  EXPECT_EQ(accumulate(*c, "accumulate", text, -50, false, true), 250);
  // Ended: a new START under the same id begins again.
  EXPECT_EQ(accumulate(*c, "accumulate", numeric, 7, true, true), 7);
}

// Triton's implicit state: listing the output state in `output` lets a client request it (for
// debugging); the model still keeps it as its state. The bundled config does not list it, so
// there clients never see it (AccumulateSumsInterleavedSequences).
TEST(ServerE2E, OutputStateListedAsAnOutputIsReturnedOnRequest) {
  temp_repository repo;
  repo.copy_bundled("accumulate");
  {
    std::ifstream in{repo.path() / "accumulate" / "config.json"};
    json config = json::parse(in);
    config["output"].push_back(
        json{{"name", "OUTPUT_STATE"}, {"data_type", "TYPE_INT32"}, {"dims", {1}}});
    repo.write("accumulate", config.dump(2));
  }
  running_server s{repo.path()};
  ASSERT_TRUE(s.repository().find("accumulate")) << "the config listing OUTPUT_STATE must load";
  auto c = s.client();
  const auto send = [&](int value, bool start, const json& outputs) {
    json parameters{{"sequence_id", 42}};
    if (start) {
      parameters["sequence_start"] = true;
    }
    json body{
        {"parameters", parameters},
        {"inputs",
         {json{{"name", "INPUT"}, {"datatype", "INT32"}, {"shape", {1, 1}}, {"data", {value}}}}}};
    if (!outputs.is_null()) {
      body["outputs"] = outputs;
    }
    const auto r = c->post("/v2/models/accumulate/infer", body.dump());
    EXPECT_EQ(r.status, 200U) << r.body;
    return parse(r);
  };
  // Asked for: OUTPUT_STATE comes back with the running sum, beside OUTPUT.
  const auto first =
      send(5, true, json::array({json{{"name", "OUTPUT"}}, json{{"name", "OUTPUT_STATE"}}}));
  ASSERT_EQ(first.at("outputs").size(), 2U) << first.dump();
  EXPECT_EQ(first["outputs"][1].at("name"), "OUTPUT_STATE");
  EXPECT_EQ(first["outputs"][1].at("data")[0], 5);
  // None named: every output of the config, the state included, as Triton returns them.
  const auto second = send(7, false, json{});
  ASSERT_EQ(second.at("outputs").size(), 2U) << second.dump();
  EXPECT_EQ(second["outputs"][0].at("data")[0], 12);
  EXPECT_EQ(second["outputs"][1].at("data")[0], 12);
  const auto third = send(1, false, json::array({json{{"name", "OUTPUT_STATE"}}}));
  ASSERT_EQ(third.at("outputs").size(), 1U) << third.dump();
  EXPECT_EQ(third["outputs"][0].at("name"), "OUTPUT_STATE");
  EXPECT_EQ(third["outputs"][0].at("data")[0], 13);
  // The metadata lists it, as Triton's does for an output in the config.
  const auto metadata = parse(c->get("/v2/models/accumulate"));
  ASSERT_EQ(metadata.at("outputs").size(), 2U) << metadata.dump();
  EXPECT_EQ(metadata["outputs"][1].at("name"), "OUTPUT_STATE");
}

TEST(ServerE2E, AccumulateSequencesFromConcurrentClients) {
  running_server s{bundled_models};
  constexpr int clients = 4;
  std::latch go{clients};
  std::vector<std::thread> threads;
  std::vector<int> finals(clients, 0);
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      auto c = s.client();
      go.arrive_and_wait();
      const json id = 5000 + i;
      int sum = 0;
      for (int k = 1; k <= 10; ++k) {
        sum = accumulate(*c, "accumulate", id, k * (i + 1), k == 1, k == 10);
      }
      finals[static_cast<std::size_t>(i)] = sum;
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (int i = 0; i < clients; ++i) {
    EXPECT_EQ(finals[static_cast<std::size_t>(i)], 55 * (i + 1)) << "client " << i;
  }
}

TEST(ServerE2E, AccumulateOldestSumsInterleavedSequences) {
  running_server s{bundled_models};
  auto c = s.client();
  EXPECT_EQ(accumulate(*c, "accumulate_oldest", 11, 5, true, false), 5);
  EXPECT_EQ(accumulate(*c, "accumulate_oldest", 12, 50, true, false), 50);
  EXPECT_EQ(accumulate(*c, "accumulate_oldest", 11, 5, false, false), 10);
  EXPECT_EQ(accumulate(*c, "accumulate_oldest", 12, 50, false, true), 100);
  EXPECT_EQ(accumulate(*c, "accumulate_oldest", 11, 5, false, true), 15);
  // Its CORRID control is TYPE_UINT64: a string id is refused, naming it.
  const json body{
      {"parameters", {{"sequence_id", "text-id"}, {"sequence_start", true}}},
      {"inputs",
       {json{{"name", "INPUT"}, {"datatype", "INT32"}, {"shape", {1, 1}}, {"data", {1}}}}}};
  expect_error(c->post("/v2/models/accumulate_oldest/infer", body.dump()), 400, "text-id");
}

TEST(ServerE2E, SequenceErrors) {
  running_server s{bundled_models};
  auto c = s.client();
  const auto one = [](const json& parameters) {
    return json{
        {"parameters", parameters},
        {"inputs",
         {json{{"name", "INPUT"}, {"datatype", "INT32"}, {"shape", {1, 1}}, {"data", {1}}}}}}
        .dump();
  };
  // No sequence id, and a sequence that never started.
  expect_error(c->post("/v2/models/accumulate/infer", one(json::object())), 400, "correlation");
  expect_error(c->post("/v2/models/accumulate/infer", one({{"sequence_id", 77}})), 400, "START");
}

TEST(ServerE2E, PipelineEnsemble) {
  running_server s{bundled_models};
  auto c = s.client();
  const auto a = iota(3, 16);
  const auto b = iota(-8, 16);
  const auto r = c->post("/v2/models/pipeline/infer", add_sub_request(a, b).dump());
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto j = parse(r);
  EXPECT_EQ(j.at("model_name"), "pipeline");
  auto outputs = outputs_of(j);
  ASSERT_EQ(outputs.size(), 2U) << r.body;
  EXPECT_EQ(floats_of(outputs["OUTPUT"]), add(a, b, 1));
  EXPECT_EQ(floats_of(outputs["DIFF"]), add(a, b, -1));
  // The composing models counted the request too.
  EXPECT_EQ(s.statistics("add_sub").inference_count, 1U);
  EXPECT_EQ(s.statistics("identity_delay").inference_count, 1U);
}

TEST(ServerE2E, GpuMlpServesWhereverItWasPlaced) {
  running_server s{bundled_models};
  auto c = s.client();
  // KIND_AUTO, shown as placed: KIND_GPU on every visible GPU, else KIND_CPU (Triton's rule).
  const auto config = parse(c->get("/v2/models/gpu_mlp/config"));
  const auto& group = config.at("instance_group").at(0);
  const int gpus = cuda_examples::mlp_backend::device_count();
  EXPECT_EQ(group.at("kind"), gpus > 0 ? "KIND_GPU" : "KIND_CPU") << config;

  // Two rows in one request, against the float64 reference of the same weights.
  constexpr std::size_t width = 1024;
  std::vector<float> input(2 * width);
  for (std::size_t i = 0; i < input.size(); ++i) {
    input[i] = static_cast<float>(static_cast<double>(i % 97) / 97.0 - 0.5);
  }
  const auto r = c->post("/v2/models/gpu_mlp/infer",
                         json{{"inputs", {fp32_input("INPUT0", input, 2)}}}.dump());
  ASSERT_EQ(r.status, 200U) << r.body;
  auto outputs = outputs_of(parse(r));
  ASSERT_EQ(outputs["OUTPUT0"].at("shape"), json::array({2, 1024}));
  const auto got = floats_of(outputs["OUTPUT0"]);
  const std::int64_t layers[] = {1024, 4096, 1024};
  const auto expected =
      cuda_examples::mlp_reference(cuda_examples::make_mlp_weights(layers, /*seed=*/1), input, 2);
  ASSERT_EQ(got.size(), expected.size());
  double error = 0;
  double norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    error = std::max(error, std::abs(static_cast<double>(got[i]) - expected[i]));
    norm = std::max(norm, std::abs(expected[i]));
  }
  EXPECT_LT(error / norm, 1e-3);

  // A request of the wrong width is refused before it reaches the model.
  expect_error(c->post("/v2/models/gpu_mlp/infer",
                       json{{"inputs", {fp32_input("INPUT0", iota(0, 16))}}}.dump()),
               400, "INPUT0");
}

// stop() with no connection left must not wait for the exit timeout: the timer stop() arms
// (on another io thread, maybe before stop() saw that no session was left) is cancelled. With an
// hour-long timeout, a missed cancel hangs this test until ctest's timeout fails it; the race
// needs a few rounds to show.
TEST(ServerE2E, StopWithoutConnectionsDoesNotWaitForTheExitTimeout) {
  temp_repository repo;
  repo.copy_bundled("add_sub");
  for (int round = 0; round < 20; ++round) {
    servekit::http::server_options options;
    options.exit_timeout = std::chrono::hours{1};
    running_server s{repo.path(), options};
    {
      auto c = s.client();
      ASSERT_EQ(c->get("/v2/health/live").status, 200U);
    } // the client closes its connection
    s.stop();
  }
}

// -- statistics and metrics --------------------------------------------------------------------

TEST(ServerE2E, StatisticsJson) {
  running_server s{bundled_models};
  auto c = s.client();
  ASSERT_EQ(
      c->post("/v2/models/add_sub/infer", add_sub_request(iota(0, 16), iota(0, 16)).dump()).status,
      200U);
  const auto r = c->get("/v2/models/add_sub/stats");
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto all = parse(r).at("model_stats");
  ASSERT_EQ(all.size(), 1U);
  const auto& m = all[0];
  EXPECT_EQ(m.at("name"), "add_sub");
  EXPECT_EQ(m.at("version"), "1");
  EXPECT_EQ(m.at("inference_count"), 1);
  EXPECT_EQ(m.at("execution_count"), 1);
  EXPECT_GT(m.at("last_inference").get<std::uint64_t>(), 0U);
  const auto& inference = m.at("inference_stats");
  for (const char* field :
       {"success", "fail", "queue", "compute_input", "compute_infer", "compute_output"}) {
    ASSERT_TRUE(inference.contains(field)) << field;
    EXPECT_TRUE(inference[field].at("count").is_number_unsigned()) << field;
    EXPECT_TRUE(inference[field].at("ns").is_number_unsigned()) << field;
  }
  EXPECT_EQ(inference["success"]["count"], 1);
  EXPECT_GT(inference["success"]["ns"].get<std::uint64_t>(), 0U);
  EXPECT_EQ(inference["fail"]["count"], 0);
  EXPECT_EQ(inference["compute_infer"]["count"], 1);
  ASSERT_EQ(m.at("batch_stats").size(), 1U);
  EXPECT_EQ(m["batch_stats"][0].at("batch_size"), 1);
  EXPECT_EQ(m["batch_stats"][0].at("compute_infer").at("count"), 1);

  const auto every = parse(c->get("/v2/models/stats")).at("model_stats");
  std::vector<std::string> names;
  for (const auto& e : every) {
    names.push_back(e.at("name").get<std::string>());
  }
  EXPECT_EQ(names, bundled_rows);
  EXPECT_EQ(c->get("/v2/models/add_sub/versions/1/stats").status, 200U);
}

TEST(ServerE2E, PrometheusMetrics) {
  running_server s{bundled_models};
  auto c = s.client();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(c->post("/v2/models/add_sub/infer", add_sub_request(iota(0, 16), iota(0, 16)).dump())
                  .status,
              200U);
  }
  expect_error(c->post("/v2/models/add_sub/infer",
                       json{{"inputs", {fp32_input("INPUT0", iota(0, 16))}}}.dump()),
               400);
  const auto r = c->get("/metrics");
  ASSERT_EQ(r.status, 200U);
  EXPECT_NE(r.header("content-type").find("text/plain"), std::string::npos);
  EXPECT_NE(r.body.find("# TYPE nv_inference_request_success counter"), std::string::npos);
  EXPECT_NE(r.body.find("nv_inference_request_success{model=\"add_sub\",version=\"1\"} 3\n"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("nv_inference_count{model=\"add_sub\",version=\"1\"} 3\n"),
            std::string::npos);
  EXPECT_NE(r.body.find("nv_inference_request_success{model=\"pipeline\",version=\"1\"} 0\n"),
            std::string::npos);
}

// -- model repository extension ----------------------------------------------------------------

json index_of(test_http::client& c, const std::string& name) {
  const auto r = c.post("/v2/repository/index", "");
  EXPECT_EQ(r.status, 200U) << r.body;
  for (const auto& e : parse(r)) {
    if (e.at("name") == name) {
      return e;
    }
  }
  ADD_FAILURE() << name << " not in the index: " << r.body;
  return {};
}

TEST(ServerE2E, RepositoryIndexUnloadAndLoad) {
  running_server s{bundled_models};
  auto c = s.client();
  const auto index = c->post("/v2/repository/index", "{}");
  ASSERT_EQ(index.status, 200U) << index.body;
  const auto entries = parse(index);
  ASSERT_EQ(entries.size(), bundled_rows.size());
  for (const auto& e : entries) {
    EXPECT_EQ(e.at("state"), "READY") << e;
    if (e.at("name") != "add_sub_versions") {
      EXPECT_EQ(e.at("version"), "1") << e;
    }
  }

  ASSERT_EQ(c->post("/v2/repository/models/add_sub/unload", "").status, 200U);
  const auto unloaded = index_of(*c, "add_sub");
  EXPECT_EQ(unloaded.at("state"), "UNAVAILABLE");
  EXPECT_EQ(unloaded.at("reason"), "unloaded");
  // The pipeline runs on add_sub, so it is unavailable too; the others still serve.
  EXPECT_EQ(index_of(*c, "pipeline").at("state"), "UNAVAILABLE");
  EXPECT_EQ(index_of(*c, "identity_delay").at("state"), "READY");
  EXPECT_NE(c->get("/v2/models/add_sub/ready").status, 200U);
  expect_error(
      c->post("/v2/models/add_sub/infer", add_sub_request(iota(0, 16), iota(0, 16)).dump()), 503,
      "add_sub");
  expect_error(
      c->post("/v2/models/pipeline/infer", add_sub_request(iota(0, 16), iota(0, 16)).dump()), 503,
      "pipeline");
  EXPECT_EQ(c->get("/v2/health/ready").status, 400U) << "strict readiness: a model is unavailable";
  EXPECT_EQ(c->get("/v2/health/live").status, 200U);

  ASSERT_EQ(c->post("/v2/repository/models/add_sub/load", "").status, 200U);
  EXPECT_EQ(index_of(*c, "add_sub").at("state"), "READY");
  EXPECT_EQ(index_of(*c, "pipeline").at("state"), "READY");
  EXPECT_EQ(c->get("/v2/health/ready").status, 200U);
  EXPECT_EQ(
      c->post("/v2/models/pipeline/infer", add_sub_request(iota(0, 16), iota(0, 16)).dump()).status,
      200U);

  expect_error(c->post("/v2/repository/models/no_such_model/load", ""), 404, "no_such_model");
  expect_error(c->post("/v2/repository/models/no_such_model/unload", ""), 404, "no_such_model");
}

TEST(ServerE2E, LoadPicksUpAChangedConfig) {
  temp_repository repo;
  repo.write("echo", identity_config("echo", "TYPE_FP32", ""));
  running_server s{repo.path()};
  auto c = s.client();
  EXPECT_EQ(parse(c->get("/v2/models/echo")).at("inputs")[0].at("datatype"), "FP32");
  repo.write("echo", identity_config("echo", "TYPE_INT32", ""));
  ASSERT_EQ(c->post("/v2/repository/models/echo/load", "").status, 200U);
  EXPECT_EQ(parse(c->get("/v2/models/echo")).at("inputs")[0].at("datatype"), "INT32");
  // A broken config does not replace the serving model: the load fails, naming the file.
  repo.write("echo", R"({"name": "echo", "backend": "identity", "max_batch_size": -3})");
  expect_error(c->post("/v2/repository/models/echo/load", ""), 400, "config.json");
  EXPECT_EQ(parse(c->get("/v2/models/echo")).at("inputs")[0].at("datatype"), "INT32");
  EXPECT_EQ(c->get("/v2/models/echo/ready").status, 200U);
}

// -- errors ------------------------------------------------------------------------------------

TEST(ServerE2E, BadRequestsAre400) {
  running_server s{bundled_models};
  auto c = s.client();
  const std::string target = "/v2/models/add_sub/infer";
  expect_error(c->post(target, "{\"inputs\": [{\"name\": "), 400);
  expect_error(c->post(target, "not json at all"), 400);
  // Wrong shape: 15 values declared as [1, 15].
  expect_error(c->post(target, add_sub_request(iota(0, 15), iota(0, 16)).dump()), 400, "INPUT0");
  // Data that does not fill the shape it claims.
  json short_data = add_sub_request(iota(0, 16), iota(0, 16));
  short_data["inputs"][1]["data"] = iota(0, 15);
  expect_error(c->post(target, short_data.dump()), 400, "INPUT1");
  // Wrong data type.
  json int_input = add_sub_request(iota(0, 16), iota(0, 16));
  int_input["inputs"][0]["datatype"] = "INT32";
  int_input["inputs"][0]["data"] = std::vector<int>(16, 1);
  expect_error(c->post(target, int_input.dump()), 400, "INPUT0");
  // Unknown input, missing input, unknown output.
  json unknown = add_sub_request(iota(0, 16), iota(0, 16));
  unknown["inputs"].push_back(fp32_input("INPUT7", iota(0, 16)));
  expect_error(c->post(target, unknown.dump()), 400, "INPUT7");
  expect_error(c->post(target, json{{"inputs", {fp32_input("INPUT0", iota(0, 16))}}}.dump()), 400,
               "INPUT1");
  json bad_output = add_sub_request(iota(0, 16), iota(0, 16));
  bad_output["outputs"] = json::array({json{{"name", "OUTPUT9"}}});
  expect_error(c->post(target, bad_output.dump()), 400, "OUTPUT9");
  // A batch over max_batch_size (8).
  expect_error(c->post(target, json{{"inputs",
                                     {fp32_input("INPUT0", iota(0, 9 * 16), 9),
                                      fp32_input("INPUT1", iota(0, 9 * 16), 9)}}}
                                   .dump()),
               400);
  // The connection survived every error.
  EXPECT_EQ(c->get("/v2/health/live").status, 200U);
  EXPECT_EQ(s.statistics("add_sub").inference_count, 0U);
}

TEST(ServerE2E, UnknownModelVersionAndRouteAre404) {
  running_server s{bundled_models};
  auto c = s.client();
  expect_error(c->get("/v2/models/no_such_model"), 404, "no_such_model");
  expect_error(c->get("/v2/models/no_such_model/ready"), 404);
  expect_error(
      c->post("/v2/models/no_such_model/infer", add_sub_request(iota(0, 16), iota(0, 16)).dump()),
      404, "no_such_model");
  expect_error(c->get("/v2/models/add_sub/versions/2"), 404);
  expect_error(c->post("/v2/models/add_sub/versions/2/infer",
                       add_sub_request(iota(0, 16), iota(0, 16)).dump()),
               404);
  expect_error(c->get("/v2/no/such/route"), 404);
  expect_error(c->get("/nothing"), 404);
}

TEST(ServerE2E, WrongMethodIs405) {
  running_server s{bundled_models};
  auto c = s.client();
  EXPECT_EQ(c->get("/v2/models/add_sub/infer").status, 405U);
  EXPECT_EQ(c->post("/v2/health/live", "").status, 405U);
  EXPECT_EQ(c->get("/v2/repository/index").status, 405U);
  EXPECT_EQ(c->send(boost::beast::http::verb::delete_, "/v2/models/add_sub", "").status, 405U);
  EXPECT_EQ(c->get("/v2/health/live").status, 200U);
}

TEST(ServerE2E, FullQueueIs503) {
  // One request fits the default priority level's queue; the hold hook keeps it queued until a
  // second request is queued, which only the unbounded priority level 1 can take.
  temp_repository repo;
  repo.write("one_slot", identity_config("one_slot", "TYPE_FP32", R"(,
    "dynamic_batching": {
      "priority_levels": 2, "default_priority_level": 2,
      "default_queue_policy": {"max_queue_size": 1},
      "priority_queue_policy": {"1": {"max_queue_size": 0}}
    })"));
  servekit::test_hooks hooks;
  hooks.delay_scheduler = 2;
  running_server s{repo.path(), {}, hooks};
  const json body{{"inputs", {fp32_input("INPUT0", iota(0, 4))}}};
  reply first;
  std::thread holder{[&] { first = s.client()->post("/v2/models/one_slot/infer", body.dump()); }};
  ASSERT_TRUE(eventually([&] { return s.statistics("one_slot").pending_request_count == 1; }));

  auto c = s.client();
  expect_error(c->post("/v2/models/one_slot/infer", body.dump()), 503);
  auto urgent = body;
  urgent["parameters"] = {{"priority", 1}};
  const auto second = c->post("/v2/models/one_slot/infer", urgent.dump());
  holder.join();
  EXPECT_EQ(second.status, 200U) << second.body;
  EXPECT_EQ(first.status, 200U) << first.body << first.error;
  const auto stats = s.statistics("one_slot");
  EXPECT_EQ(stats.success.count, 2U);
  EXPECT_EQ(stats.fail.count, 1U);
}

TEST(ServerE2E, BodyOverTheLimitIs413) {
  servekit::http::server_options options;
  options.max_body_bytes = 1024;
  running_server s{bundled_models, options};
  auto c = s.client();
  const std::string small = add_sub_request(iota(0, 16), iota(0, 16)).dump();
  ASSERT_LT(small.size(), 1024U);
  EXPECT_EQ(c->post("/v2/models/add_sub/infer", small).status, 200U);
  const std::string big =
      json{{"inputs",
            {fp32_input("INPUT0", iota(0, 16 * 8), 8), fp32_input("INPUT1", iota(0, 16 * 8), 8)}}}
          .dump();
  ASSERT_GT(big.size(), 1024U);
  expect_error(c->post("/v2/models/add_sub/infer", big), 413);
  // The server still serves (the client reconnects if it closed that connection).
  EXPECT_EQ(c->get("/v2/health/live").status, 200U);
}

TEST(ServerE2E, BadConfigIsReportedAndTheOthersServe) {
  temp_repository repo;
  repo.copy_bundled("add_sub");
  repo.write("broken", R"({"name": "broken", "backend": "add_sub", "max_batch_size": "eight"})");
  repo.write("unknown_backend", R"({"backend": "tensorflow_savedmodel"})");
  repo.write("bad_json", R"({"backend": "identity", )");
  running_server s{repo.path()};
  auto c = s.client();
  EXPECT_EQ(
      c->post("/v2/models/add_sub/infer", add_sub_request(iota(0, 16), iota(0, 16)).dump()).status,
      200U);

  const auto broken = index_of(*c, "broken");
  EXPECT_EQ(broken.at("state"), "UNAVAILABLE");
  const auto reason = broken.at("reason").get<std::string>();
  // The file is named within the repository; the host path never reaches a client.
  EXPECT_NE(reason.find("broken/config.json"), std::string::npos) << reason;
  EXPECT_EQ(reason.find(repo.path().string()), std::string::npos) << reason;
  EXPECT_NE(reason.find("/max_batch_size"), std::string::npos) << reason;
  const auto unknown = index_of(*c, "unknown_backend");
  EXPECT_EQ(unknown.at("state"), "UNAVAILABLE");
  EXPECT_NE(unknown.at("reason").get<std::string>().find("/backend"), std::string::npos);
  EXPECT_NE(unknown.at("reason").get<std::string>().find("add_sub"), std::string::npos)
      << "the reason lists the known backends";
  EXPECT_EQ(index_of(*c, "bad_json").at("state"), "UNAVAILABLE");
  EXPECT_EQ(index_of(*c, "add_sub").at("state"), "READY");

  EXPECT_EQ(c->get("/v2/health/ready").status, 400U);
  EXPECT_EQ(c->get("/v2/health/live").status, 200U);
  EXPECT_NE(c->get("/v2/models/broken/ready").status, 200U);
  expect_error(c->post("/v2/models/broken/infer", "{}"), 503, "config.json");

  // Without strict readiness the server is ready while some model is not.
  servekit::http::server_options relaxed;
  relaxed.strict_readiness = false;
  running_server lenient{repo.path(), relaxed};
  EXPECT_EQ(lenient.client()->get("/v2/health/ready").status, 200U);
}

TEST(ServerE2E, MalformedBodiesAre400AndTheServerCarriesOn) {
  running_server s{bundled_models};
  auto c = s.client();
  const std::string target = "/v2/models/add_sub/infer";
  const auto valid = add_sub_request(iota(0, 16), iota(0, 16)).dump();
  std::vector<std::string> bodies = {
      "",
      "{",
      "[]",
      "null",
      valid.substr(0, valid.size() / 2),
      R"({"inputs": 5})",
      R"({"inputs": [{"name": "INPUT0"}]})",
      R"({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [1e999]}]})",
      R"({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [99999999999999999999, 16], "data": []}]})",
      R"({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4294967296, 4294967296], "data": [1]}]})",
      R"({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 16], "data": [1]}]})",
      R"({"inputs": [{"name": "INPUT0", "datatype": "NOPE", "shape": [1], "data": [1]}]})",
      R"({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": ["x"]}]})",
      R"({"inputs": [], "parameters": {"sequence_id": -5}})",
      R"({"id": 12, "inputs": []})",
      std::string(20000, '[') + std::string(20000, ']'),
  };
  std::string garbage;
  for (int i = 0; i < 4096; ++i) {
    garbage.push_back(static_cast<char>((i * 7919 + 13) % 256));
  }
  bodies.push_back(garbage);
  bodies.push_back(std::string("{\"inputs\": [\0]}", 15));
  for (const auto& body : bodies) {
    const auto r = c->post(target, body);
    EXPECT_EQ(r.status, 400U) << "body: " << body.substr(0, 120) << "\nreply: " << r.body
                              << r.error;
  }
  // A bad Inference-Header-Content-Length.
  EXPECT_EQ(c->post(target, valid, {{"Inference-Header-Content-Length", "99999"}}).status, 400U);
  EXPECT_EQ(c->post(target, valid, {{"Inference-Header-Content-Length", "abc"}}).status, 400U);

  // Malformed HTTP itself: a 400 or a closed connection, never a crash or a hang.
  test_http::client raw{"127.0.0.1", s.port()};
  for (const std::string_view bytes :
       {std::string_view{"GARBAGE\r\n\r\n"}, std::string_view{"GET / HTTP/9.9\r\n\r\n"},
        std::string_view{"POST /v2/models/add_sub/infer HTTP/1.1\r\nContent-Length: -5\r\n\r\n"},
        std::string_view{"POST /v2/models/add_sub/infer HTTP/1.1\r\nTransfer-Encoding: chunked"
                         "\r\n\r\nZZZ\r\n"}}) {
    const auto r = raw.raw(bytes);
    EXPECT_TRUE(r.status == 400 || r.status == 0) << bytes << " -> " << r.status << " " << r.body;
  }
  EXPECT_EQ(c->get("/v2/health/live").status, 200U);
  EXPECT_EQ(c->post(target, valid).status, 200U);
}

// -- reload under load, stop ---------------------------------------------------------------------

TEST(ServerE2E, ReloadUnderLoadFailsNoRequest) {
  running_server s{bundled_models, [] {
                     servekit::http::server_options o;
                     o.thread_count = 3;
                     return o;
                   }()};
  constexpr int clients = 4;
  constexpr int reloads = 8;
  std::atomic<bool> done{false};
  std::atomic<int> sent{0};
  std::atomic<int> failed{0};
  std::atomic<int> retried{0};
  std::latch ready{clients + 1};
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      auto c = s.client();
      const auto a = iota(static_cast<float>(i), 16);
      const auto b = iota(1, 16);
      const std::string body = add_sub_request(a, b).dump();
      const auto expected = add(a, b, 1);
      ready.arrive_and_wait();
      while (!done.load()) {
        const auto r = c->post("/v2/models/add_sub/infer", body);
        if (r.status != 200 || floats_of(outputs_of(parse(r))["OUTPUT0"]) != expected) {
          ADD_FAILURE() << "client " << i << ": " << r.status << " " << r.body << r.error;
          failed.fetch_add(1);
        }
        sent.fetch_add(1);
      }
      retried.fetch_add(c->retries());
    });
  }
  auto admin = s.client();
  ready.arrive_and_wait();
  for (int k = 0; k < reloads; ++k) {
    // Each reload happens while requests keep arriving.
    const int before = sent.load();
    ASSERT_TRUE(eventually([&] { return sent.load() >= before + 50; }));
    const auto r = admin->post("/v2/repository/models/add_sub/load", "");
    EXPECT_EQ(r.status, 200U) << r.body;
  }
  const int after = sent.load();
  EXPECT_TRUE(eventually([&] { return sent.load() >= after + 20; }));
  done.store(true);
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(retried.load(), 0) << "a connection closed under a client";
  EXPECT_GT(sent.load(), 100);
  s.repository().wait_retired();
}

/// Sends one FP32 [1, n] INPUT0 request to `model` straight through the repository (not over
/// HTTP), e.g. to release requests a test hook holds; true if it succeeded.
bool infer_in_process(running_server& s, std::string_view model, const std::vector<float>& data) {
  const auto m = s.repository().find(model);
  if (m == nullptr) {
    return false;
  }
  servekit::request r;
  r.inputs.push_back(servekit::make_tensor(
      "INPUT0", servekit::data_type::fp32,
      servekit::shape{1, static_cast<std::int64_t>(data.size())}, std::span<const float>{data}));
  std::promise<bool> done;
  if (!m->model()
           .submit(std::move(r), [&done](servekit::response&& a) { done.set_value(a.ok()); })
           .ok()) {
    return false;
  }
  return done.get_future().get();
}

TEST(ServerE2E, StopAnswersRequestsInFlight) {
  // Three HTTP requests are held by the hook (it waits for four); stop() comes while they wait;
  // the fourth request, submitted in-process, releases them. All three are answered.
  servekit::test_hooks hooks;
  hooks.delay_scheduler = 4;
  running_server s{bundled_models, {}, hooks};
  constexpr int clients = 3;
  std::vector<reply> replies(clients);
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      const json body{{"inputs", {fp32_input("INPUT0", iota(static_cast<float>(i), 4))}}};
      replies[static_cast<std::size_t>(i)] =
          s.client()->post("/v2/models/identity_delay/infer", body.dump());
    });
  }
  ASSERT_TRUE(
      eventually([&] { return s.statistics("identity_delay").pending_request_count == clients; }));
  auto idle = s.client();
  ASSERT_EQ(idle->get("/v2/health/live").status, 200U); // an idle keep-alive connection

  s.server().stop();

  EXPECT_TRUE(infer_in_process(s, "identity_delay", iota(0, 4)));
  for (auto& t : threads) {
    t.join();
  }
  for (int i = 0; i < clients; ++i) {
    const auto& r = replies[static_cast<std::size_t>(i)];
    ASSERT_EQ(r.status, 200U) << r.body << r.error;
    EXPECT_EQ(floats_of(parse(r).at("outputs")[0]), iota(static_cast<float>(i), 4));
  }
  s.stop(); // run() returns: every connection, the idle one included, is closed
  EXPECT_TRUE(idle->closed_by_server());
  EXPECT_NE(s.client()->get("/v2/health/live").status, 200U) << "no longer accepting";
}

TEST(ServerE2E, StopClosesAConnectionStalledMidBody) {
  // A client announces 1000 bytes and sends 10: its request never reaches a model, so stop()
  // must not wait for the rest of the body (run() would never return).
  running_server s{bundled_models};
  auto stalled = s.client();
  ASSERT_EQ(stalled->get("/v2/health/live").status, 200U);
  reply r;
  std::thread t{[&] {
    r = stalled->raw("POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\n"
                     "Content-Length: 1000\r\n\r\n{\"inputs\":");
  }};
  s.stop(); // returns: the stalled connection is closed
  t.join();
  EXPECT_EQ(r.status, 0U) << "closed without an answer: " << r.body;
}

TEST(ServerE2E, ExitTimeoutAnswersRequestsStillQueued) {
  // The hook holds the request (it waits for two); with an exit timeout of 0 s, stop() does not
  // wait for the model: past the timeout every model answers what it still owes, so the client
  // gets 503 "server is shutting down" instead of a closed connection, and run() returns.
  servekit::test_hooks hooks;
  hooks.delay_scheduler = 2;
  servekit::http::server_options options;
  options.exit_timeout = std::chrono::seconds{0};
  running_server s{bundled_models, options, hooks};
  reply held;
  std::thread t{[&] {
    const json body{{"inputs", {fp32_input("INPUT0", iota(0, 4))}}};
    held = s.client()->post("/v2/models/identity_delay/infer", body.dump());
  }};
  ASSERT_TRUE(
      eventually([&] { return s.statistics("identity_delay").pending_request_count == 1; }));
  s.server().stop();
  t.join();
  EXPECT_EQ(held.status, 503U) << held.body << held.error;
  EXPECT_NE(held.body.find("server is shutting down"), std::string::npos) << held.body;
  s.stop();
}

TEST(ServerE2E, RepositoryLoadParametersAreRefused) {
  running_server s{bundled_models};
  auto c = s.client();
  const auto r = c->post("/v2/repository/models/add_sub/load",
                         R"({"parameters": {"config": "{\"max_batch_size\": 4}"}})");
  expect_error(r, 400, "not supported");
  EXPECT_EQ(c->post("/v2/repository/models/add_sub/load", "{}").status, 200U);
  EXPECT_EQ(c->post("/v2/repository/models/add_sub/load", "not json").status, 400U);
}

TEST(ServerE2E, ManyConcurrentConnections) {
  running_server s{bundled_models};
  constexpr int clients = 64;
  std::vector<std::unique_ptr<test_http::client>> connections;
  for (int i = 0; i < clients; ++i) {
    connections.push_back(s.client());
    ASSERT_EQ(connections.back()->get("/v2/health/live").status, 200U);
  }
  std::latch go{clients};
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  const std::string body = add_sub_request(iota(0, 16), iota(0, 16)).dump();
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      go.arrive_and_wait();
      for (int k = 0; k < 5; ++k) {
        if (connections[static_cast<std::size_t>(i)]
                ->post("/v2/models/add_sub/infer", body)
                .status == 200) {
          ok.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(ok.load(), clients * 5);
  for (const auto& c : connections) {
    EXPECT_EQ(c->connections_opened(), 1);
  }
}

} // namespace server_e2e_test
