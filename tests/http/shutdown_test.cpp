// Shutdown keeps its promise: after stop(), the server answers what it can inside its exit
// timeout, then answers everything still owed with `unavailable` "server is shutting down"
// (requests queued behind a blocked instance, backlogged sequence requests, a stream whose
// backend never finishes) and run() returns; shutdown_models then bounds the wait for a backend
// stuck in execute. In process, on a loopback port, with an exit timeout of 300 ms.
#include "archetypes/temp_repository.hpp"
#include "http_client.hpp"

#include <servekit/backend/backend.hpp>
#include <servekit/http/server.hpp>
#include <servekit/repository/backend_list.hpp>
#include <servekit/repository/model_repository.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace shutdown_test {

using json = nlohmann::json;
using test_http::reply;
using namespace std::chrono_literals;

/// Where the blocking backends wait until the test lets them go.
struct block {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  int waiting = 0;

  void pass() {
    std::unique_lock lock{mutex};
    ++waiting;
    cv.notify_all();
    cv.wait(lock, [this] { return open; });
    --waiting;
  }
  bool wait_for_waiters(int n) {
    std::unique_lock lock{mutex};
    return cv.wait_for(lock, 10s, [&] { return waiting >= n; });
  }
  void release() {
    {
      const std::lock_guard lock{mutex};
      open = true;
    }
    cv.notify_all();
  }
};
block& the_block() {
  static block b;
  return b;
}

/// Waits at the block, then copies IN to OUT: a backend stuck in execute.
struct blocking_backend {
  static constexpr std::int32_t max_batch_size = 1;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"IN", servekit::data_type::int32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::int32, {1}}};

  explicit blocking_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    the_block().pass();
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("IN");
      auto& out = b.response(i).add_output("OUT", servekit::data_type::int32, in.shape);
      out.values<std::int32_t>()[0] = in.values<std::int32_t>()[0];
    }
  }
};

/// Decoupled: sends one partial response, then waits at the block (a stream that never ends).
struct endless_stream_backend {
  static constexpr bool decoupled = true;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"IN", servekit::data_type::int32, {-1}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::int32, {1}}};

  explicit endless_stream_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      servekit::response r;
      r.add_output("OUT", servekit::data_type::int32, {1}).values<std::int32_t>()[0] = 1;
      static_cast<void>(b.send_partial(i, std::move(r)));
    }
    the_block().pass();
  }
};

using test_backends =
    servekit::backend_list<servekit::named_backend<"blocking", blocking_backend>,
                           servekit::named_backend<"endless", endless_stream_backend>>;

void write_models(const archetypes::temp_repository& files) {
  files.write("blocked", R"({"name": "blocked", "backend": "blocking", "max_batch_size": 0,
    "instance_group": [{"count": 1, "kind": "KIND_CPU"}]})");
  files.write("sequence", R"({"name": "sequence", "backend": "blocking", "max_batch_size": 1,
    "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
    "sequence_batching": {"max_sequence_idle_microseconds": 60000000}})");
  files.write("stream", R"({"name": "stream", "backend": "endless", "max_batch_size": 0,
    "model_transaction_policy": {"decoupled": true}})");
}

/// One INT32 value; a batching model's (the sequence model's) input has a batch dimension.
std::string infer_body(int value, const json& parameters = json::object()) {
  const json shape = parameters.empty() ? json::array({1}) : json::array({1, 1});
  json body{
      {"inputs", {{{"name", "IN"}, {"datatype", "INT32"}, {"shape", shape}, {"data", {value}}}}}};
  if (!parameters.empty()) {
    body["parameters"] = parameters;
  }
  return body.dump();
}

bool eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) {
      return false;
    }
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

void expect_shutting_down(const reply& r, const std::string& who) {
  EXPECT_EQ(r.status, 503U) << who << ": " << r.body << r.error;
  EXPECT_NE(r.body.find("server is shutting down"), std::string::npos) << who << ": " << r.body;
}

TEST(Shutdown, PastTheExitTimeoutEveryQueuedRequestStreamAndSequenceIsAnsweredAndRunReturns) {
  archetypes::temp_repository files;
  write_models(files);
  servekit::model_repository repository{files.root(), test_backends{}};
  for (const auto& e : repository.load_all()) {
    ASSERT_EQ(e.state, servekit::model_ready_state::ready) << e.name << ": " << e.reason;
  }
  constexpr auto exit_timeout = 300ms;
  servekit::http::server_options options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.thread_count = 2;
  options.exit_timeout = exit_timeout;
  servekit::http::server server{repository, options};
  std::thread runner{[&] { server.run(); }};
  const auto port = server.port();
  const auto pending = [&](const char* model) {
    return repository.find(model)->model().statistics().pending_request_count;
  };

  // Each client on its own connection and thread; `replies[i]` is client i's answer.
  std::vector<reply> replies(7);
  std::vector<std::thread> clients;
  const auto send = [&](std::size_t i, std::string target, std::string body) {
    clients.emplace_back([&, i, target = std::move(target), body = std::move(body)] {
      test_http::client c{"127.0.0.1", port};
      replies[i] = c.post(target, body);
    });
  };
  // The blocked model: one request in execute, two queued behind it.
  send(0, "/v2/models/blocked/infer", infer_body(0));
  ASSERT_TRUE(the_block().wait_for_waiters(1));
  send(1, "/v2/models/blocked/infer", infer_body(1));
  send(2, "/v2/models/blocked/infer", infer_body(2));
  ASSERT_TRUE(eventually([&] { return pending("blocked") == 2; }));
  // The sequence model (one slot): sequence 1 executes, its next request waits, sequence 2 is
  // backlogged.
  send(3, "/v2/models/sequence/infer",
       infer_body(3, {{"sequence_id", 1}, {"sequence_start", true}}));
  ASSERT_TRUE(the_block().wait_for_waiters(2));
  send(4, "/v2/models/sequence/infer", infer_body(4, {{"sequence_id", 1}}));
  send(5, "/v2/models/sequence/infer",
       infer_body(5, {{"sequence_id", 2}, {"sequence_start", true}}));
  ASSERT_TRUE(eventually([&] { return pending("sequence") == 2; }));
  // A stream whose backend never finishes.
  send(6, "/v2/models/stream/generate_stream", R"({"IN": [1]})");
  ASSERT_TRUE(the_block().wait_for_waiters(3));

  const auto stopped = std::chrono::steady_clock::now();
  server.stop();
  runner.join();
  const auto ran = std::chrono::steady_clock::now() - stopped;
  EXPECT_LT(ran, exit_timeout + 1500ms) << "run() returned only after a long wait";
  EXPECT_GE(ran, exit_timeout) << "the exit timeout was not waited for";
  for (auto& c : clients) {
    c.join();
  }

  expect_shutting_down(replies[1], "queued behind a blocked instance");
  expect_shutting_down(replies[2], "queued behind a blocked instance");
  expect_shutting_down(replies[4], "queued in an open sequence");
  expect_shutting_down(replies[5], "backlogged sequence");
  EXPECT_EQ(replies[6].status, 200U) << replies[6].error;
  EXPECT_NE(replies[6].body.find("server is shutting down"), std::string::npos)
      << "the stream ends with an error event: " << replies[6].body;

  // Three backends never return from execute: the shutdown gives up after its wait...
  const auto aborted = std::chrono::steady_clock::now();
  EXPECT_FALSE(servekit::shutdown_models(repository, servekit::shutdown_mode::abort, 200ms));
  EXPECT_LT(std::chrono::steady_clock::now() - aborted, 1s);
  // ...and once they do return, it finishes (so the repository can go).
  the_block().release();
  EXPECT_TRUE(servekit::shutdown_models(repository, servekit::shutdown_mode::abort, 10s));
}

} // namespace shutdown_test
