// End to end: servekit::grpc::server in-process on a free loopback port, over a model repository
// of the example server's bundled backends (add_sub, accumulate, repeat_int32, identity) plus a
// registered test backend, driven by the grpc++ stubs generated from
// proto/servekit/grpc/grpc_service.proto: every RPC, values, parameters both ways, sequences,
// and the status codes and messages of bad requests.
#include "archetypes/gate.hpp"
#include "archetypes/temp_repository.hpp"

#include "bundled_backends.hpp"

#include <servekit/config/model_config_json.hpp>
#include <servekit/grpc/server.hpp>
#include <servekit/repository/model_repository.hpp>

#include <servekit/grpc/grpc_service.grpc.pb.h>
#include <servekit/grpc/health.grpc.pb.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace server_test {

namespace fs = std::filesystem;
using servekit::data_type;

const fs::path bundled_models = fs::path{SERVEKIT_SOURCE_DIR} / "examples" / "models";

/// A request with the parameter "hold": true opens `held_entered` when it executes, then waits
/// for `held_release` (set by the test that sends it).
archetypes::gate* held_entered = nullptr;
archetypes::gate* held_release = nullptr;

/// Y = X * "scale" (default 1); answers with the parameters "tokens" (the request's
/// "max_tokens", default 16) and "user" (the request's, when set).
struct knob_backend {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {{"X", data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"Y", data_type::fp32, {4}}};

  explicit knob_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::request& req = b.request(i);
      servekit::response& res = b.response(i);
      double scale = 1.0;
      std::int64_t max_tokens = 16;
      if (servekit::status s = req.parameters.get("scale", scale); !s.ok()) {
        res.status = std::move(s);
        continue;
      }
      if (servekit::status s = req.parameters.get("max_tokens", max_tokens); !s.ok()) {
        res.status = std::move(s);
        continue;
      }
      bool hold = false;
      if (req.parameters.get("hold", hold).ok() && hold && held_entered != nullptr) {
        held_entered->open();
        EXPECT_TRUE(held_release->wait());
      }
      const servekit::tensor& x = req.input("X");
      auto& y = res.add_output("Y", data_type::fp32, x.shape);
      std::transform(x.values<float>().begin(), x.values<float>().end(), y.values<float>().begin(),
                     [scale](float v) { return static_cast<float>(v * scale); });
      res.parameters.set("tokens", max_tokens);
      if (const auto user = req.parameters.get<std::string_view>("user")) {
        res.parameters.set("user", *user);
      }
    }
  }
};

constexpr std::string_view bytes_identity_config = R"({
  "name": "ident_bytes", "backend": "identity", "max_batch_size": 0,
  "input": [{"name": "INPUT0", "data_type": "TYPE_STRING", "dims": [-1]}],
  "output": [{"name": "OUTPUT0", "data_type": "TYPE_STRING", "dims": [-1]}]
})";

constexpr std::string_view broken_config = R"({
  "name": "broken", "backend": "no_such_backend", "max_batch_size": 0,
  "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [1]}],
  "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [1]}]
})";

/// The repository served on a free loopback port, with run() on a thread of its own.
class served {
public:
  explicit served(servekit::grpc::server_options options = default_options(),
                  bool with_broken = false) {
    for (const char* m : {"add_sub", "accumulate", "repeat_int32"}) {
      fs::copy(bundled_models / m, folder_.root() / m, fs::copy_options::recursive);
    }
    folder_.write("ident_bytes", bytes_identity_config);
    if (with_broken) {
      folder_.write("broken", broken_config);
    }
    models_.load_all();
    const auto added = models_.add("knobs", 1, [] {
      servekit::model_options o;
      o.name = "knobs";
      return servekit::any_model::make<servekit::model<knob_backend>>(o);
    });
    EXPECT_TRUE(added.ok()) << added.message();
    server_ = std::make_unique<servekit::grpc::server>(models_, std::move(options));
    runner_ = std::thread{[this] { server_->run(); }};
    const auto channel = ::grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                               ::grpc::InsecureChannelCredentials());
    stub_ = inference::GRPCInferenceService::NewStub(channel);
    health_ = ::grpc::health::v1::Health::NewStub(channel);
  }
  served(const served&) = delete;
  served& operator=(const served&) = delete;
  ~served() {
    server_->stop();
    runner_.join();
  }

  static servekit::grpc::server_options default_options() {
    servekit::grpc::server_options o;
    o.port = 0;
    o.thread_count = 2;
    o.strict_readiness = false;
    return o;
  }

  [[nodiscard]] inference::GRPCInferenceService::Stub& stub() { return *stub_; }
  [[nodiscard]] ::grpc::health::v1::Health::Stub& health() { return *health_; }
  [[nodiscard]] servekit::grpc::server& server() { return *server_; }
  [[nodiscard]] servekit::model_repository& models() { return models_; }

private:
  archetypes::temp_repository folder_;
  servekit::model_repository models_{folder_.root(), servekit_server::bundled_backends{}};
  std::unique_ptr<servekit::grpc::server> server_;
  std::thread runner_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::unique_ptr<::grpc::health::v1::Health::Stub> health_;
};

/// A client context whose deadline bounds every call of the tests.
struct context : ::grpc::ClientContext {
  context() { set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{10}); }
};

std::string raw_floats(const std::vector<float>& v) {
  std::string s(v.size() * sizeof(float), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

std::vector<float> floats_of(const std::string& raw) {
  std::vector<float> v(raw.size() / sizeof(float));
  std::memcpy(v.data(), raw.data(), v.size() * sizeof(float));
  return v;
}

void add_input(inference::ModelInferRequest& r, const std::string& name, const std::string& type,
               std::vector<std::int64_t> shape) {
  auto* in = r.add_inputs();
  in->set_name(name);
  in->set_datatype(type);
  for (const auto d : shape) {
    in->add_shape(d);
  }
}

/// add_sub with INPUT0 = 0..15 and INPUT1 = 1 (raw contents), shape [1, 16].
inference::ModelInferRequest add_sub_request() {
  inference::ModelInferRequest r;
  r.set_model_name("add_sub");
  std::vector<float> a(16);
  std::vector<float> b(16, 1.0F);
  for (int i = 0; i < 16; ++i) {
    a[static_cast<std::size_t>(i)] = static_cast<float>(i);
  }
  add_input(r, "INPUT0", "FP32", {1, 16});
  add_input(r, "INPUT1", "FP32", {1, 16});
  r.add_raw_input_contents(raw_floats(a));
  r.add_raw_input_contents(raw_floats(b));
  return r;
}

::grpc::Status infer(served& s, const inference::ModelInferRequest& r,
                     inference::ModelInferResponse& out) {
  context c;
  return s.stub().ModelInfer(&c, r, &out);
}

// -- health, metadata, config ------------------------------------------------------------------

TEST(GrpcServer, LiveReadyAndHealth) {
  served s;
  EXPECT_GT(s.server().port(), 0);
  {
    context c;
    inference::ServerLiveResponse r;
    ASSERT_TRUE(s.stub().ServerLive(&c, {}, &r).ok());
    EXPECT_TRUE(r.live());
  }
  {
    context c;
    inference::ServerReadyResponse r;
    ASSERT_TRUE(s.stub().ServerReady(&c, {}, &r).ok());
    EXPECT_TRUE(r.ready());
  }
  {
    context c;
    ::grpc::health::v1::HealthCheckResponse r;
    ASSERT_TRUE(s.health().Check(&c, {}, &r).ok());
    EXPECT_EQ(r.status(), ::grpc::health::v1::HealthCheckResponse::SERVING);
  }
  {
    context c;
    ::grpc::health::v1::HealthCheckRequest q;
    q.set_service("no.such.Service");
    ::grpc::health::v1::HealthCheckResponse r;
    const auto st = s.health().Check(&c, q, &r);
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::NOT_FOUND);
  }
}

TEST(GrpcServer, StrictReadinessCountsAModelThatFailedToLoad) {
  auto options = served::default_options();
  options.strict_readiness = true;
  served s{options, /*with_broken=*/true};
  context c;
  inference::ServerReadyResponse r;
  ASSERT_TRUE(s.stub().ServerReady(&c, {}, &r).ok());
  EXPECT_FALSE(r.ready());
  context hc;
  ::grpc::health::v1::HealthCheckResponse h;
  ASSERT_TRUE(s.health().Check(&hc, {}, &h).ok());
  EXPECT_EQ(h.status(), ::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
}

TEST(GrpcServer, ModelReady) {
  served s{served::default_options(), /*with_broken=*/true};
  const auto ready = [&](const std::string& name, const std::string& version,
                         inference::ModelReadyResponse& r) {
    context c;
    inference::ModelReadyRequest q;
    q.set_name(name);
    q.set_version(version);
    return s.stub().ModelReady(&c, q, &r);
  };
  inference::ModelReadyResponse r;
  ASSERT_TRUE(ready("add_sub", "", r).ok());
  EXPECT_TRUE(r.ready());
  ASSERT_TRUE(ready("broken", "", r).ok());
  EXPECT_FALSE(r.ready());
  auto st = ready("nope", "", r);
  EXPECT_EQ(st.error_code(), ::grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), "Request for unknown model: 'nope' is not found");
  st = ready("add_sub", "7", r);
  EXPECT_EQ(st.error_code(), ::grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), "Request for unknown model: 'add_sub' version 7 is not found");
  st = ready("add_sub", "one", r);
  EXPECT_EQ(st.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(GrpcServer, ServerAndModelMetadata) {
  served s;
  {
    context c;
    inference::ServerMetadataResponse r;
    ASSERT_TRUE(s.stub().ServerMetadata(&c, {}, &r).ok());
    EXPECT_EQ(r.name(), "servekit");
    EXPECT_NE(std::find(r.extensions().begin(), r.extensions().end(), "model_repository"),
              r.extensions().end());
  }
  {
    context c;
    inference::ModelMetadataRequest q;
    q.set_name("add_sub");
    inference::ModelMetadataResponse r;
    ASSERT_TRUE(s.stub().ModelMetadata(&c, q, &r).ok());
    EXPECT_EQ(r.name(), "add_sub");
    ASSERT_EQ(r.versions_size(), 1);
    EXPECT_EQ(r.versions(0), "1");
    EXPECT_EQ(r.platform(), "add_sub");
    ASSERT_EQ(r.inputs_size(), 2);
    EXPECT_EQ(r.inputs(0).name(), "INPUT0");
    EXPECT_EQ(r.inputs(0).datatype(), "FP32");
    EXPECT_EQ(std::vector<std::int64_t>(r.inputs(0).shape().begin(), r.inputs(0).shape().end()),
              (std::vector<std::int64_t>{-1, 16}));
    ASSERT_EQ(r.outputs_size(), 2);
    EXPECT_EQ(r.outputs(1).name(), "OUTPUT1");
  }
  {
    context c;
    inference::ModelMetadataRequest q;
    q.set_name("nope");
    inference::ModelMetadataResponse r;
    const auto st = s.stub().ModelMetadata(&c, q, &r);
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(st.error_message(), "Request for unknown model: 'nope' is not found");
  }
}

TEST(GrpcServer, ModelConfigIsTritonsMessage) {
  served s;
  context c;
  inference::ModelConfigRequest q;
  q.set_name("add_sub");
  inference::ModelConfigResponse r;
  ASSERT_TRUE(s.stub().ModelConfig(&c, q, &r).ok());
  EXPECT_EQ(r.config().name(), "add_sub");
  EXPECT_EQ(r.config().max_batch_size(), 8);
  ASSERT_EQ(r.config().input_size(), 2);
  EXPECT_EQ(r.config().input(1).name(), "INPUT1");
  EXPECT_EQ(r.config().input(1).data_type(), inference::TYPE_FP32);
  EXPECT_TRUE(r.config().has_dynamic_batching());
  context c2;
  q.set_name("nope");
  EXPECT_EQ(s.stub().ModelConfig(&c2, q, &r).error_code(), ::grpc::StatusCode::NOT_FOUND);
}

// -- inference ---------------------------------------------------------------------------------

TEST(GrpcServer, InferRawContents) {
  served s;
  auto q = add_sub_request();
  q.set_id("request-1");
  inference::ModelInferResponse r;
  const auto st = infer(s, q, r);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(r.model_name(), "add_sub");
  EXPECT_EQ(r.model_version(), "1");
  EXPECT_EQ(r.id(), "request-1");
  ASSERT_EQ(r.outputs_size(), 2);
  ASSERT_EQ(r.raw_output_contents_size(), 2);
  EXPECT_EQ(r.outputs(0).name(), "OUTPUT0");
  EXPECT_EQ(r.outputs(0).datatype(), "FP32");
  EXPECT_EQ(std::vector<std::int64_t>(r.outputs(0).shape().begin(), r.outputs(0).shape().end()),
            (std::vector<std::int64_t>{1, 16}));
  const auto sum = floats_of(r.raw_output_contents(0));
  const auto difference = floats_of(r.raw_output_contents(1));
  ASSERT_EQ(sum.size(), 16U);
  ASSERT_EQ(difference.size(), 16U);
  for (std::size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(sum[i], static_cast<float>(i) + 1.0F);
    EXPECT_EQ(difference[i], static_cast<float>(i) - 1.0F);
  }
}

TEST(GrpcServer, InferTypedContentsAndRequestedOutputs) {
  served s;
  inference::ModelInferRequest q;
  q.set_model_name("add_sub");
  q.set_model_version("1");
  add_input(q, "INPUT0", "FP32", {1, 16});
  add_input(q, "INPUT1", "FP32", {1, 16});
  for (int i = 0; i < 16; ++i) {
    q.mutable_inputs(0)->mutable_contents()->add_fp32_contents(static_cast<float>(2 * i));
    q.mutable_inputs(1)->mutable_contents()->add_fp32_contents(static_cast<float>(i));
  }
  q.add_outputs()->set_name("OUTPUT1");
  inference::ModelInferResponse r;
  const auto st = infer(s, q, r);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(r.outputs_size(), 1);
  EXPECT_EQ(r.outputs(0).name(), "OUTPUT1");
  const auto difference = floats_of(r.raw_output_contents(0));
  ASSERT_EQ(difference.size(), 16U);
  for (std::size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(difference[i], static_cast<float>(i));
  }
}

TEST(GrpcServer, InferBytesTypedAndRaw) {
  served s;
  inference::ModelInferRequest q;
  q.set_model_name("ident_bytes");
  add_input(q, "INPUT0", "BYTES", {2});
  q.mutable_inputs(0)->mutable_contents()->add_bytes_contents("hello");
  q.mutable_inputs(0)->mutable_contents()->add_bytes_contents(std::string{"a\0b", 3});
  inference::ModelInferResponse r;
  auto st = infer(s, q, r);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(r.raw_output_contents_size(), 1);
  const std::string expected = std::string{"\x05\0\0\0hello", 9} + std::string{"\x03\0\0\0a\0b", 7};
  EXPECT_EQ(r.raw_output_contents(0), expected);
  EXPECT_EQ(r.outputs(0).datatype(), "BYTES");

  // The same elements as raw contents; then a malformed raw BYTES entry.
  q.mutable_inputs(0)->clear_contents();
  q.add_raw_input_contents(expected);
  inference::ModelInferResponse r2;
  st = infer(s, q, r2);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(r2.raw_output_contents(0), expected);
  q.set_raw_input_contents(0, std::string{"\x09\0\0\0ab", 6});
  st = infer(s, q, r2);
  EXPECT_EQ(st.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "input 'INPUT0': raw_input_contents is not a sequence of "
                                "4-byte-length-prefixed BYTES elements");
}

TEST(GrpcServer, ParametersBothWays) {
  served s;
  inference::ModelInferRequest q;
  q.set_model_name("knobs");
  add_input(q, "X", "FP32", {1, 4});
  q.add_raw_input_contents(raw_floats({1, 2, 3, 4}));
  (*q.mutable_parameters())["scale"].set_double_param(2.5);
  (*q.mutable_parameters())["max_tokens"].set_int64_param(7);
  (*q.mutable_parameters())["user"].set_string_param("ada");
  (*q.mutable_parameters())["priority"].set_uint64_param(1);
  (*q.mutable_parameters())["timeout"].set_int64_param(5'000'000);
  inference::ModelInferResponse r;
  auto st = infer(s, q, r);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(floats_of(r.raw_output_contents(0)), (std::vector<float>{2.5F, 5.0F, 7.5F, 10.0F}));
  ASSERT_EQ(r.parameters().count("tokens"), 1U);
  EXPECT_EQ(r.parameters().at("tokens").int64_param(), 7);
  EXPECT_EQ(r.parameters().at("user").string_param(), "ada");

  // A backend's parameter error, and the reserved and scheduling parameters' own.
  (*q.mutable_parameters())["max_tokens"].set_string_param("many");
  st = infer(s, q, r);
  EXPECT_EQ(st.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("max_tokens"), std::string::npos) << st.error_message();
  (*q.mutable_parameters())["max_tokens"].set_int64_param(7);
  (*q.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  st = infer(s, q, r);
  EXPECT_EQ(st.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "parameter keys starting with 'triton_' are reserved for Triton "
                                "usage and should not be specified.");
  q.mutable_parameters()->erase("triton_enable_empty_final_response");
  (*q.mutable_parameters())["priority"].set_string_param("high");
  st = infer(s, q, r);
  EXPECT_EQ(st.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(),
            "Unable to parse 'priority': expected an unsigned integer, got a string");
}

TEST(GrpcServer, SequenceParametersReachTheSequenceBatcher) {
  served s;
  const auto step = [&](std::int32_t value, bool start, bool end) {
    inference::ModelInferRequest q;
    q.set_model_name("accumulate");
    add_input(q, "INPUT", "INT32", {1, 1});
    q.mutable_inputs(0)->mutable_contents()->add_int_contents(value);
    (*q.mutable_parameters())["sequence_id"].set_uint64_param(42);
    (*q.mutable_parameters())["sequence_start"].set_bool_param(start);
    (*q.mutable_parameters())["sequence_end"].set_bool_param(end);
    inference::ModelInferResponse r;
    const auto st = infer(s, q, r);
    EXPECT_TRUE(st.ok()) << st.error_message();
    std::int32_t out = 0;
    if (r.raw_output_contents_size() == 1 && r.raw_output_contents(0).size() == sizeof(out)) {
      std::memcpy(&out, r.raw_output_contents(0).data(), sizeof(out));
    }
    return out;
  };
  EXPECT_EQ(step(1, true, false), 1);
  EXPECT_EQ(step(2, false, false), 3);
  EXPECT_EQ(step(3, false, true), 6);
}

TEST(GrpcServer, BadInferRequestsGetTheirStatusAndMessage) {
  served s;
  inference::ModelInferResponse r;
  const auto expect_error = [&](const inference::ModelInferRequest& q, ::grpc::StatusCode code,
                                std::string_view words) {
    const auto st = infer(s, q, r);
    EXPECT_EQ(st.error_code(), code) << st.error_message();
    EXPECT_NE(st.error_message().find(words), std::string::npos) << st.error_message();
  };

  auto q = add_sub_request();
  q.set_model_name("nope");
  expect_error(q, ::grpc::StatusCode::NOT_FOUND, "Request for unknown model: 'nope' is not found");

  q = add_sub_request();
  q.mutable_inputs(0)->set_shape(1, 8); // 64 bytes of raw data for 8 elements
  expect_error(q, ::grpc::StatusCode::INVALID_ARGUMENT,
               "input 'INPUT0': raw_input_contents holds 64 bytes; shape [1,8] of FP32 needs 32");

  q = add_sub_request();
  q.mutable_inputs(0)->set_shape(1, 8);
  q.set_raw_input_contents(0, raw_floats(std::vector<float>(8)));
  expect_error(q, ::grpc::StatusCode::INVALID_ARGUMENT, "INPUT0"); // the model's shape check

  q = add_sub_request();
  q.mutable_inputs(1)->set_datatype("INT32");
  expect_error(q, ::grpc::StatusCode::INVALID_ARGUMENT, "INPUT1"); // the model's type check

  q = add_sub_request();
  q.mutable_inputs(1)->set_datatype("FLOAT");
  expect_error(q, ::grpc::StatusCode::INVALID_ARGUMENT, "input 'INPUT1': unknown datatype 'FLOAT'");

  q = add_sub_request();
  q.mutable_inputs()->RemoveLast();
  q.mutable_raw_input_contents()->RemoveLast();
  expect_error(q, ::grpc::StatusCode::INVALID_ARGUMENT, "INPUT1"); // missing input

  q = add_sub_request();
  q.mutable_raw_input_contents()->RemoveLast();
  expect_error(q, ::grpc::StatusCode::INVALID_ARGUMENT,
               "the request has 2 inputs but 1 raw_input_contents");

  q = add_sub_request();
  q.clear_raw_input_contents();
  q.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.0F);
  expect_error(q, ::grpc::StatusCode::INVALID_ARGUMENT,
               "input 'INPUT0': fp32_contents holds 1 elements; shape [1,16] needs 16");

  q = add_sub_request();
  q.add_outputs()->set_name("OUTPUT9");
  expect_error(q, ::grpc::StatusCode::INVALID_ARGUMENT,
               "unexpected inference output 'OUTPUT9' for model 'add_sub'");

  q = add_sub_request();
  q.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.0F);
  expect_error(q, ::grpc::StatusCode::INVALID_ARGUMENT,
               "input 'INPUT0': contents must not be given when the request uses "
               "raw_input_contents");

  q = add_sub_request();
  (*q.mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param("r");
  expect_error(q, ::grpc::StatusCode::INVALID_ARGUMENT,
               "input 'INPUT0': 'shared_memory_region': shared memory is not supported");

  q = add_sub_request();
  q.set_model_name("repeat_int32");
  expect_error(q, ::grpc::StatusCode::INVALID_ARGUMENT, "use ModelStreamInfer");
}

// -- ModelStreamInfer
// ------------------------------------------------------------------------------

using stream_type =
    ::grpc::ClientReaderWriter<inference::ModelInferRequest, inference::ModelStreamInferResponse>;

bool final_flag(const inference::ModelStreamInferResponse& r) {
  const auto& p = r.infer_response().parameters();
  const auto it = p.find("triton_final_response");
  return it != p.end() && it->second.bool_param();
}

/// repeat_int32 with IN = `values` (no delays, no wait).
inference::ModelInferRequest repeat_request(const std::vector<std::int32_t>& values) {
  inference::ModelInferRequest q;
  q.set_model_name("repeat_int32");
  const auto n = static_cast<std::int64_t>(values.size());
  add_input(q, "IN", "INT32", {n});
  add_input(q, "DELAY", "UINT32", {n});
  add_input(q, "WAIT", "UINT32", {1});
  for (const auto v : values) {
    q.mutable_inputs(0)->mutable_contents()->add_int_contents(v);
    q.mutable_inputs(1)->mutable_contents()->add_uint_contents(0);
  }
  q.mutable_inputs(2)->mutable_contents()->add_uint_contents(0);
  return q;
}

TEST(GrpcStream, EveryResponseOfADecoupledModelIsStreamed) {
  served s;
  context c;
  const auto stream = s.stub().ModelStreamInfer(&c);
  auto q = repeat_request({10, 20, 30});
  q.set_id("first");
  ASSERT_TRUE(stream->Write(q));
  std::vector<std::int32_t> values;
  inference::ModelStreamInferResponse r;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(stream->Read(&r));
    ASSERT_EQ(r.error_message(), "");
    EXPECT_EQ(r.infer_response().id(), "first");
    EXPECT_FALSE(final_flag(r));
    std::int32_t out = 0;
    ASSERT_EQ(r.infer_response().raw_output_contents(0).size(), sizeof(out));
    std::memcpy(&out, r.infer_response().raw_output_contents(0).data(), sizeof(out));
    values.push_back(out);
  }
  EXPECT_EQ(values, (std::vector<std::int32_t>{10, 20, 30}));

  // Asked for, the empty final response comes too, flagged final.
  q = repeat_request({7});
  (*q.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  ASSERT_TRUE(stream->Write(q));
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_FALSE(final_flag(r));
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_TRUE(final_flag(r));
  EXPECT_EQ(r.infer_response().outputs_size(), 0);
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&r));
  const auto st = stream->Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST(GrpcStream, AnErrorAnswersItsRequestAndTheStreamGoesOn) {
  served s;
  context c;
  const auto stream = s.stub().ModelStreamInfer(&c);
  auto bad = add_sub_request();
  bad.set_model_name("nope");
  bad.set_id("bad");
  ASSERT_TRUE(stream->Write(bad));
  inference::ModelStreamInferResponse r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(r.error_message(), "Request for unknown model: 'nope' is not found");
  EXPECT_EQ(r.infer_response().id(), "bad");
  auto wrong = add_sub_request();
  wrong.mutable_raw_input_contents()->RemoveLast();
  ASSERT_TRUE(stream->Write(wrong));
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_NE(r.error_message().find("raw_input_contents"), std::string::npos) << r.error_message();

  auto good = add_sub_request();
  good.set_id("good");
  ASSERT_TRUE(stream->Write(good));
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(r.error_message(), "");
  EXPECT_EQ(r.infer_response().id(), "good");
  EXPECT_TRUE(final_flag(r)); // a model that is not decoupled: one response, the final one
  EXPECT_EQ(floats_of(r.infer_response().raw_output_contents(0))[3], 4.0F);
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
}

TEST(GrpcStream, ASequenceKeepsItsOrder) {
  served s;
  context c;
  const auto stream = s.stub().ModelStreamInfer(&c);
  for (std::int32_t v = 1; v <= 20; ++v) {
    inference::ModelInferRequest q;
    q.set_model_name("accumulate");
    q.set_id(std::to_string(v));
    add_input(q, "INPUT", "INT32", {1, 1});
    q.mutable_inputs(0)->mutable_contents()->add_int_contents(v);
    (*q.mutable_parameters())["sequence_id"].set_string_param("stream-sequence");
    (*q.mutable_parameters())["sequence_start"].set_bool_param(v == 1);
    (*q.mutable_parameters())["sequence_end"].set_bool_param(v == 20);
    ASSERT_TRUE(stream->Write(q));
  }
  ASSERT_TRUE(stream->WritesDone());
  inference::ModelStreamInferResponse r;
  std::int32_t sum = 0;
  for (std::int32_t v = 1; v <= 20; ++v) {
    ASSERT_TRUE(stream->Read(&r));
    ASSERT_EQ(r.error_message(), "");
    EXPECT_EQ(r.infer_response().id(), std::to_string(v));
    sum += v;
    std::int32_t out = 0;
    std::memcpy(&out, r.infer_response().raw_output_contents(0).data(), sizeof(out));
    EXPECT_EQ(out, sum);
  }
  EXPECT_FALSE(stream->Read(&r));
  EXPECT_TRUE(stream->Finish().ok());
}

// -- statistics, repository ----------------------------------------------------------------------

TEST(GrpcServer, ModelStatisticsCountInferences) {
  served s;
  inference::ModelInferResponse r;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(infer(s, add_sub_request(), r).ok());
  }
  context c;
  inference::ModelStatisticsRequest q;
  q.set_name("add_sub");
  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(s.stub().ModelStatistics(&c, q, &stats).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).name(), "add_sub");
  EXPECT_EQ(stats.model_stats(0).version(), "1");
  EXPECT_EQ(stats.model_stats(0).inference_stats().success().count(), 3U);
  EXPECT_EQ(stats.model_stats(0).inference_count(), 3U);
  EXPECT_GT(stats.model_stats(0).last_inference(), 0U);
  EXPECT_GE(stats.model_stats(0).batch_stats_size(), 1);

  context all;
  inference::ModelStatisticsResponse every;
  ASSERT_TRUE(s.stub().ModelStatistics(&all, {}, &every).ok());
  EXPECT_EQ(every.model_stats_size(), 5); // add_sub, accumulate, repeat_int32, ident_bytes, knobs

  context unknown;
  q.set_name("nope");
  EXPECT_EQ(s.stub().ModelStatistics(&unknown, q, &stats).error_code(),
            ::grpc::StatusCode::NOT_FOUND);
}

TEST(GrpcServer, ModelStatisticsCarryTheAdaptiveBatcher) {
  served s;
  // add_sub served by the adaptive batcher (servekit's dynamic_batching.adaptive extension).
  const servekit::model_options config = servekit::load_model_config(R"({
    "name": "add_sub_adaptive", "backend": "add_sub", "max_batch_size": 8,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [16]},
              {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [16]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [16]},
               {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [16]}],
    "dynamic_batching": {"adaptive": {"target_latency_microseconds": 10000000}},
    "instance_group": [{"count": 2, "kind": "KIND_CPU"}]})");
  const auto added = s.models().add(
      "add_sub_adaptive", 1, [&] { return servekit_server::bundled_backends::make(config); });
  ASSERT_TRUE(added.ok()) << added.message();
  inference::ModelInferRequest q = add_sub_request();
  q.set_model_name("add_sub_adaptive");
  inference::ModelInferResponse r;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(infer(s, q, r).ok());
  }
  inference::ModelStatisticsRequest ask;
  ask.set_name("add_sub_adaptive");
  inference::ModelStatisticsResponse stats;
  // A batch reaches the controller when its instance next takes the core's lock, after its
  // responses went out: on a loaded machine an instance may not have come back yet, so ask until
  // all three arrived (at most 10 s).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  do {
    context c;
    ASSERT_TRUE(s.stub().ModelStatistics(&c, ask, &stats).ok());
    ASSERT_EQ(stats.model_stats_size(), 1);
    ASSERT_TRUE(stats.model_stats(0).has_adaptive_batching());
  } while (stats.model_stats(0).adaptive_batching().requests() < 3 &&
           std::chrono::steady_clock::now() < give_up);
  const auto& a = stats.model_stats(0).adaptive_batching();
  EXPECT_EQ(a.target_latency_us(), 10'000'000U);
  EXPECT_EQ(a.requests(), 3U);
  EXPECT_EQ(a.within_target(), 3U); // 10 s: every request meets it
  EXPECT_GE(a.wait_for(), 1);

  context plain;
  ask.set_name("add_sub");
  ASSERT_TRUE(s.stub().ModelStatistics(&plain, ask, &stats).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_FALSE(stats.model_stats(0).has_adaptive_batching());
}

TEST(GrpcServer, RepositoryIndex) {
  served s{served::default_options(), /*with_broken=*/true};
  context c;
  inference::RepositoryIndexResponse r;
  ASSERT_TRUE(s.stub().RepositoryIndex(&c, {}, &r).ok());
  bool add_sub_ready = false;
  bool broken_unavailable = false;
  for (const auto& m : r.models()) {
    add_sub_ready =
        add_sub_ready || (m.name() == "add_sub" && m.state() == "READY" && m.version() == "1");
    broken_unavailable =
        broken_unavailable || (m.name() == "broken" && m.state() != "READY" && !m.reason().empty());
  }
  EXPECT_TRUE(add_sub_ready);
  EXPECT_TRUE(broken_unavailable);
  context ready_only;
  inference::RepositoryIndexRequest q;
  q.set_ready(true);
  ASSERT_TRUE(s.stub().RepositoryIndex(&ready_only, q, &r).ok());
  for (const auto& m : r.models()) {
    EXPECT_EQ(m.state(), "READY") << m.name();
  }
}

TEST(GrpcServer, LoadAndUnloadNeedExplicitModelControl) {
  served s;
  context c;
  inference::RepositoryModelUnloadRequest q;
  q.set_model_name("add_sub");
  inference::RepositoryModelUnloadResponse r;
  const auto st = s.stub().RepositoryModelUnload(&c, q, &r);
  EXPECT_EQ(st.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(st.error_message(),
            "explicit model load / unload is not allowed if polling is enabled");
}

TEST(GrpcServer, UnloadAndLoadInExplicitMode) {
  auto options = served::default_options();
  options.model_control.mode = servekit::http::model_control_mode::explicit_;
  served s{options};
  const auto ready = [&] {
    context c;
    inference::ModelReadyRequest q;
    q.set_name("add_sub");
    inference::ModelReadyResponse r;
    EXPECT_TRUE(s.stub().ModelReady(&c, q, &r).ok());
    return r.ready();
  };
  {
    context c;
    inference::RepositoryModelUnloadRequest q;
    q.set_model_name("add_sub");
    (*q.mutable_parameters())["unload_dependents"].set_string_param("yes");
    inference::RepositoryModelUnloadResponse r;
    EXPECT_EQ(s.stub().RepositoryModelUnload(&c, q, &r).error_code(),
              ::grpc::StatusCode::INVALID_ARGUMENT);
    context c2;
    (*q.mutable_parameters())["unload_dependents"].set_bool_param(false);
    const auto st = s.stub().RepositoryModelUnload(&c2, q, &r);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_FALSE(ready());
  {
    context c;
    inference::RepositoryModelLoadRequest q;
    q.set_model_name("add_sub");
    inference::RepositoryModelLoadResponse r;
    const auto st = s.stub().RepositoryModelLoad(&c, q, &r);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_TRUE(ready());
  inference::ModelInferResponse out;
  EXPECT_TRUE(infer(s, add_sub_request(), out).ok());
}

// -- what is not implemented, and the server's own life ------------------------------------------

TEST(GrpcServer, UnimplementedRpcsSayWhatIsMissing) {
  served s;
  {
    context c;
    inference::SystemSharedMemoryStatusResponse r;
    const auto st = s.stub().SystemSharedMemoryStatus(&c, {}, &r);
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_NE(st.error_message().find("system shared memory"), std::string::npos);
  }
  {
    context c;
    inference::CudaSharedMemoryRegisterResponse r;
    const auto st = s.stub().CudaSharedMemoryRegister(&c, {}, &r);
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_NE(st.error_message().find("CUDA shared memory"), std::string::npos);
  }
  {
    context c;
    inference::TraceSettingResponse r;
    EXPECT_EQ(s.stub().TraceSetting(&c, {}, &r).error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
  }
  {
    context c;
    inference::LogSettingsResponse r;
    EXPECT_EQ(s.stub().LogSettings(&c, {}, &r).error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
  }
  {
    context c;
    auto stream = s.health().Watch(&c, {});
    ::grpc::health::v1::HealthCheckResponse r;
    EXPECT_FALSE(stream->Read(&r));
    EXPECT_EQ(stream->Finish().error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
  }
}

TEST(GrpcServer, CallsFromManyThreadsAreAllAnswered) {
  served s;
  std::vector<std::thread> clients;
  std::atomic<int> answered{0};
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        inference::ModelInferResponse r;
        if (infer(s, add_sub_request(), r).ok() && r.raw_output_contents_size() == 2) {
          answered.fetch_add(1);
        }
      }
    });
  }
  for (auto& c : clients) {
    c.join();
  }
  EXPECT_EQ(answered.load(), 100);
}

TEST(GrpcServer, StopAnswersTheCallsInFlight) {
  archetypes::gate entered;
  archetypes::gate release;
  held_entered = &entered;
  held_release = &release;
  {
    served s;
    inference::ModelInferRequest q;
    q.set_model_name("knobs");
    add_input(q, "X", "FP32", {1, 4});
    q.add_raw_input_contents(raw_floats({1, 2, 3, 4}));
    (*q.mutable_parameters())["hold"].set_bool_param(true);
    inference::ModelInferResponse r;
    ::grpc::Status st;
    std::thread client{[&] { st = infer(s, q, r); }};
    ASSERT_TRUE(entered.wait()); // the call is in the model now
    s.server().stop();
    release.open();
    client.join();
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(floats_of(r.raw_output_contents(0)), (std::vector<float>{1, 2, 3, 4}));
    // ~served joins run(), which returns once the call is released.
  }
  held_entered = nullptr;
  held_release = nullptr;
}

TEST(GrpcServer, PastTheExitTimeoutACallIsCancelledAndItsModelWaitedFor) {
  archetypes::gate entered;
  archetypes::gate release;
  held_entered = &entered;
  held_release = &release;
  {
    auto options = served::default_options();
    options.exit_timeout = std::chrono::milliseconds{0};
    served s{options};
    inference::ModelInferRequest q;
    q.set_model_name("knobs");
    add_input(q, "X", "FP32", {1, 4});
    q.add_raw_input_contents(raw_floats({1, 2, 3, 4}));
    (*q.mutable_parameters())["hold"].set_bool_param(true);
    inference::ModelInferResponse r;
    ::grpc::Status st;
    std::thread client{[&] { st = infer(s, q, r); }};
    ASSERT_TRUE(entered.wait());
    s.server().stop();
    client.join(); // gRPC cancelled the call at once
    EXPECT_FALSE(st.ok());
    // The model still answers (into the cancelled call) after the client has gone; run() must
    // keep the queues until then.
    release.open();
  }
  held_entered = nullptr;
  held_release = nullptr;
}

TEST(GrpcServer, APortInUseIsAnError) {
  served s;
  servekit::model_repository empty{};
  auto options = served::default_options();
  options.port = s.server().port();
  EXPECT_THROW(servekit::grpc::server(empty, options), std::system_error);
}

TEST(GrpcServer, StopBeforeRunReturnsAtOnce) {
  servekit::model_repository empty{};
  servekit::grpc::server server{empty, served::default_options()};
  server.stop();
  server.run();
  SUCCEED();
}

} // namespace server_test
