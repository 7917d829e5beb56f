// Cancellation from the network: an HTTP client that leaves cancels its request through the
// model's in-process path. A queued /infer request whose client closes its connection is
// answered `cancelled` (counted as a CANCELED failure) and never reaches execute(); a
// generate_stream whose client goes away stops its decoupled model at the next response. The
// server runs in-process on loopback; the backend holding the instance busy is a gate the test
// opens, so nothing depends on timing.
#include "archetypes/gated_backend.hpp"
#include "http_client.hpp"
#include "raw_client.hpp"

#include "bundled_backends.hpp"

#include <servekit/backend/backend.hpp>
#include <servekit/http/server.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/repository/model_repository.hpp>

#include <gtest/gtest.h>

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include <sys/socket.h>
#include <unistd.h>

namespace network_cancellation_test {

namespace fs = std::filesystem;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

using archetypes::gated;
using archetypes::gated_backend;
using archetypes::gated_config;
using archetypes::gated_state;

using backends =
    servekit_server::bundled_backends::with<servekit::named_backend<"gated", gated_backend>>;

/// A repository of `gated` and the bundled repeat_int32, and the server over it.
class cancellation_server {
public:
  cancellation_server() : path_{make_folder()}, repository_{path_, backends{}} {
    gated = &state_;
    repository_.load_all();
    servekit::http::server_options options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.thread_count = 2;
    server_.emplace(repository_, std::move(options));
    thread_ = std::thread{[this] { server_->run(); }};
  }
  cancellation_server(const cancellation_server&) = delete;
  cancellation_server& operator=(const cancellation_server&) = delete;
  ~cancellation_server() {
    state_.open.open();
    server_->stop();
    thread_.join();
    gated = nullptr;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }

  [[nodiscard]] std::uint16_t port() const { return server_->port(); }
  [[nodiscard]] gated_state& state() noexcept { return state_; }
  [[nodiscard]] servekit::statistics_snapshot statistics(std::string_view model) const {
    const auto m = repository_.find(model);
    return m ? m->model().statistics() : servekit::statistics_snapshot{};
  }

private:
  static fs::path make_folder() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    auto p = fs::temp_directory_path() /
             ("servekit_cancel_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(p);
    fs::create_directories(p / "gated");
    std::ofstream{p / "gated" / "config.json"} << gated_config;
    fs::copy(fs::path{SERVEKIT_SOURCE_DIR} / "examples" / "models" / "repeat_int32",
             p / "repeat_int32", fs::copy_options::recursive);
    return p;
  }

  gated_state state_;
  fs::path path_;
  servekit::model_repository repository_;
  std::optional<servekit::http::server> server_;
  std::thread thread_;
};

using test_http::eventually;
using test_http::raw_client;

constexpr std::string_view one_value =
    R"({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [7]}]})";

TEST(NetworkCancellation, AQueuedInferWhoseClientLeavesIsCancelledAndNeverExecutes) {
  cancellation_server server;
  // The first request takes the model's only instance, which waits at the gate.
  raw_client first{server.port()};
  ASSERT_TRUE(first.post("/v2/models/gated/infer", one_value));
  ASSERT_TRUE(eventually([&] { return server.state().executions.load() == 1; }));

  // The second waits in the queue; then its client leaves.
  raw_client second{server.port()};
  ASSERT_TRUE(second.post("/v2/models/gated/infer", one_value));
  ASSERT_TRUE(eventually([&] { return server.statistics("gated").pending_request_count == 1; }));
  second.leave();

  // Answered `cancelled` from the queue, counted as Triton counts it.
  ASSERT_TRUE(eventually([&] {
    return server.statistics("gated").failed_by(servekit::failure_reason::canceled) == 1;
  }));
  // The pending count drops once the answer is delivered, just after the failure is counted.
  EXPECT_TRUE(eventually([&] { return server.statistics("gated").pending_request_count == 0; }));

  // The first is answered; the second never reaches execute().
  server.state().open.open();
  ASSERT_TRUE(first.read_until("\"OUTPUT0\""));
  EXPECT_NE(first.received().find("HTTP/1.1 200"), std::string::npos) << first.received();
  const auto stats = server.statistics("gated");
  EXPECT_EQ(stats.execution_count, 1U);
  EXPECT_EQ(stats.inference_count, 1U);
  EXPECT_EQ(server.state().requests_executed.load(), 1);

  // The server goes on serving.
  test_http::client c{"127.0.0.1", server.port()};
  EXPECT_EQ(c.post("/v2/models/gated/infer", std::string{one_value}).status, 200U);
}

TEST(NetworkCancellation, AStreamWhoseClientLeavesStopsItsDecoupledModel) {
  cancellation_server server;
  // Five responses 300 ms apart; the client reads the first, then leaves.
  raw_client client{server.port()};
  ASSERT_TRUE(client.post("/v2/models/repeat_int32/generate_stream",
                          R"({"IN": [1, 2, 3, 4, 5], "DELAY": [0, 300, 300, 300, 300],
                              "WAIT": [0]})"));
  ASSERT_TRUE(client.read_until("\"IDX\":0")) << client.received();
  client.leave();

  // The model stops at its next response with a final `cancelled` error, instead of sending
  // four more responses into a closed connection.
  const auto failed = [&] {
    std::uint64_t n = 0;
    for (const auto& r : server.statistics("repeat_int32").response_stats) {
      n += r.fail.count;
    }
    return n;
  };
  ASSERT_TRUE(eventually([&] { return failed() == 1; }));
  std::uint64_t sent = 0;
  for (const auto& r : server.statistics("repeat_int32").response_stats) {
    sent += r.success.count;
  }
  EXPECT_LT(sent, 5U) << "the model sent every response: the stream was not cancelled";
}

} // namespace network_cancellation_test
