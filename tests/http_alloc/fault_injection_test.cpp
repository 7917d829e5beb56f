// An allocation failure anywhere on the server's request path fails that request, not the
// process (issue 16). The real server runs in process on a loopback port over copies of the
// bundled add_sub and repeat_int32 models, on one I/O thread: reading, decoding, submitting to
// the model, encoding and writing all happen there. For each kind of request, the test first
// counts the allocations one request makes on that thread, then sends it again once per
// allocation with that allocation failing (failing_new.hpp: only the I/O thread fails; the
// models' instance threads, which execute the batches, are outside this test),
// and checks that the server answered it completely (any status, a 200 only with the right
// body) or closed the connection, that it goes on serving (health and a correct /infer from a
// fresh client), and that run() did not end. A burst variant fails every allocation from the
// nth on until the test lets go. Every wait is bounded.
#include "failing_new.hpp"

#include "bundled_backends.hpp"

#include <servekit/http/server.hpp>
#include <servekit/repository/model_repository.hpp>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <zlib.h>

namespace fault_injection_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// How long one request may take before the test calls it hung: far above what a request takes
/// here (a few milliseconds, more under ASan), far below a test timeout.
constexpr auto exchange_limit = 3s;

/// The server over copies of add_sub and repeat_int32, run on its own thread, its one I/O
/// thread and the only one whose allocations fail.
class fault_server {
public:
  fault_server() : path_{make_folder()}, repository_{path_, servekit_server::bundled_backends{}} {
    repository_.load_all();
    servekit::http::server_options options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.thread_count = 1;
    // A connection a failure left without a pending operation must not linger for minutes.
    options.header_timeout = 1s;
    options.body_timeout = 1s;
    options.keepalive_timeout = 1s;
    options.write_timeout = 1s;
    options.exit_timeout = 1s;
    server_.emplace(repository_, std::move(options));
    thread_ = std::thread{[this] {
      failing_new::subject_this_thread();
      try {
        server_->run();
      } catch (const std::exception& e) {
        const std::string what = e.what();
        std::fprintf(stderr, "server run() threw: %s\n", what.c_str());
      }
      run_returned_ = true;
    }};
  }
  fault_server(const fault_server&) = delete;
  fault_server& operator=(const fault_server&) = delete;
  ~fault_server() {
    failing_new::disarm();
    server_->stop();
    thread_.join();
    std::error_code ec;
    fs::remove_all(path_, ec);
  }

  [[nodiscard]] std::uint16_t port() const { return server_->port(); }
  /// run() returned (or threw) although nobody called stop(): the server died.
  [[nodiscard]] bool died() const { return run_returned_.load(); }

private:
  static fs::path make_folder() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    auto p = fs::temp_directory_path() /
             ("servekit_alloc_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(p);
    fs::create_directories(p);
    for (const char* model : {"add_sub", "repeat_int32"}) {
      fs::copy(fs::path{SERVEKIT_SOURCE_DIR} / "examples" / "models" / model, p / model,
               fs::copy_options::recursive);
    }
    return p;
  }

  fs::path path_;
  servekit::model_repository repository_;
  std::optional<servekit::http::server> server_;
  std::thread thread_;
  std::atomic<bool> run_returned_{false};
};

/// What came back for one request on a fresh connection.
struct outcome {
  bool answered = false; ///< a complete response
  unsigned status = 0;
  std::string body;
  std::string trouble; ///< empty, or why this is not an acceptable outcome
};

/// One request on a fresh connection: sends `request`, reads one response (bounded by
/// exchange_limit). `disarm_after`: lets the injected failures go after that long (a burst).
/// `may_truncate`: a response cut short by a close is a closed connection (a stream whose
/// head was sent); otherwise it is trouble.
outcome exchange(std::uint16_t port, std::string_view request, bool may_truncate,
                 std::optional<std::chrono::milliseconds> disarm_after = std::nullopt) {
  namespace http = boost::beast::http;
  outcome out;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const timeval tv{0, 20'000}; // reads return every 20 ms, so the waits are bounded
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    out.trouble = std::string{"connect failed: "} + std::strerror(errno);
    ::close(fd);
    return out;
  }
  std::size_t sent = 0;
  while (sent < request.size()) {
    const auto n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      break; // the server closed the connection: what it answered is read below
    }
    sent += static_cast<std::size_t>(n);
  }
  http::response_parser<http::string_body> parser;
  parser.eager(true);
  std::string pending;
  bool closed = false;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + exchange_limit;
  bool disarmed = !disarm_after.has_value();
  char chunk[4096];
  while (!parser.is_done() && !closed && std::chrono::steady_clock::now() < deadline) {
    if (!disarmed && std::chrono::steady_clock::now() - start >= *disarm_after) {
      failing_new::disarm();
      disarmed = true;
    }
    const auto n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      pending.append(chunk, static_cast<std::size_t>(n));
      boost::system::error_code ec;
      while (!pending.empty() && !parser.is_done()) {
        const auto used = parser.put(boost::asio::buffer(pending), ec);
        pending.erase(0, used);
        if (ec == http::error::need_more) {
          ec = {};
          break;
        }
        if (ec) {
          out.trouble = "malformed response: " + ec.message();
          ::close(fd);
          return out;
        }
        if (used == 0) {
          break;
        }
      }
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      closed = true;
    }
  }
  if (!disarmed) {
    failing_new::disarm();
  }
  ::close(fd);
  if (parser.is_done()) {
    out.answered = true;
    out.status = parser.get().result_int();
    out.body = parser.get().body();
    if (!pending.empty()) {
      out.trouble = "bytes after the response: " + pending.substr(0, 200);
    }
    return out;
  }
  if (!closed) {
    out.trouble = "no response and the connection still open after " +
                  std::to_string(exchange_limit.count()) + " s";
  } else if (parser.got_some() &&
             !(may_truncate && parser.is_header_done() && parser.get().result_int() == 200)) {
    out.trouble = "a response cut short by a close";
  }
  return out;
}

std::string post(std::string_view target, std::string_view body,
                 std::string_view extra_headers = {}) {
  std::string r = "POST ";
  r += target;
  r += " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
  r += extra_headers;
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  r += body;
  return r;
}

std::string get(std::string_view target) {
  return "GET " + std::string{target} + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
}

std::string add_sub_json() {
  std::string in0;
  std::string in1;
  for (int i = 0; i < 16; ++i) {
    in0 += (i == 0 ? "" : ",") + std::to_string(i);
    in1 += (i == 0 ? "" : ",") + std::to_string(2 * i);
  }
  return R"({"id":"a","inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"FP32","data":[)" + in0 +
         R"(]},{"name":"INPUT1","shape":[1,16],"datatype":"FP32","data":[)" + in1 + "]}]}";
}

std::string add_sub_binary() {
  const std::string header =
      R"({"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,16],)"
      R"("parameters":{"binary_data_size":64}},{"name":"INPUT1","datatype":"FP32","shape":[1,16],)"
      R"("parameters":{"binary_data_size":64}}],"outputs":[{"name":"OUTPUT0",)"
      R"("parameters":{"binary_data":true}},{"name":"OUTPUT1"}]})";
  std::string body = header;
  for (int i = 0; i < 32; ++i) {
    const float v = static_cast<float>(i % 16);
    char bytes[sizeof v];
    std::memcpy(bytes, &v, sizeof v);
    body.append(bytes, sizeof v);
  }
  return post("/v2/models/add_sub/infer", body,
              "Inference-Header-Content-Length: " + std::to_string(header.size()) + "\r\n");
}

std::string gzip(std::string_view text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast,cppcoreguidelines-pro-type-const-cast)
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  return out;
}

struct request_case {
  const char* name;
  std::string bytes;
  bool may_truncate = false; ///< a stream: its head goes out before its last event
  bool body_varies = false;  ///< statistics: each answer counts the requests before it
};

std::vector<request_case> request_cases() {
  return {
      {"infer JSON", post("/v2/models/add_sub/infer", add_sub_json())},
      {"infer binary", add_sub_binary()},
      {"infer gzip",
       post("/v2/models/add_sub/infer", gzip(add_sub_json()), "Content-Encoding: gzip\r\n")},
      {"generate",
       post("/v2/models/repeat_int32/generate", R"({"IN": [42], "DELAY": [0], "WAIT": 0})")},
      {"generate_stream",
       post("/v2/models/repeat_int32/generate_stream",
            R"({"IN": [4, 5, 6], "DELAY": [0, 0, 0], "WAIT": 0})"),
       true},
      {"repository index", post("/v2/repository/index", "")},
      {"model metadata", get("/v2/models/add_sub")},
      {"server metadata", get("/v2")},
      {"model statistics", get("/v2/models/add_sub/stats"), false, true},
      {"model config", get("/v2/models/add_sub/config")},
  };
}

/// The server still serves, to a fresh client: health, and a correct /infer.
void expect_serving(const fault_server& server, const std::string& infer_reference,
                    const std::string& context) {
  ASSERT_FALSE(server.died()) << context << ": the server's run() ended";
  const outcome live = exchange(server.port(), get("/v2/health/live"), false);
  EXPECT_EQ(live.status, 200U) << context << ": /v2/health/live " << live.trouble;
  const outcome infer =
      exchange(server.port(), post("/v2/models/add_sub/infer", add_sub_json()), false);
  EXPECT_EQ(infer.status, 200U) << context << ": /infer " << infer.trouble << infer.body;
  EXPECT_EQ(infer.body, infer_reference) << context;
}

/// One request under injected failure: acceptable outcomes only. A 200 carries the reference
/// body, or for a body that varies, a whole JSON document.
void expect_acceptable(const outcome& o, const std::string& reference, const std::string& context,
                       bool body_varies = false) {
  EXPECT_TRUE(o.trouble.empty()) << context << ": " << o.trouble;
  if (o.answered && o.status == 200 && body_varies) {
    EXPECT_TRUE(nlohmann::json::accept(o.body)) << context << ": a 200 with a broken body";
  } else if (o.answered && o.status == 200) {
    EXPECT_EQ(o.body, reference) << context << ": a 200 with a body other than the reference";
  }
  if (o.answered && o.status != 200) {
    EXPECT_TRUE(o.status == 500 || o.status == 503 || o.status == 400 || o.status == 413)
        << context << ": status " << o.status << " " << o.body;
  }
}

/// Counts what each request allocates on the server's threads; the sweep fails each of them.
TEST(AllocationFailure, EveryAllocationOfARequestMayFailWithoutTakingTheServerDown) {
  fault_server server;
  const auto infer_reference =
      exchange(server.port(), post("/v2/models/add_sub/infer", add_sub_json()), false);
  ASSERT_EQ(infer_reference.status, 200U) << infer_reference.trouble;

  // How many failures are injected per case at most: every allocation while a request makes
  // few, evenly spread beyond (keeps the test within seconds under ASan).
  constexpr std::uint64_t max_points = 400;
  for (const auto& c : request_cases()) {
    // The reference answer, and the allocations it takes (counted after a first request, so
    // that what is made once per process is not counted).
    const outcome first = exchange(server.port(), c.bytes, c.may_truncate);
    ASSERT_TRUE(first.answered && first.status == 200)
        << c.name << ": " << first.trouble << first.status << first.body;
    failing_new::arm_count();
    const outcome reference = exchange(server.port(), c.bytes, c.may_truncate);
    std::this_thread::sleep_for(20ms); // the server's threads finish with the connection
    failing_new::disarm();
    const std::uint64_t count = failing_new::allocations();
    ASSERT_EQ(reference.status, 200U) << c.name;
    if (!c.body_varies) {
      ASSERT_EQ(reference.body, first.body) << c.name;
    }
    std::printf("%s: %llu allocations per request\n", c.name,
                static_cast<unsigned long long>(count));
    const std::uint64_t stride = (count + max_points - 1) / max_points;
    int failed_points = 0;
    for (std::uint64_t n = 1; n <= count + 2 && failed_points < 3; n += stride) {
      const std::string context = std::string{c.name} + ", allocation " + std::to_string(n) +
                                  " of " + std::to_string(count) + " failing";
      failing_new::arm_fail(n);
      const outcome o = exchange(server.port(), c.bytes, c.may_truncate);
      failing_new::disarm();
      const auto* result = ::testing::UnitTest::GetInstance()->current_test_info()->result();
      const int parts_before = result->total_part_count();
      expect_acceptable(o, reference.body, context, c.body_varies);
      expect_serving(server, infer_reference.body, context);
      if (result->total_part_count() > parts_before) {
        ++failed_points; // a few failing points say enough: keep the test short
      }
      if (server.died()) {
        return;
      }
    }
  }
}

/// Every allocation fails from the nth on for 50 ms: the request fails or is answered late,
/// and the server recovers.
TEST(AllocationFailure, ABurstOfFailuresEndsAndTheServerRecovers) {
  fault_server server;
  const auto infer_reference =
      exchange(server.port(), post("/v2/models/add_sub/infer", add_sub_json()), false);
  ASSERT_EQ(infer_reference.status, 200U) << infer_reference.trouble;
  for (const auto& c : request_cases()) {
    const outcome reference = exchange(server.port(), c.bytes, c.may_truncate);
    ASSERT_EQ(reference.status, 200U) << c.name;
    for (const std::uint64_t n : {1U, 2U, 5U, 10U, 20U, 40U, 80U}) {
      const std::string context = std::string{c.name} + ", every allocation from the " +
                                  std::to_string(n) + "th failing for 50 ms";
      failing_new::arm_fail(n, std::uint64_t{1} << 40);
      const outcome o = exchange(server.port(), c.bytes, c.may_truncate, 50ms);
      failing_new::disarm();
      expect_acceptable(o, reference.body, context, c.body_varies);
      expect_serving(server, infer_reference.body, context);
      if (server.died()) {
        return;
      }
    }
  }
}

} // namespace fault_injection_test
