// The HTTP front end's transport against hostile and careless peers, on loopback: request
// smuggling through Transfer-Encoding (RFC 9112 framing), slow and idle connections cut off by
// their timeouts while a fresh client is served, the connection limit, and request bodies that
// allocate only what arrived. The server runs in-process over an empty model repository (the
// transport needs no model). Timeouts are set to a few hundred milliseconds; each wait for the
// server to close a connection is bounded.
#include "http_client.hpp"
#include "raw_client.hpp"

#include "bundled_backends.hpp"

#include <servekit/http/server.hpp>
#include <servekit/repository/model_repository.hpp>

#include <gtest/gtest.h>

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <malloc.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <zlib.h>

namespace transport_hardening_test {

namespace fs = std::filesystem;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

/// An empty model repository in a fresh temporary folder, and the server over it.
class transport_server {
public:
  explicit transport_server(servekit::http::server_options options = {},
                            const std::vector<std::string>& bundled = {})
      : path_{make_folder(bundled)}, repository_{path_, servekit_server::bundled_backends{}} {
    repository_.load_all();
    options.host = "127.0.0.1";
    options.port = 0;
    options.thread_count = 2;
    server_.emplace(repository_, std::move(options));
    thread_ = std::thread{[this] { server_->run(); }};
  }
  transport_server(const transport_server&) = delete;
  transport_server& operator=(const transport_server&) = delete;
  ~transport_server() {
    server_->stop();
    thread_.join();
    std::error_code ec;
    fs::remove_all(path_, ec);
  }

  [[nodiscard]] std::uint16_t port() const { return server_->port(); }
  [[nodiscard]] servekit::http::server& server() { return *server_; }

  /// A fresh client is served while the slow ones wait.
  [[nodiscard]] unsigned live_status() const {
    test_http::client c{"127.0.0.1", server_->port()};
    return c.get("/v2/health/live").status;
  }

private:
  /// A fresh folder holding copies of the `bundled` models of examples/models.
  static fs::path make_folder(const std::vector<std::string>& bundled) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    auto p = fs::temp_directory_path() /
             ("servekit_transport_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(p);
    fs::create_directories(p);
    for (const auto& model : bundled) {
      fs::copy(fs::path{SERVEKIT_SOURCE_DIR} / "examples" / "models" / model, p / model,
               fs::copy_options::recursive);
    }
    return p;
  }

  fs::path path_;
  servekit::model_repository repository_;
  std::optional<servekit::http::server> server_;
  std::thread thread_;
};

/// A raw TCP connection: bytes as they are, reads bounded by a receive timeout.
class raw_connection {
public:
  /// receive_buffer > 0: the socket's receive buffer, set before connecting (a small one makes
  /// a client that does not read push back on the server at once).
  explicit raw_connection(std::uint16_t port, int receive_buffer = 0) {
    if (receive_buffer > 0) {
      socket_.open(tcp::v4());
      socket_.set_option(asio::socket_base::receive_buffer_size(receive_buffer));
    }
    socket_.connect(tcp::endpoint{asio::ip::make_address("127.0.0.1"), port});
    const timeval tv{0, 100'000}; // reads return every 100 ms, so waits can be bounded
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }

  /// false if the server closed the connection meanwhile.
  bool send(std::string_view bytes) {
    boost::system::error_code ec;
    asio::write(socket_, asio::buffer(bytes.data(), bytes.size()), ec);
    return !ec;
  }

  /// Reads until the server closes the connection or `limit` passes; true if it closed.
  bool read_until_closed(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::array<char, 4096> chunk{};
    while (std::chrono::steady_clock::now() < deadline) {
      const auto n = ::recv(socket_.native_handle(), chunk.data(), chunk.size(), 0);
      if (n > 0) {
        received_.append(chunk.data(), static_cast<std::size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        return true;
      }
    }
    return false;
  }

  [[nodiscard]] const std::string& received() const noexcept { return received_; }

  /// How many responses arrived (status lines).
  [[nodiscard]] std::size_t responses() const {
    std::size_t n = 0;
    for (auto at = received_.find("HTTP/1.1 "); at != std::string::npos;
         at = received_.find("HTTP/1.1 ", at + 1)) {
      ++n;
    }
    return n;
  }

private:
  asio::io_context ioc_;
  tcp::socket socket_{ioc_};
  std::string received_;
};

using test_http::eventually;

// -- RFC 9112 framing --------------------------------------------------------------------------

TEST(TransportHardening, AmbiguousTransferEncodingIs400AndTheSmuggledRequestNeverRuns) {
  transport_server server;
  // Each request's body is a second request: if the server framed the first with no body, the
  // second would be answered too (a smuggled request).
  const std::string smuggled = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const std::string_view coding :
       {"Transfer-Encoding: chunked, identity\r\n", "Transfer-Encoding: identity\r\n",
        "Transfer-Encoding: gzip\r\n", "Transfer-Encoding: gzip, chunked\r\n",
        "Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked\r\nContent-Length: 41\r\n",
        "Content-Length: 41\r\nTransfer-Encoding: chunked\r\n"}) {
    SCOPED_TRACE(coding);
    raw_connection c{server.port()};
    ASSERT_TRUE(c.send("POST /v2/repository/index HTTP/1.1\r\nHost: x\r\n" + std::string{coding} +
                       "\r\n" + smuggled));
    EXPECT_TRUE(c.read_until_closed(5s)) << "the connection stayed open";
    EXPECT_EQ(c.responses(), 1U) << c.received();
    EXPECT_EQ(c.received().rfind("HTTP/1.1 400", 0), 0U) << c.received();
  }
  // A plain chunked request still works.
  raw_connection ok{server.port()};
  ASSERT_TRUE(ok.send("POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                      "chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n"));
  EXPECT_TRUE(ok.read_until_closed(5s));
  EXPECT_EQ(ok.received().rfind("HTTP/1.1 200", 0), 0U) << ok.received();
}

// -- timeouts ----------------------------------------------------------------------------------

servekit::http::server_options short_timeouts() {
  servekit::http::server_options o;
  o.header_timeout = 300ms;
  o.body_timeout = 300ms;
  o.body_total_timeout = 1000ms;
  o.keepalive_timeout = 300ms;
  o.write_timeout = 300ms;
  return o;
}

TEST(TransportHardening, SlowlorisHeaderIsCutOffAtTheHeaderTimeout) {
  transport_server server{short_timeouts()};
  raw_connection c{server.port()};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.send("GET /v2/health/live HTTP/1.1\r\n"));
  // One header byte every 50 ms, never finishing: each byte is progress, yet the header as a
  // whole must arrive within header_timeout.
  bool closed = false;
  for (int i = 0; i < 60 && !closed; ++i) {
    closed = !c.send("X") || c.read_until_closed(50ms);
  }
  EXPECT_TRUE(closed || c.read_until_closed(1s)) << "slowloris connection still open";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2500ms);
  EXPECT_EQ(server.live_status(), 200U);
}

TEST(TransportHardening, SilentConnectionIsCutOffAtTheHeaderTimeout) {
  transport_server server{short_timeouts()};
  raw_connection c{server.port()};
  EXPECT_EQ(server.live_status(), 200U);
  EXPECT_TRUE(c.read_until_closed(3s)) << "silent connection still open";
  EXPECT_TRUE(c.received().empty());
}

TEST(TransportHardening, IdleKeepAliveIsCutOffAtTheKeepAliveTimeout) {
  transport_server server{short_timeouts()};
  raw_connection c{server.port()};
  ASSERT_TRUE(c.send("GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(c.read_until_closed(3s)) << "idle keep-alive connection still open";
  EXPECT_EQ(c.responses(), 1U) << c.received();
  EXPECT_EQ(c.received().rfind("HTTP/1.1 200", 0), 0U) << c.received();
  EXPECT_EQ(server.live_status(), 200U);
}

TEST(TransportHardening, StalledBodyIsCutOffAtTheBodyTimeout) {
  transport_server server{short_timeouts()};
  raw_connection c{server.port()};
  ASSERT_TRUE(c.send("POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                     "\r\n{\"a\":"));
  EXPECT_TRUE(c.read_until_closed(3s)) << "stalled body still open";
  EXPECT_EQ(c.responses(), 0U) << c.received();
  EXPECT_EQ(server.live_status(), 200U);
}

TEST(TransportHardening, TricklingBodyIsCutOffAtTheOverallBodyTimeout) {
  transport_server server{short_timeouts()};
  raw_connection c{server.port()};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.send("POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n"
                     "\r\n"));
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    closed = !c.send(" ") || c.read_until_closed(50ms);
  }
  EXPECT_TRUE(closed || c.read_until_closed(1s)) << "trickling body still open";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3500ms);
}

// -- the connection limit ----------------------------------------------------------------------

TEST(TransportHardening, ConnectionsPastTheLimitGet503) {
  servekit::http::server_options o;
  o.max_connections = 2;
  transport_server server{o};
  EXPECT_EQ(server.server().max_connections(), 2U);
  auto a = std::make_unique<raw_connection>(server.port());
  auto b = std::make_unique<raw_connection>(server.port());
  ASSERT_TRUE(eventually([&] { return server.server().connections() == 2; }));
  {
    test_http::client c{"127.0.0.1", server.port()};
    const auto r = c.get("/v2/health/live");
    EXPECT_EQ(r.status, 503U) << r.body << r.error;
    EXPECT_NE(r.body.find("too many connections"), std::string::npos) << r.body;
  }
  a.reset();
  ASSERT_TRUE(eventually([&] { return server.server().connections() < 2; }));
  EXPECT_EQ(server.live_status(), 200U);
}

TEST(TransportHardening, DefaultConnectionLimitIsBelowTheDescriptorLimit) {
  transport_server server;
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(limit.rlim_cur, limit.rlim_max) << "the soft limit was not raised to the hard one";
  EXPECT_GT(server.server().max_connections(), 0U);
  if (limit.rlim_cur != RLIM_INFINITY) {
    EXPECT_LT(server.server().max_connections(), limit.rlim_cur);
  }
}

// -- allocation ahead of data ------------------------------------------------------------------

/// Bytes malloc has handed out, mmapped blocks included (a reserved string counts there before
/// it is touched).
std::size_t allocated_bytes() {
  const auto info = ::mallinfo2();
  return info.uordblks + info.hblkhd;
}

TEST(TransportHardening, AnnouncedBodyIsNotReservedBeforeItArrives) {
  servekit::http::server_options o;
  o.max_body_bytes = std::size_t{64} << 20;
  transport_server server{o};
  std::vector<std::unique_ptr<raw_connection>> stalled;
  const std::size_t before = allocated_bytes();
  for (int i = 0; i < 8; ++i) {
    stalled.push_back(std::make_unique<raw_connection>(server.port()));
    ASSERT_TRUE(stalled.back()->send("POST /v2/repository/index HTTP/1.1\r\nHost: x\r\n"
                                     "Content-Length: 60000000\r\n\r\n{\"a\""));
  }
  ASSERT_TRUE(eventually([&] { return server.server().connections() == 8; }));
  // Reserving each Content-Length would add 480 MB at once; what arrived is a few bytes each.
  const auto deadline = std::chrono::steady_clock::now() + 1s;
  std::size_t peak = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    peak = std::max(peak, allocated_bytes());
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_LT(peak, before + (std::size_t{100} << 20)) << "before " << before << " peak " << peak;
  EXPECT_EQ(server.live_status(), 200U);
}

// -- streaming backpressure --------------------------------------------------------------------

/// A generate_stream request for n responses of about 70 bytes each, as raw HTTP.
std::string many_responses_request(std::size_t n) {
  std::string in = "[";
  std::string delay = "[";
  for (std::size_t i = 0; i < n; ++i) {
    in += i == 0 ? "1" : ",1";
    delay += i == 0 ? "0" : ",0";
  }
  const std::string body = R"({"IN": )" + in + R"(], "DELAY": )" + delay + R"(], "WAIT": 0})";
  return "POST /v2/models/repeat_int32/generate_stream HTTP/1.1\r\nHost: x\r\n"
         "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(TransportHardening, StreamToAClientThatDoesNotReadStopsAtItsBound) {
  servekit::http::server_options o;
  o.stream_buffer_bytes = 64 * 1024;
  transport_server server{o, {"repeat_int32"}};
  // 200,000 events: 14 MB, far past the socket buffers.
  raw_connection c{server.port(), 4096};
  ASSERT_TRUE(eventually([&] { return server.server().connections() == 1; })); // accepted
  ASSERT_TRUE(c.send(many_responses_request(200'000)));
  // The client never reads: the server gives the stream up and closes the connection.
  EXPECT_TRUE(eventually([&] { return server.server().connections() == 0; }))
      << "the stream is still buffered for a client that does not read";
  EXPECT_EQ(server.live_status(), 200U);
}

TEST(TransportHardening, StreamToAClientThatDoesNotReadEndsAtTheWriteTimeout) {
  servekit::http::server_options o;
  o.stream_buffer_bytes = std::size_t{1} << 30; // only the write timeout can end it
  o.write_timeout = 300ms;
  transport_server server{o, {"repeat_int32"}};
  raw_connection c{server.port(), 4096};
  ASSERT_TRUE(eventually([&] { return server.server().connections() == 1; })); // accepted
  ASSERT_TRUE(c.send(many_responses_request(200'000)));
  EXPECT_TRUE(eventually([&] { return server.server().connections() == 0; }))
      << "a write to a client that does not read never timed out";
  EXPECT_EQ(server.live_status(), 200U);
}

// -- departed clients --------------------------------------------------------------------------

/// The descriptors this process has open.
std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator{"/proc/self/fd"}) {
    ++n;
  }
  return n;
}

TEST(TransportHardening, ClientLeavingWhileItsRequestWaitsReleasesTheDescriptor) {
  transport_server server{{}, {"repeat_int32"}};
  EXPECT_EQ(server.live_status(), 200U);
  ASSERT_TRUE(eventually([&] { return server.server().connections() == 0; }));
  const std::size_t before = open_descriptors();
  {
    raw_connection c{server.port()};
    // The model answers after 3 s; the client leaves at once.
    const std::string body = R"({"IN": [1], "DELAY": [3000], "WAIT": 0})";
    ASSERT_TRUE(c.send("POST /v2/models/repeat_int32/generate_stream HTTP/1.1\r\nHost: x\r\n"
                       "Content-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n" + body));
    std::this_thread::sleep_for(100ms); // the request reaches the model
  }
  // The server's side of the connection is closed long before the model answers.
  const auto deadline = std::chrono::steady_clock::now() + 1500ms;
  while (open_descriptors() > before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(open_descriptors(), before) << "the departed client's descriptor is still open";
  EXPECT_EQ(server.live_status(), 200U);
}

// -- compressed bodies -------------------------------------------------------------------------

/// `text` compressed with zlib: window_bits 16 + 15 for gzip, 15 for zlib-wrapped deflate.
std::string compress(std::string_view text, int window_bits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  return out;
}

/// A gzip or deflate body inflated (window_bits as for compress()).
std::string decompress(std::string_view data, int window_bits) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, window_bits), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  std::array<char, 4096> chunk{};
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(chunk.data());
    z.avail_out = static_cast<uInt>(chunk.size());
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(chunk.data(), chunk.size() - z.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  inflateEnd(&z);
  return out;
}

TEST(TransportHardening, GzipAndDeflateRequestBodiesAreDecompressed) {
  transport_server server{{}, {"repeat_int32"}};
  test_http::client c{"127.0.0.1", server.port()};
  const std::string body = R"({"IN": [7], "DELAY": [0], "WAIT": 0})";
  for (const auto& [coding, bits] :
       std::vector<std::pair<std::string, int>>{{"gzip", 16 + 15}, {"deflate", 15}}) {
    SCOPED_TRACE(coding);
    const auto r = c.post("/v2/models/repeat_int32/generate", compress(body, bits),
                          {{"Content-Encoding", coding}});
    EXPECT_EQ(r.status, 200U) << r.body << r.error;
    EXPECT_NE(r.body.find(R"("OUT":7)"), std::string::npos) << r.body;
  }
  const auto br = c.post("/v2/models/repeat_int32/generate", body, {{"Content-Encoding", "br"}});
  EXPECT_EQ(br.status, 415U) << br.body;
  const auto corrupt =
      c.post("/v2/models/repeat_int32/generate", "not gzip at all", {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(corrupt.status, 400U) << corrupt.body;
}

TEST(TransportHardening, DecompressedSizeCountsAgainstTheBodyLimit) {
  servekit::http::server_options o;
  o.max_body_bytes = 64 * 1024;
  transport_server server{o, {"repeat_int32"}};
  test_http::client c{"127.0.0.1", server.port()};
  // 16 MB of spaces compress to about 16 KB: under the limit as sent, far over it inflated.
  const std::string bomb = compress(std::string(std::size_t{16} << 20, ' '), 16 + 15);
  ASSERT_LT(bomb.size(), o.max_body_bytes);
  const auto r = c.post("/v2/models/repeat_int32/generate", bomb, {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(r.status, 413U) << r.body << r.error;
  EXPECT_NE(r.body.find("decompressed"), std::string::npos) << r.body;
  EXPECT_EQ(server.live_status(), 200U);
}

TEST(TransportHardening, LargeResponsesHonourAcceptEncoding) {
  transport_server server{{}, {"repeat_int32"}};
  test_http::client c{"127.0.0.1", server.port()};
  const auto plain = c.get("/metrics");
  ASSERT_EQ(plain.status, 200U) << plain.error;
  ASSERT_GE(plain.body.size(), 1024U) << "the metrics are too small to be compressed";
  EXPECT_TRUE(plain.header("content-encoding").empty());
  for (const auto& [coding, bits] :
       std::vector<std::pair<std::string, int>>{{"gzip", 16 + 15}, {"deflate", 15}}) {
    SCOPED_TRACE(coding);
    const auto r =
        c.send(boost::beast::http::verb::get, "/metrics", {}, {{"Accept-Encoding", coding}});
    ASSERT_EQ(r.status, 200U) << r.error;
    EXPECT_EQ(r.header("content-encoding"), coding);
    EXPECT_LT(r.body.size(), plain.body.size());
    const std::string text = decompress(r.body, bits);
    EXPECT_EQ(text.substr(0, 6), plain.body.substr(0, 6));
  }
  // Small bodies go as they are.
  const auto small =
      c.send(boost::beast::http::verb::get, "/v2/health/live", {}, {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(small.status, 200U);
  EXPECT_TRUE(small.header("content-encoding").empty());
}

} // namespace transport_hardening_test
