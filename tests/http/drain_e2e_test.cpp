// Draining and routing headers, end to end through the HTTP server in process: a drain (POST
// /v2/admin/drain or begin_drain) turns readiness false at once, keeps answering requests and
// open sequences for the grace period, refuses a new sequence naming why, then stops; the
// sequence id and priority read from the headers a proxy hashes on. On a loopback port.
#include "archetypes/temp_repository.hpp"
#include "http_client.hpp"

#include <servekit/backend/backend.hpp>
#include <servekit/http/server.hpp>
#include <servekit/repository/backend_list.hpp>
#include <servekit/repository/model_repository.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <thread>

namespace drain_e2e_test {

using json = nlohmann::json;
using namespace std::chrono_literals;

/// OUT = the running sum of IN over a sequence (IN alone outside one): what a replica that did
/// not see the sequence's earlier requests would get wrong.
struct running_sum_backend {
  static constexpr std::int32_t max_batch_size = 1;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"IN", servekit::data_type::int32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::int32, {1}}};

  explicit running_sum_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& r = b.request(i);
      const auto key = r.sequence_id.to_string();
      if (r.sequence_start) {
        sums[key] = 0;
      }
      const auto& in = *r.find_input("IN");
      const std::int32_t value = in.values<std::int32_t>()[0];
      std::int32_t& sum = sums[key];
      sum += value;
      auto& out = b.response(i).add_output("OUT", servekit::data_type::int32, in.shape);
      out.values<std::int32_t>()[0] = r.sequence_id.empty() ? value : sum;
    }
  }
  std::map<std::string, std::int32_t> sums;
};

using test_backends = servekit::backend_list<servekit::named_backend<"sum", running_sum_backend>>;

std::string infer_body(int value, const json& parameters = json::object()) {
  json body{
      {"inputs", {{{"name", "IN"}, {"datatype", "INT32"}, {"shape", {1, 1}}, {"data", {value}}}}}};
  if (!parameters.empty()) {
    body["parameters"] = parameters;
  }
  return body.dump();
}

int out_of(const test_http::reply& r) {
  return json::parse(r.body).at("outputs").at(0).at("data").at(0).get<int>();
}

/// The sequence model `sum` and the stateless `plain` (the same backend), loaded.
struct loaded_models {
  archetypes::temp_repository files;
  servekit::model_repository repository{files.root(), test_backends{}};

  loaded_models() {
    files.write("sum", R"({"name": "sum", "backend": "sum", "max_batch_size": 1,
      "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
      "sequence_batching": {"max_sequence_idle_microseconds": 60000000}})");
    files.write("plain", R"({"name": "plain", "backend": "sum", "max_batch_size": 1})");
    for (const auto& e : repository.load_all()) {
      EXPECT_EQ(e.state, servekit::model_ready_state::ready) << e.name << ": " << e.reason;
    }
  }
};

/// `options` on a free loopback port with `threads` I/O threads.
servekit::http::server_options on_loopback(servekit::http::server_options options,
                                           std::size_t threads) {
  options.host = "127.0.0.1";
  options.port = 0;
  options.thread_count = threads;
  return options;
}

TEST(Drain, ReadinessTurnsFalseOpenSequencesGoOnNewOnesAreRefusedThenTheServerStops) {
  servekit::http::server_options options;
  options.drain_grace = 400ms;
  loaded_models models;
  servekit::http::server server{models.repository, on_loopback(options, 2)};
  std::atomic<bool> returned{false};
  std::thread runner{[&] {
    server.run();
    returned = true;
  }};
  test_http::client c{"127.0.0.1", server.port()};

  EXPECT_EQ(c.get("/v2/health/ready").status, 200U);
  const auto first =
      c.post("/v2/models/sum/infer", infer_body(5, {{"sequence_id", 7}, {"sequence_start", true}}));
  ASSERT_EQ(first.status, 200U) << first.body;

  const auto drain = c.post("/v2/admin/drain");
  const auto drained_at = std::chrono::steady_clock::now();
  ASSERT_EQ(drain.status, 200U) << drain.body;
  const auto said = json::parse(drain.body);
  EXPECT_EQ(said.at("draining"), true);
  EXPECT_EQ(said.at("reason"), "POST /v2/admin/drain");
  EXPECT_DOUBLE_EQ(said.at("grace_secs").get<double>(), 0.4);

  // During the grace period: not ready, but every request is still answered...
  EXPECT_EQ(c.get("/v2/health/ready").status, 400U);
  EXPECT_EQ(c.get("/v2/health/live").status, 200U);
  const auto stateless = c.post("/v2/models/plain/infer", infer_body(3));
  EXPECT_EQ(stateless.status, 200U) << stateless.body;
  const auto next = c.post("/v2/models/sum/infer", infer_body(4, {{"sequence_id", 7}}));
  ASSERT_EQ(next.status, 200U) << next.body;
  EXPECT_EQ(out_of(next), 9) << "the open sequence keeps its state";
  // ...except one that would start a sequence the replica could not finish.
  const auto fresh =
      c.post("/v2/models/sum/infer", infer_body(1, {{"sequence_id", 8}, {"sequence_start", true}}));
  EXPECT_EQ(fresh.status, 503U) << fresh.body;
  EXPECT_EQ(json::parse(fresh.body).at("error"),
            "the server is draining (POST /v2/admin/drain): model 'sum' starts no new sequence "
            "here (sequence 8); start it on another replica");
  // ...and one of a sequence another replica holds (started there because this one refused
  // its START, while a proxy's hash still sends its requests here): 503, for the proxy to retry.
  const auto elsewhere = c.post("/v2/models/sum/infer", infer_body(1, {{"sequence_id", 8}}));
  EXPECT_EQ(elsewhere.status, 503U) << elsewhere.body;
  EXPECT_EQ(json::parse(elsewhere.body).at("error"),
            "the server is draining (POST /v2/admin/drain): inference request for sequence 8 to "
            "model 'sum' must specify the START flag on the first request of the sequence; send "
            "it to the replica that holds the sequence");
  // A second drain changes nothing.
  EXPECT_EQ(json::parse(c.post("/v2/admin/drain").body).at("reason"), "POST /v2/admin/drain");

  // Then the server stops by itself: run() returns.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!returned && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_TRUE(returned) << "run() did not return after the grace period";
  EXPECT_GE(std::chrono::steady_clock::now() - drained_at, 400ms) << "stopped before the grace";
  server.stop();
  runner.join();
}

TEST(Drain, StopDuringTheGracePeriodStopsAtOnce) {
  loaded_models models;
  servekit::http::server_options options;
  options.drain_grace = 3600s; // never reached: stop() must not wait for it
  servekit::http::server server{models.repository, on_loopback(options, 1)};
  std::thread runner{[&] { server.run(); }};
  server.begin_drain("test");
  EXPECT_TRUE(server.options().drain->draining());
  server.stop();
  runner.join(); // returns: the drain timer does not keep run() going
  EXPECT_EQ(server.options().drain->reason(), "test");
}

TEST(RoutingHeadersE2e, TheSequenceIdAndPriorityComeFromTheHeadersAProxyHashesOn) {
  loaded_models models;
  servekit::http::server_options options;
  options.routing.sequence_id = "X-Sequence-Id";
  options.routing.priority = "x-priority";
  servekit::http::server server{models.repository, on_loopback(options, 1)};
  std::thread runner{[&] { server.run(); }};
  test_http::client c{"127.0.0.1", server.port()};

  // The id in the header only (HTTP header names are case-insensitive).
  const auto a = c.post("/v2/models/sum/infer", infer_body(2, {{"sequence_start", true}}),
                        {{"x-sequence-id", "user-1"}});
  ASSERT_EQ(a.status, 200U) << a.body;
  const auto b = c.post("/v2/models/sum/infer", infer_body(5), {{"X-SEQUENCE-ID", "user-1"}});
  ASSERT_EQ(b.status, 200U) << b.body;
  EXPECT_EQ(out_of(b), 7);
  // In both places, agreeing.
  const auto both = c.post("/v2/models/sum/infer", infer_body(1, {{"sequence_id", "user-1"}}),
                           {{"x-sequence-id", "user-1"}, {"x-priority", "1"}});
  ASSERT_EQ(both.status, 200U) << both.body;
  EXPECT_EQ(out_of(both), 8);
  // Disagreeing: 400 naming both, and the sequence is untouched.
  const auto clash = c.post("/v2/models/sum/infer", infer_body(100, {{"sequence_id", "user-2"}}),
                            {{"x-sequence-id", "user-1"}});
  EXPECT_EQ(clash.status, 400U);
  EXPECT_EQ(json::parse(clash.body).at("error"),
            "the sequence id of header 'X-Sequence-Id' (user-1) and of the request's parameters "
            "(user-2) disagree");
  const auto bad_priority =
      c.post("/v2/models/sum/infer", infer_body(100), {{"x-priority", "urgent"}});
  EXPECT_EQ(bad_priority.status, 400U);
  EXPECT_NE(bad_priority.body.find("expected an unsigned integer priority"), std::string::npos);
  const auto last = c.post("/v2/models/sum/infer", infer_body(1, {{"sequence_end", true}}),
                           {{"x-sequence-id", "user-1"}});
  ASSERT_EQ(last.status, 200U) << last.body;
  EXPECT_EQ(out_of(last), 9);
  server.stop();
  runner.join();
}

} // namespace drain_e2e_test
