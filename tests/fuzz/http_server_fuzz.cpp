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
#include <servekit/repository/backend_list.hpp>
#include <servekit/repository/model_repository.hpp>

#include "backends/accumulate.hpp"
#include "backends/add_sub.hpp"
#include "backends/identity.hpp"
#include "repeat/repeat_backend.hpp"

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
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

using fuzz_backends = servekit::backend_list<
    servekit::named_backend<"add_sub", servekit_server::add_sub_backend>,
    servekit::named_backend<"identity", servekit_server::identity_backend>,
    servekit::named_backend<"accumulate", servekit_server::accumulate_backend>,
    servekit::named_backend<"repeat", repeat::backend>>;

/// How long one input's connection may take to be answered, and the liveness check after it.
/// Inputs that ask a model to wait (repeat_int32's DELAY and WAIT) are cut off here, not hung.
constexpr std::chrono::milliseconds read_deadline{2000};
constexpr std::chrono::milliseconds liveness_deadline{5000};

/// A copy of the models the fuzzer may change (load/unload requests), in a fresh folder.
fs::path make_repository() {
  const fs::path root =
      fs::temp_directory_path() / ("servekit-http-fuzz-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const fs::path models = fs::path{SERVEKIT_SOURCE_DIR} / "examples" / "models";
  for (const char* name : {"add_sub", "accumulate", "repeat_int32"}) {
    fs::copy(models / name, root / name, fs::copy_options::recursive);
  }
  fs::create_directories(root / "text");
  std::ofstream{root / "text" / "config.json"} << R"({"name": "text", "backend": "identity",
    "max_batch_size": 4, "dynamic_batching": {},
    "input": [{"name": "text_input", "data_type": "TYPE_STRING", "dims": [-1]}],
    "output": [{"name": "text_output", "data_type": "TYPE_STRING", "dims": [-1]}]})";
  return root;
}

/// The server under test, started once for the whole run and never destroyed (libFuzzer ends
/// the process with exit(); stopping a server from a static destructor would race its threads).
struct live_server {
  fs::path root = make_repository();
  servekit::model_repository models{root, fuzz_backends{}};
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

/// A blocking loopback connection whose reads give up after `deadline`.
tcp::socket connect(asio::io_context& ioc, std::uint16_t port, std::chrono::milliseconds deadline) {
  tcp::socket socket{ioc};
  socket.connect(tcp::endpoint{asio::ip::make_address("127.0.0.1"), port});
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
  } catch (const std::system_error& e) {
    // The client side failing (connect refused when out of descriptors...) is checked below.
    std::fprintf(stderr, "http_server_fuzz: client: %s\n", e.what());
  }
  bool serves = false;
  try {
    serves = still_serves(port);
  } catch (const std::system_error&) {
  }
  if (!serves) {
    std::fprintf(stderr, "http_server_fuzz: after this input a fresh client is not served "
                         "(GET /v2/health/live did not answer 200)\n");
    std::abort();
  }
  return 0;
}
