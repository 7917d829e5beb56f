// End to end: request parameters reach a backend and the parameters it sets reach the client,
// through servekit::http::server on a loopback port, for /infer, /generate and
// /generate_stream (Triton's parameters extension).
#include "http_client.hpp"

#include <servekit/backend/backend.hpp>
#include <servekit/backend/response_sender.hpp>
#include <servekit/http/server.hpp>
#include <servekit/repository.hpp>
#include <servekit/runtime.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace parameters_e2e_test {

using json = nlohmann::json;
using servekit::data_type;

/// Y = X * "scale" (a number, default 1); answers with the parameters "tokens" (the request's
/// "max_tokens", default 16), "seen" (the names of the parameters it got, in order) and "user"
/// (the request's, when set). A parameter of the wrong type fails that request with the list's
/// message.
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
      std::string seen;
      for (const auto& p : req.parameters) {
        seen += seen.empty() ? "" : ",";
        seen += p.name;
      }
      const servekit::tensor& x = req.input("X");
      auto& y = res.add_output("Y", data_type::fp32, x.shape);
      std::transform(x.values<float>().begin(), x.values<float>().end(), y.values<float>().begin(),
                     [scale](float v) { return static_cast<float>(v * scale); });
      res.parameters.set("tokens", max_tokens);
      res.parameters.set("seen", seen);
      if (const auto user = req.parameters.get<std::string_view>("user")) {
        res.parameters.set("user", *user);
      }
    }
  }
};

/// Decoupled: sends "count" (default 2) responses with N = 0, 1, ..., then a final response
/// with no outputs and the parameters "finish_reason" and "tokens".
struct counter_backend {
  static constexpr bool decoupled = true;
  static constexpr servekit::tensor_declaration inputs[] = {{"X", data_type::int32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"N", data_type::int32, {1}}};

  explicit counter_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      std::int32_t count = 2;
      if (servekit::status s = b.request(i).parameters.get("count", count); !s.ok()) {
        b.response(i).status = std::move(s);
        continue;
      }
      servekit::response_sender sender = b.take_sender(i);
      for (std::int32_t n = 0; n < count; ++n) {
        servekit::response r;
        r.add_output("N", data_type::int32, {1}).values<std::int32_t>()[0] = n;
        (void)sender.send(std::move(r));
      }
      servekit::response last;
      last.parameters.set("finish_reason", "length");
      last.parameters.set("tokens", count);
      (void)sender.send_final(std::move(last));
    }
  }
};

servekit::model_options options_named(std::string name) {
  servekit::model_options o;
  o.name = std::move(name);
  return o;
}

/// Both models, registered with a repository without folders, served on a free loopback port.
class served_knobs {
public:
  served_knobs() {
    auto added = repository_.add("knobs", 1, [] {
      return servekit::any_model::make<servekit::model<knob_backend>>(options_named("knobs"));
    });
    EXPECT_TRUE(added.ok()) << added.message();
    added = repository_.add("counter", 1, [] {
      return servekit::any_model::make<servekit::model<counter_backend>>(options_named("counter"));
    });
    EXPECT_TRUE(added.ok()) << added.message();
    servekit::http::server_options o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.thread_count = 2;
    server_.emplace(repository_, std::move(o));
    thread_ = std::thread{[this] { server_->run(); }};
  }
  served_knobs(const served_knobs&) = delete;
  served_knobs& operator=(const served_knobs&) = delete;
  ~served_knobs() {
    server_->stop();
    thread_.join();
    server_.reset();
  }

  [[nodiscard]] test_http::client client() const { return {"127.0.0.1", server_->port()}; }

private:
  servekit::model_repository repository_;
  std::optional<servekit::http::server> server_;
  std::thread thread_;
};

std::string infer_body(std::string_view parameters) {
  std::string body = R"({"inputs": [{"name": "X", "shape": [1, 4], "datatype": "FP32",
                                     "data": [1, 2, 3, 4]}])";
  if (!parameters.empty()) {
    body += R"(, "parameters": )";
    body += parameters;
  }
  body += '}';
  return body;
}

/// The JSON of each "data: " event of a server-sent event stream.
std::vector<json> events_of(const std::string& body) {
  std::vector<json> out;
  std::size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const std::size_t end = body.find("\n\n", at);
    out.push_back(json::parse(body.substr(at + 6, end - at - 6)));
    at = end;
  }
  return out;
}

TEST(RequestParameters, ReachTheBackendAndItsParametersReachTheClient) {
  served_knobs s;
  auto c = s.client();
  const auto r =
      c.post("/v2/models/knobs/infer", infer_body(R"({"scale": 2.5, "priority": 1, "max_tokens": 3,
                                       "timeout": 1000000, "user": "ann"})"));
  ASSERT_EQ(r.status, 200U) << r.body;
  const json j = json::parse(r.body);
  // The reserved parameters set the request's fields; the backend sees the others, in order.
  EXPECT_EQ(j.at("parameters"), json::parse(R"({"tokens": 3, "seen": "scale,max_tokens,user",
                                                "user": "ann"})"));
  EXPECT_EQ(j.at("outputs")[0].at("data"), json::parse("[2.5, 5.0, 7.5, 10.0]"));

  // Without parameters the backend's defaults hold.
  const auto plain = c.post("/v2/models/knobs/infer", infer_body(""));
  ASSERT_EQ(plain.status, 200U) << plain.body;
  EXPECT_EQ(json::parse(plain.body).at("parameters"), json::parse(R"({"tokens": 16, "seen": ""})"));
}

TEST(RequestParameters, AWrongTypeFailsTheRequestNamingTheParameter) {
  served_knobs s;
  auto c = s.client();
  const auto wrong = c.post("/v2/models/knobs/infer", infer_body(R"({"max_tokens": "3"})"));
  EXPECT_EQ(wrong.status, 400U) << wrong.body;
  EXPECT_EQ(json::parse(wrong.body).at("error"),
            "parameter 'max_tokens' is a string, expected an integer");

  // A nested value is refused by the decoder, before the model sees the request.
  const auto nested = c.post("/v2/models/knobs/infer", infer_body(R"({"stop": {"a": 1}})"));
  EXPECT_EQ(nested.status, 400U) << nested.body;
  EXPECT_NE(nested.body.find("parameter 'stop' has invalid type (an object)"), std::string::npos)
      << nested.body;
}

TEST(RequestParameters, GenerateTakesThemAndAnswersWithThemAsTopLevelKeys) {
  served_knobs s;
  auto c = s.client();
  const auto r = c.post("/v2/models/knobs/generate",
                        R"({"X": [1, 2, 3, 4], "parameters": {"scale": 2, "max_tokens": 5}})");
  ASSERT_EQ(r.status, 200U) << r.body;
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"model_name": "knobs", "model_version": "1",
                                                 "tokens": 5, "seen": "max_tokens,scale",
                                                 "Y": [2.0, 4.0, 6.0, 8.0]})"));

  const auto stream = c.post("/v2/models/knobs/generate_stream",
                             R"({"X": [1, 1, 1, 1], "parameters": {"user": "bo"}})");
  ASSERT_EQ(stream.status, 200U) << stream.body;
  const auto events = events_of(stream.body);
  ASSERT_EQ(events.size(), 1U) << stream.body;
  EXPECT_EQ(events[0].at("user"), "bo");
  EXPECT_EQ(events[0].at("tokens"), 16);
}

TEST(RequestParameters, AFinalResponseWithOnlyParametersIsSent) {
  served_knobs s;
  auto c = s.client();
  // Streamed: the final response has no outputs, but its parameters make it an event.
  const auto stream =
      c.post("/v2/models/counter/generate_stream", R"({"X": [0], "parameters": {"count": 2}})");
  ASSERT_EQ(stream.status, 200U) << stream.body;
  const auto events = events_of(stream.body);
  ASSERT_EQ(events.size(), 3U) << stream.body;
  EXPECT_EQ(events[0].at("N"), 0);
  EXPECT_EQ(events[1].at("N"), 1);
  EXPECT_EQ(events[2], json::parse(R"({"model_name": "counter", "model_version": "1",
                                       "finish_reason": "length", "tokens": 2})"));

  // /generate: the one response is that final one.
  const auto one =
      c.post("/v2/models/counter/generate", R"({"X": [0], "parameters": {"count": 0}})");
  ASSERT_EQ(one.status, 200U) << one.body;
  EXPECT_EQ(json::parse(one.body), json::parse(R"({"model_name": "counter", "model_version": "1",
                                                   "finish_reason": "length", "tokens": 0})"));
}

} // namespace parameters_e2e_test
