// libFuzzer target for the whole HTTP front end, in process: every input is the raw bytes a
// client sends on one connection (one or more requests, well-formed or not), written to a live
// servekit::http::server on loopback serving real models (the bundled add_sub, accumulate and
// repeat_int32 models, and a BYTES identity model). After each input the target checks that the
// server still serves a fresh client: GET /v2/health/live must answer 200 within a few seconds.
//
// So a finding is: a crash or sanitizer report anywhere in the server (parsers, routing, the
// models behind it), or a server that stops answering others after one client's bytes.
//
// Seeds (corpus/http_server/) are HTTP/1.1 requests with CRLF line ends: every endpoint, bodies
// for /infer (JSON and binary), /generate, /generate_stream and the repository, chunked bodies,
// and the attacks of issue 16 (deep nesting, 1e400, Transfer-Encoding smuggling).

#include <servekit/http/model_control.hpp>
#include <servekit/http/server.hpp>
#include <servekit/repository/model_repository.hpp>

#include "fuzz_models.hpp"

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/system_error.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

/// How long one input's connection may take to be answered, and the liveness check after it.
/// Inputs that ask a model to wait (repeat_int32's DELAY and WAIT) are cut off here, not hung.
constexpr std::chrono::milliseconds read_deadline{2000};
constexpr std::chrono::milliseconds liveness_deadline{5000};

/// The server under test, started once for the whole run and never destroyed (libFuzzer ends
/// the process with exit(); stopping a server from a static destructor would race its threads).
struct live_server {
  fs::path root = servekit_fuzz::make_repository("http");
  servekit::model_repository models{root, servekit_fuzz::backends{}};
  servekit::http::server server{models, options()};
  std::thread runner;

  live_server() {
    (void)models.load_all();
    runner = std::thread{[this] { server.run(); }};
  }

  static servekit::http::server_options options() {
    servekit::http::server_options o;
    o.port = 0;
    o.thread_count = 2;
    o.max_body_bytes = std::size_t{1} << 20;
    // Load and unload run (explicit mode), so their bodies and the admin thread are fuzzed too.
    o.model_control.mode = servekit::http::model_control_mode::explicit_;
    return o;
  }
};

live_server& the_server() {
  static auto* s = new live_server; // NOLINT(cppcoreguidelines-owning-memory): see live_server
  return *s;
}

/// A blocking loopback connection whose reads give up after `deadline`. Throws
/// boost::system::system_error when the server cannot be reached.
///
/// libFuzzer's -timeout watchdog raises SIGALRM every few seconds in this thread; a blocking
/// connect() or recv() it interrupts fails with EINTR (connect is never restarted, and recv is not
/// when SO_RCVTIMEO is set), which is the harness's business to retry, not a finding.
tcp::socket connect(asio::io_context& ioc, std::uint16_t port, std::chrono::milliseconds deadline) {
  tcp::socket socket{ioc};
  const tcp::endpoint server{asio::ip::make_address("127.0.0.1"), port};
  boost::system::error_code ec;
  for (int attempt = 0; attempt < 8; ++attempt) {
    if (socket.is_open()) {
      socket.close(ec);
    }
    socket.connect(server, ec);
    if (ec != asio::error::interrupted) {
      break;
    }
  }
  if (ec) {
    throw boost::system::system_error{ec, "connect"};
  }
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(deadline.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((deadline.count() % 1000) * 1000);
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return socket;
}

/// Reads until the server closes, the deadline passes or `enough` bytes came; returns them.
std::string read_some(tcp::socket& socket, std::size_t enough,
                      std::chrono::steady_clock::time_point until) {
  std::string got;
  std::array<char, 16 * 1024> chunk{};
  while (got.size() < enough && std::chrono::steady_clock::now() < until) {
    boost::system::error_code ec;
    const std::size_t n = socket.read_some(asio::buffer(chunk), ec);
    got.append(chunk.data(), n);
    if (ec == asio::error::interrupted) {
      continue; // SIGALRM from libFuzzer's watchdog (see connect)
    }
    if (ec) {
      break; // closed, reset, or the receive timeout
    }
  }
  return got;
}

/// Sends the input on one connection, half-closes it, and reads what comes back.
void send_input(std::uint16_t port, std::string_view bytes) {
  asio::io_context ioc;
  tcp::socket socket = connect(ioc, port, read_deadline);
  boost::system::error_code ec;
  asio::write(socket, asio::buffer(bytes.data(), bytes.size()), ec); // may be cut off: fine
  socket.shutdown(tcp::socket::shutdown_send, ec);
  (void)read_some(socket, std::size_t{64} << 20, std::chrono::steady_clock::now() + read_deadline);
}

/// A fresh client is still served: GET /v2/health/live answers 200.
bool still_serves(std::uint16_t port) {
  asio::io_context ioc;
  boost::system::error_code ec;
  tcp::socket socket = connect(ioc, port, liveness_deadline);
  constexpr std::string_view live = "GET /v2/health/live HTTP/1.1\r\nHost: fuzz\r\n"
                                    "Connection: close\r\n\r\n";
  asio::write(socket, asio::buffer(live.data(), live.size()), ec);
  if (ec) {
    return false;
  }
  const std::string answer =
      read_some(socket, 12, std::chrono::steady_clock::now() + liveness_deadline);
  return answer.starts_with("HTTP/1.1 200");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  live_server& s = the_server();
  const std::uint16_t port = s.server.port();
  try {
    send_input(port, std::string_view{reinterpret_cast<const char*>(data), size});
  } catch (const boost::system::system_error& e) {
    // The client side failing (connect refused when out of descriptors...) is checked below.
    std::fprintf(stderr, "http_server_fuzz: client: %s\n", e.what());
  }
  bool serves = false;
  try {
    serves = still_serves(port);
  } catch (const boost::system::system_error& e) {
    std::fprintf(stderr, "http_server_fuzz: liveness client: %s\n", e.what());
  }
  if (!serves) {
    std::fprintf(stderr, "http_server_fuzz: after this input a fresh client is not served "
                         "(GET /v2/health/live did not answer 200)\n");
    std::abort();
  }
  return 0;
}
