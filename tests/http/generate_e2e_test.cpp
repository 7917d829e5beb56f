// End to end: Triton's generate extension (POST .../generate and .../generate_stream) and /infer
// on a decoupled model, through servekit::http::server on a loopback port. A decoupled test
// backend (test_repeat) answers one request with one partial response per value of its input
// and an empty final; a gate lets a test hold it mid-stream (to disconnect the client).
#include "archetypes/temp_repository.hpp"
#include "http_client.hpp"

#include "backends/identity.hpp"
#include "repeat/repeat_backend.hpp"

#include <servekit/backend/backend.hpp>
#include <servekit/http/server.hpp>
#include <servekit/repository/backend_list.hpp>
#include <servekit/repository/model_repository.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace generate_e2e_test {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test_http::reply;

/// Holds test_repeat mid-request (after its first response) while closed.
struct gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = true;
  int waiting = 0;

  void close() {
    const std::lock_guard lock{mutex};
    open = false;
  }
  void release() {
    {
      const std::lock_guard lock{mutex};
      open = true;
    }
    cv.notify_all();
  }
  void pass() {
    std::unique_lock lock{mutex};
    ++waiting;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds{30}, [this] { return open; });
    --waiting;
  }
  bool wait_for_waiter() {
    std::unique_lock lock{mutex};
    return cv.wait_for(lock, std::chrono::seconds{30}, [this] { return waiting > 0; });
  }
};

gate& repeat_gate() {
  static gate g;
  return g;
}

/// Decoupled: request IN = [v0, v1, ...] gets one partial response OUT = [vk] per value, then the
/// model's empty final response. A negative value fails the request there (an error final after
/// the partials sent so far); the value 1000 waits at the gate after the first response.
class test_repeat_backend {
public:
  static constexpr bool decoupled = true;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"IN", servekit::data_type::int32, {-1}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::int32, {1}}};

  explicit test_repeat_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::tensor* in = b.request(i).find_input("IN");
      const auto values = in->values<std::int32_t>();
      for (std::size_t k = 0; k < values.size(); ++k) {
        if (values[k] < 0) {
          b.response(i) = servekit::response::failure(
              servekit::invalid_argument("negative value at " + std::to_string(k)));
          break;
        }
        servekit::response r;
        r.add_output("OUT", servekit::data_type::int32, {1}).values<std::int32_t>()[0] = values[k];
        (void)b.send_partial(i, std::move(r));
        if (values[k] == 1000 && k == 0) {
          repeat_gate().pass();
        }
      }
    }
  }
};

/// The senders test_hold took: it never answers, and nothing bounds the wait (no
/// final_response_timeout), the case a server's exit timeout must still end.
struct held_senders {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<servekit::response_sender> senders;

  bool wait_for_one() {
    std::unique_lock lock{mutex};
    return cv.wait_for(lock, std::chrono::seconds{30}, [this] { return !senders.empty(); });
  }
};
held_senders& held() {
  static held_senders h;
  return h;
}

/// Decoupled: takes each request's sender and never sends on it.
class test_hold_backend {
public:
  static constexpr bool decoupled = true;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"IN", servekit::data_type::int32, {-1}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::int32, {1}}};

  explicit test_hold_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    auto& h = held();
    const std::lock_guard lock{h.mutex};
    for (std::size_t i = 0; i < b.size(); ++i) {
      h.senders.push_back(b.take_sender(i));
    }
    h.cv.notify_all();
  }
};

using test_backends =
    servekit::backend_list<servekit::named_backend<"identity", servekit_server::identity_backend>,
                           servekit::named_backend<"test_repeat", test_repeat_backend>,
                           servekit::named_backend<"test_hold", test_hold_backend>,
                           servekit::named_backend<"repeat", repeat::backend>>;

const fs::path bundled_models = fs::path{SERVEKIT_SOURCE_DIR} / "examples" / "models";

/// Writes the test models into `files`.
void write_test_models(const archetypes::temp_repository& files) {
  files.write("repeat", R"({"name": "repeat", "backend": "test_repeat", "max_batch_size": 0,
    "model_transaction_policy": {"decoupled": true}})");
  files.write("hold", R"({"name": "hold", "backend": "test_hold", "max_batch_size": 0,
    "model_transaction_policy": {"decoupled": true}})");
  files.write("text", R"({"name": "text", "backend": "identity", "max_batch_size": 0,
    "input": [{"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]}],
    "output": [{"name": "text_output", "data_type": "TYPE_STRING", "dims": [1]}]})");
  files.write("floats", R"({"name": "floats", "backend": "identity", "max_batch_size": 8,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]},
              {"name": "INPUT1", "data_type": "TYPE_INT32", "dims": [2, 2]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]},
               {"name": "OUTPUT1", "data_type": "TYPE_INT32", "dims": [2, 2]}]})");
  fs::copy(bundled_models / "repeat_int32", files.root() / "repeat_int32",
           fs::copy_options::recursive);
}

class running_server {
public:
  explicit running_server(std::chrono::seconds exit_timeout = std::chrono::seconds{30})
      : repository_{files_.root(), test_backends{}} {
    write_test_models(files_);
    for (const auto& e : repository_.load_all()) {
      EXPECT_EQ(e.state, servekit::model_ready_state::ready) << e.name << ": " << e.reason;
    }
    servekit::http::server_options options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.thread_count = 2;
    options.exit_timeout = exit_timeout;
    server_.emplace(repository_, std::move(options));
    thread_ = std::thread{[this] { server_->run(); }};
  }
  running_server(const running_server&) = delete;
  running_server& operator=(const running_server&) = delete;
  ~running_server() { stop(); }
  /// Stops the server and waits until run() has returned.
  void stop() {
    server_->stop();
    if (thread_.joinable()) {
      thread_.join();
    }
  }
  [[nodiscard]] std::uint16_t port() const { return server_->port(); }
  [[nodiscard]] std::unique_ptr<test_http::client> client() const {
    return std::make_unique<test_http::client>("127.0.0.1", server_->port());
  }
  [[nodiscard]] servekit::statistics_snapshot statistics(std::string_view model) const {
    const auto m = repository_.find(model);
    return m ? m->model().statistics() : servekit::statistics_snapshot{};
  }

private:
  archetypes::temp_repository files_;
  servekit::model_repository repository_;
  std::optional<servekit::http::server> server_;
  std::thread thread_;
};

json parse(const reply& r) {
  auto j = json::parse(r.body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.body << r.error;
  return j;
}

void expect_error(const reply& r, unsigned status, std::string_view fragment) {
  EXPECT_EQ(r.status, status) << r.body << r.error;
  const auto j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  EXPECT_NE(j["error"].get<std::string>().find(fragment), std::string::npos)
      << "'" << fragment << "' not in: " << j["error"];
}

/// The JSON of each server-sent event of a body; fails on anything but `data: <json>\n\n`.
std::vector<json> events_of(const std::string& body) {
  std::vector<json> out;
  std::size_t at = 0;
  while (at < body.size()) {
    const auto end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "unterminated event in: " << body;
    if (end == std::string::npos) {
      break;
    }
    const std::string_view event{body.data() + at, end - at};
    EXPECT_EQ(event.substr(0, 6), "data: ") << body;
    out.push_back(json::parse(event.substr(6)));
    at = end + 2;
  }
  return out;
}

// -- generate on a non-decoupled model ---------------------------------------------------------

TEST(Generate, TextInTextOut) {
  running_server s;
  auto c = s.client();
  const auto r = c->post("/v2/models/text/generate", R"({"text_input": "hello world"})");
  ASSERT_EQ(r.status, 200U) << r.body;
  EXPECT_NE(r.header("content-type").find("application/json"), std::string::npos);
  EXPECT_EQ(parse(r),
            (json{{"model_name", "text"}, {"model_version", "1"}, {"text_output", "hello world"}}));
  // The versioned URL too, with parameters passed through as /infer's.
  const auto v = c->post("/v2/models/text/versions/1/generate",
                         R"({"text_input": "x", "parameters": {"priority": 0, "timeout": 0}})");
  ASSERT_EQ(v.status, 200U) << v.body;
  EXPECT_EQ(parse(v).at("text_output"), "x");
}

TEST(Generate, ShapesComeFromTheConfig) {
  running_server s;
  auto c = s.client();
  // INPUT0 dims [-1] with batching: [1, 3]; INPUT1 [2, 2] from flat or nested values.
  const auto r = c->post("/v2/models/floats/generate",
                         R"({"INPUT0": [1.5, 2, 3], "INPUT1": [[1, 2], [3, 4]], "id": "r1"})");
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto j = parse(r);
  EXPECT_EQ(j.at("OUTPUT0"), json::array({1.5, 2.0, 3.0}));
  EXPECT_EQ(j.at("OUTPUT1"), json::array({1, 2, 3, 4}));
  EXPECT_EQ(j.at("id"), "r1");
  // A scalar for a [-1] input is one element.
  const auto one = c->post("/v2/models/floats/generate", R"({"INPUT0": 7, "INPUT1": [1,2,3,4]})");
  ASSERT_EQ(one.status, 200U) << one.body;
  EXPECT_EQ(parse(one).at("OUTPUT0"), 7.0);
}

TEST(Generate, BadRequestsNameTheKey) {
  running_server s;
  auto c = s.client();
  expect_error(c->post("/v2/models/text/generate", R"({"text_input": "a", "prompt": "b"})"), 400,
               "unexpected generate input 'prompt'");
  expect_error(c->post("/v2/models/floats/generate", R"({"INPUT0": [1], "INPUT1": [1, 2, 3]})"),
               400, "generate input 'INPUT1'");
  expect_error(c->post("/v2/models/floats/generate", R"({"INPUT0": ["x"], "INPUT1": [1,2,3,4]})"),
               400, "INPUT0");
  expect_error(c->post("/v2/models/floats/generate", R"({"INPUT0": [{"a": 1}]})"), 400, "INPUT0");
  expect_error(c->post("/v2/models/text/generate", R"([1, 2])"), 400, "JSON object");
  expect_error(c->post("/v2/models/text/generate", R"({"text_input": )"), 400, "parse");
  expect_error(c->post("/v2/models/text/generate", R"({"text_input": "a", "parameters": 3})"), 400,
               "parameters");
  expect_error(c->post("/v2/models/floats/generate", R"({"INPUT0": [1]})"), 400, "INPUT1");
  expect_error(c->post("/v2/models/nope/generate", R"({})"), 404, "nope");
  const auto get = c->get("/v2/models/text/generate");
  EXPECT_EQ(get.status, 405U) << get.body;
}

// -- decoupled models --------------------------------------------------------------------------

TEST(Generate, InferOnADecoupledModelNamesGenerateStream) {
  running_server s;
  auto c = s.client();
  const auto r = c->post("/v2/models/repeat/infer",
                         R"({"inputs": [{"name": "IN", "datatype": "INT32", "shape": [2],
                              "data": [1, 2]}]})");
  expect_error(r, 400, "/v2/models/repeat/generate_stream");
  EXPECT_EQ(s.statistics("repeat").inference_count, 0U) << "refused before the model";
}

TEST(GenerateStream, StreamsEveryResponseAsAnEvent) {
  running_server s;
  auto c = s.client();
  const auto r = c->post("/v2/models/repeat/generate_stream", R"({"IN": [4, 5, 6]})");
  ASSERT_EQ(r.status, 200U) << r.body << r.error;
  EXPECT_EQ(r.header("content-type"), "text/event-stream; charset=utf-8");
  EXPECT_EQ(r.header("transfer-encoding"), "chunked");
  const auto events = events_of(r.body);
  ASSERT_EQ(events.size(), 3U) << r.body << " (the empty final response sends no event)";
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(events[static_cast<std::size_t>(k)],
              (json{{"model_name", "repeat"}, {"model_version", "1"}, {"OUT", 4 + k}}));
  }
  // Keep-alive: the connection serves the next request.
  const auto again = c->post("/v2/models/repeat/generate_stream", R"({"IN": [9]})");
  ASSERT_EQ(again.status, 200U) << again.body;
  EXPECT_EQ(events_of(again.body).size(), 1U);
  EXPECT_EQ(c->connections_opened(), 1);
}

TEST(GenerateStream, ZeroResponsesIsAnEmptyStream) {
  running_server s;
  auto c = s.client();
  const auto r = c->post("/v2/models/repeat/generate_stream", R"({"IN": []})");
  ASSERT_EQ(r.status, 200U) << r.body << r.error;
  EXPECT_EQ(r.body, "");
}

TEST(GenerateStream, AnErrorAfterEventsIsAnErrorEvent) {
  running_server s;
  auto c = s.client();
  const auto r = c->post("/v2/models/repeat/generate_stream", R"({"IN": [1, 2, -1, 3]})");
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto events = events_of(r.body);
  ASSERT_EQ(events.size(), 3U) << r.body;
  EXPECT_EQ(events[0].at("OUT"), 1);
  EXPECT_EQ(events[1].at("OUT"), 2);
  ASSERT_EQ(events[2].size(), 1U) << events[2];
  EXPECT_NE(events[2].at("error").get<std::string>().find("negative value at 2"), std::string::npos)
      << events[2];
  // An error before any event is an ordinary error reply.
  expect_error(c->post("/v2/models/repeat/generate_stream", R"({"IN": [-1]})"), 400,
               "negative value at 0");
}

TEST(GenerateStream, ANonDecoupledModelStreamsOneEvent) {
  running_server s;
  auto c = s.client();
  const auto r = c->post("/v2/models/text/generate_stream", R"({"text_input": "hi"})");
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto events = events_of(r.body);
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].at("text_output"), "hi");
}

TEST(Generate, ADecoupledModelWithOneResponse) {
  running_server s;
  auto c = s.client();
  const auto r = c->post("/v2/models/repeat/generate", R"({"IN": [42]})");
  ASSERT_EQ(r.status, 200U) << r.body;
  EXPECT_EQ(parse(r), (json{{"model_name", "repeat"}, {"model_version", "1"}, {"OUT", 42}}));
  expect_error(c->post("/v2/models/repeat/generate", R"({"IN": [1, 2]})"), 400,
               "more than one response");
  expect_error(c->post("/v2/models/repeat/generate", R"({"IN": [1, -2]})"), 400,
               "negative value at 1");
}

TEST(GenerateStream, BundledRepeatInt32StreamsInOrder) {
  running_server s;
  auto c = s.client();
  // Responses come from the backend's worker thread, after execute returned.
  const auto r = c->post("/v2/models/repeat_int32/generate_stream",
                         R"({"IN": [4, 5, 6], "DELAY": [1, 1, 1], "WAIT": 1})");
  ASSERT_EQ(r.status, 200U) << r.body << r.error;
  const auto events = events_of(r.body);
  ASSERT_EQ(events.size(), 3U) << r.body;
  for (std::uint32_t k = 0; k < 3; ++k) {
    EXPECT_EQ(events[k], (json{{"model_name", "repeat_int32"},
                               {"model_version", "1"},
                               {"OUT", 4 + static_cast<int>(k)},
                               {"IDX", k}}));
  }
  // Several streams at once on separate connections each get their own responses.
  std::vector<std::thread> clients;
  std::vector<reply> replies(4);
  for (std::size_t i = 0; i < replies.size(); ++i) {
    clients.emplace_back([&, i] {
      auto own = s.client();
      const int v = static_cast<int>(i) * 10;
      replies[i] = own->post("/v2/models/repeat_int32/generate_stream",
                             json{{"IN", {v, v + 1}}, {"DELAY", {2, 2}}, {"WAIT", 1}}.dump());
    });
  }
  for (auto& t : clients) {
    t.join();
  }
  for (std::size_t i = 0; i < replies.size(); ++i) {
    ASSERT_EQ(replies[i].status, 200U) << replies[i].body;
    const auto e = events_of(replies[i].body);
    ASSERT_EQ(e.size(), 2U) << replies[i].body;
    EXPECT_EQ(e[0].at("OUT"), static_cast<int>(i) * 10);
    EXPECT_EQ(e[1].at("OUT"), static_cast<int>(i) * 10 + 1);
  }
  // /infer names the streaming endpoint; /generate takes a single response.
  expect_error(c->post("/v2/models/repeat_int32/infer",
                       R"({"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1],
                            "data": [1]}]})"),
               400, "generate_stream");
  const auto one =
      c->post("/v2/models/repeat_int32/generate", R"({"IN": [8], "DELAY": [0], "WAIT": 0})");
  ASSERT_EQ(one.status, 200U) << one.body;
  EXPECT_EQ(parse(one).at("OUT"), 8);
}

TEST(GenerateStream, ClientDisconnectMidStream) {
  running_server s;
  auto& g = repeat_gate();
  g.close();
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket{ioc};
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), s.port()});
    const std::string body = R"({"IN": [1000, 1, 2, 3]})";
    const std::string request = "POST /v2/models/repeat/generate_stream HTTP/1.1\r\nHost: x\r\n"
                                "Content-Type: application/json\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    boost::asio::write(socket, boost::asio::buffer(request));
    // Read until the first event has arrived.
    std::string got;
    char buf[512];
    while (got.find("\"OUT\":1000") == std::string::npos) {
      boost::system::error_code ec;
      const std::size_t n = socket.read_some(boost::asio::buffer(buf), ec);
      ASSERT_FALSE(ec) << ec.message() << " after: " << got;
      got.append(buf, n);
    }
    EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos) << got;
    ASSERT_TRUE(g.wait_for_waiter());
    socket.close(); // the client goes away with the request in flight
  }
  g.release();
  // The model completes the request; the server keeps serving.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
  while (s.statistics("repeat").inference_count < 1 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(s.statistics("repeat").inference_count, 1U);
  auto c = s.client();
  const auto r = c->post("/v2/models/repeat/generate_stream", R"({"IN": [7]})");
  ASSERT_EQ(r.status, 200U) << r.body;
  EXPECT_EQ(events_of(r.body).size(), 1U);
}

// SIGTERM with a stream the backend never ends and no final_response_timeout: once the exit
// timeout expires, the decoupled model answers it `cancelled`, so run() returns (without that,
// the request's session, and so run(), would wait forever).
TEST(GenerateStream, ExitTimeoutEndsAStreamTheBackendNeverEnds) {
  running_server s{std::chrono::seconds{0}};
  reply r;
  std::thread client{
      [&] { r = s.client()->post("/v2/models/hold/generate_stream", R"({"IN": [1]})"); }};
  ASSERT_TRUE(held().wait_for_one());
  s.stop(); // returns
  client.join();
  const std::lock_guard lock{held().mutex};
  ASSERT_EQ(held().senders.size(), 1U);
  EXPECT_TRUE(held().senders[0].finished()) << "the request was answered (cancelled)";
  held().senders.clear();
}

} // namespace generate_e2e_test
