/// \file
/// servekit-loadgen: a KServe v2 HTTP/REST load generator (Boost.Beast/Asio), for the example
/// server (examples/server) or any KServe v2 server; with --protocol grpc (built with servekit's
/// gRPC front end), KServe v2 gRPC (Triton's GRPCInferenceService) through gRPC's asynchronous
/// completion-queue client, unary or streaming, and --compare-http alternating both protocols
/// against one server (see the gRPC section below and docs/benchmarks.md, "gRPC").
///
///     servekit-loadgen --model add_sub --connections 64 --duration 5 --server-pid "$PID"
///     servekit-loadgen --model add_sub --rate 20000 --connections 128 --json
///
/// It reads the model's metadata (GET /v2/models/NAME, and /config for max_batch_size when the
/// server has it), builds one infer body with every input the metadata lists, and sends it over
/// HTTP/1.1 keep-alive connections:
/// - closed loop (default): --connections N connections, each with one request in flight;
/// - open loop (--rate R): R requests/s on a fixed timeline; a request's latency counts from its
///   scheduled time, not from when a connection was free to send it, so a server that falls
///   behind shows it in the percentiles (no coordinated omission). Connections are opened as
///   needed, up to --connections; requests beyond that wait for a free one.
///
/// Only responses completed inside the measured window (after --warmup, for --duration) count.
/// The last line of output is one JSON object:
///   requests    answers received in the window (any status) plus I/O failures
///   errors      non-200 answers plus I/O failures (connect, write, read); non_200 the former
///   throughput_rps  200 answers per second; p50_us .. max_us over 200 answers
///   server_cpu_us_per_request  (--server-pid) the server's utime+stime over the window, per
///               request; client_cpu_us_per_request is this process's own
///   baseline_*, ratio_to_baseline  (--baseline) the same load on GET /v2/health/live
///   backlog     (open loop) requests scheduled in the window but never sent: not enough
///               connections, or the server too slow
///
/// It shares the machine with the server, so it is kept cheap: the request is serialized once,
/// buffers are reused, and only the status line and headers are looked at. --self-test runs a
/// minimal in-process KServe stub instead of a real server (the ctest smoke test).

#include <utility> // Boost 1.74's asio needs it before itself under g++ 12 in C++20

#include "harness/command_line.hpp"
#include "harness/machine.hpp"
#include "harness/measure.hpp"
#include "harness/report.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#if SERVEKIT_LOADGEN_GRPC
#include <servekit/grpc/grpc_service.grpc.pb.h>

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#endif
#if SERVEKIT_LOADGEN_ABSL_MUTEX
#include <absl/synchronization/mutex.h>
#endif

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------
// Flags

struct options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;
  std::string model = "add_sub";
  std::int64_t input_size = 16;
  std::size_t connections = 64;
  double rate = 0.0; // 0: closed loop
  double duration_s = 5.0;
  double warmup_s = 1.0;
  std::size_t threads = 1;
  bool threads_given = false;
  std::optional<long> server_pid;
  bool baseline = false;
  bool json_only = false;
  bool self_test = false;
  // gRPC (KServe v2 over Triton's GRPCInferenceService)
  std::string protocol = "http";
  bool streaming = false;
  std::size_t channels = 0; // 0: one per client thread, at least 2
  bool compare_http = false;
  std::uint16_t http_port = 8000;
  std::size_t rounds = 2;
};

/// Parses the flags, or exits (0 after --help, 2 after an error).
options parse_flags(int argc, char** argv) {
  options o;
  long server_pid = 0;
  std::uint16_t http_port = 0;
  servekit_bench::command_line cl{"servekit-loadgen"};
  cl.text("--host", o.host, {}, "server address (127.0.0.1)")
      .integer("--port", o.port, 0, 65535, "server port (8000)")
      .text("--model", o.model, {}, "model to infer (add_sub)")
      .integer("--input-size", o.input_size, 1, 1e9,
               "size of each variable (-1) dimension of an input, batch dimension aside (16)")
      .integer("--connections", o.connections, 1, 100000,
               "closed loop: connections, one request in flight on each; open loop: the most "
               "connections opened (64)")
      .number("--rate", o.rate, 1e-3, 1e8, "open loop at X requests/s (default: closed loop)")
      .number("--duration", o.duration_s, 0.01, 1e6, "measured seconds (5)")
      .number("--warmup", o.warmup_s, 0, 1e6, "seconds before measuring (1)")
      .integer("--threads", o.threads, 1, 1024,
               "client I/O threads (HTTP: 1; gRPC: one per CPU; if given, both protocols of "
               "--compare-http)")
      .integer("--server-pid", server_pid, 1, 1e9,
               "report the server's CPU time per request (from /proc/PID/stat)")
      .flag("--baseline", o.baseline,
            "also run the same load on GET /v2/health/live and report the ratio")
      .flag("--json", o.json_only, "print only the JSON summary line")
      .flag("--self-test", o.self_test,
            "run against an in-process KServe stub (smoke test); fails on any error")
      .text("--protocol", o.protocol, {}, "http or grpc (http); with grpc, --port is the gRPC port")
      .flag("--streaming", o.streaming,
            "grpc: ModelStreamInfer, --connections bidirectional streams with one request in "
            "flight on each; reports responses/s too (for decoupled models)")
      .integer("--channels", o.channels, 1, 100000,
               "grpc: channels (TCP connections) the calls are spread over (one per client "
               "thread, at least 2)")
      .flag("--compare-http", o.compare_http,
            "grpc: alternate gRPC and HTTP windows against the same server (--http-port) and "
            "report both")
      .integer("--http-port", http_port, 1, 65535, "--compare-http: the server's HTTP port (8000)")
      .integer("--rounds", o.rounds, 1, 1000,
               "--compare-http: windows per protocol, each --duration/ROUNDS seconds (2)")
      .parse(argc, argv);
  if (cl.given("--http-port")) {
    o.http_port = http_port;
  }
  if (o.protocol != "http" && o.protocol != "grpc") {
    std::fprintf(stderr, "servekit-loadgen: --protocol must be http or grpc, not '%s'\n",
                 o.protocol.c_str());
    std::exit(2);
  }
  if (o.protocol != "grpc" && (o.streaming || o.compare_http)) {
    std::fprintf(stderr, "servekit-loadgen: --streaming and --compare-http need --protocol grpc\n");
    std::exit(2);
  }
  if (o.rate > 0 && (o.streaming || o.compare_http || o.baseline) && o.protocol == "grpc") {
    std::fprintf(stderr, "servekit-loadgen: with --protocol grpc, --rate is for unary calls "
                         "only (no --streaming, --compare-http or --baseline)\n");
    std::exit(2);
  }
  if (o.protocol == "grpc" && (o.baseline || o.self_test)) {
    std::fprintf(stderr, "servekit-loadgen: --baseline and --self-test are HTTP only\n");
    std::exit(2);
  }
  if (cl.given("--server-pid")) {
    o.server_pid = server_pid;
  }
  o.threads_given = cl.given("--threads");
  o.threads = std::min(o.threads, o.connections);
  return o;
}

// ---------------------------------------------------------------------------------------------
// Set-up requests (synchronous, before the load)

struct reply {
  unsigned status = 0;
  std::string body;
};

reply http_get(const tcp::endpoint& endpoint, const std::string& host, const std::string& target) {
  asio::io_context io;
  beast::tcp_stream stream{io};
  stream.expires_after(10s);
  stream.connect(endpoint);
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, host);
  http::write(stream, request);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(stream, buffer, response);
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return {response.result_int(), std::move(response.body())};
}

/// One value of a KServe v2 datatype, as JSON text.
std::string json_value(std::string_view datatype, std::int64_t i) {
  if (datatype == "BOOL") {
    return i % 2 == 0 ? "true" : "false";
  }
  if (datatype == "BYTES") {
    return fmt::format("\"s{}\"", i % 10);
  }
  if (datatype == "FP32" || datatype == "FP64" || datatype == "FP16" || datatype == "BF16") {
    return fmt::format("{}", static_cast<double>(i % 20) * 0.5);
  }
  return fmt::format("{}", i % 100); // integers, signed or not
}

/// The infer body: every input the metadata lists, with its datatype and a concrete shape. A
/// leading -1 is the batch dimension (1) when the model batches (max_batch_size > 0 in its
/// config, or, without a config endpoint, whenever the shape starts with -1); other -1 dims take
/// --input-size.
std::string make_infer_body(const nlohmann::json& metadata, std::optional<bool> batching,
                            std::int64_t input_size) {
  const auto& inputs = metadata.at("inputs");
  if (!inputs.is_array() || inputs.empty()) {
    throw std::runtime_error{"the model's metadata lists no inputs"};
  }
  std::string body = R"({"inputs":[)";
  bool first_input = true;
  for (const auto& input : inputs) {
    const auto name = input.at("name").get<std::string>();
    const auto datatype = input.at("datatype").get<std::string>();
    std::vector<std::int64_t> shape;
    for (const auto& d : input.at("shape")) {
      shape.push_back(d.get<std::int64_t>());
    }
    const bool has_batch_dim = batching.value_or(!shape.empty() && shape.front() == -1);
    std::int64_t count = 1;
    for (std::size_t k = 0; k < shape.size(); ++k) {
      if (shape[k] < 0) {
        shape[k] = (k == 0 && has_batch_dim) ? 1 : input_size;
      }
      count *= shape[k];
    }
    if (count > (std::int64_t{1} << 26)) {
      throw std::runtime_error{fmt::format("input '{}' would have {} elements", name, count)};
    }
    body += fmt::format(R"({}{{"name":{},"datatype":{},"shape":[)", first_input ? "" : ",",
                        nlohmann::json(name).dump(), nlohmann::json(datatype).dump());
    for (std::size_t k = 0; k < shape.size(); ++k) {
      body += fmt::format("{}{}", k == 0 ? "" : ",", shape[k]);
    }
    body += R"(],"data":[)";
    for (std::int64_t i = 0; i < count; ++i) {
      if (i != 0) {
        body += ',';
      }
      body += json_value(datatype, i);
    }
    body += "]}";
    first_input = false;
  }
  body += "]}";
  return body;
}

// ---------------------------------------------------------------------------------------------
// CPU time

/// utime + stime of a process, in microseconds; nullopt when /proc/PID/stat is unreadable.
std::optional<double> process_cpu_us(long pid) {
  std::ifstream in{fmt::format("/proc/{}/stat", pid)};
  std::string stat{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  // The command name (field 2) may hold spaces and parentheses: count fields after the last ')'.
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream fields{stat.substr(paren + 1)};
  std::string field;
  unsigned long long utime = 0;
  unsigned long long stime = 0;
  for (int k = 3; k <= 15 && fields >> field; ++k) { // field 3 is the state
    if (k == 14) {
      utime = std::stoull(field);
    } else if (k == 15) {
      stime = std::stoull(field);
    }
  }
  const long ticks = sysconf(_SC_CLK_TCK);
  return static_cast<double>(utime + stime) * 1e6 / static_cast<double>(ticks > 0 ? ticks : 100);
}

double self_cpu_us() { return servekit_bench::process_usage::now().cpu_s * 1e6; }

// ---------------------------------------------------------------------------------------------
// The load

/// What every worker shares, fixed before the load starts.
struct plan {
  tcp::endpoint endpoint;
  std::string request; // the whole HTTP request, serialized once
  bool open_loop = false;
  double rate = 0; // open loop: requests/s over all workers
  std::size_t threads = 1;
  clock_type::time_point start;
  clock_type::time_point window_begin;
  clock_type::time_point window_end;
};

struct worker_stats {
  std::vector<std::int64_t> latencies_ns; // 200 answers completed in the window
  std::uint64_t answered = 0;             // any status, in the window
  std::uint64_t non_200 = 0;
  std::uint64_t io_errors = 0;
  std::uint64_t backlog = 0;
  std::size_t connections_opened = 0;
  std::uint64_t responses = 0; // gRPC streaming: data responses in the window
};

/// The first error body, printed once per process.
std::atomic<bool> error_printed{false};

class worker;

/// One keep-alive connection with at most one request in flight.
class connection {
public:
  connection(worker& owner, asio::io_context& io) : owner_{owner}, socket_{io}, retry_{io} {}

  void connect();
  void send(clock_type::time_point scheduled);
  void close() {
    beast::error_code ignored;
    socket_.close(ignored);
    retry_.cancel();
  }

private:
  void on_response(const beast::error_code& ec);
  void fail(const beast::error_code& ec);

  worker& owner_;
  tcp::socket socket_;
  asio::steady_timer retry_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
  clock_type::time_point scheduled_{};
  bool busy_ = false;
};

/// One I/O thread: its own io_context, connections and statistics (nothing shared but `plan`).
class worker {
public:
  worker(const plan& p, std::size_t index, std::size_t max_connections)
      : plan_{p}, index_{index},
        max_connections_{max_connections}, tick_{io_}, end_{io_}, grace_{io_} {}

  void run() {
    stats_.latencies_ns.reserve(1 << 16);
    end_.expires_at(plan_.window_end);
    end_.async_wait([this](const beast::error_code& ec) {
      if (!ec) {
        stop();
      }
    });
    if (plan_.open_loop) {
      schedule_next();
    } else {
      for (std::size_t i = 0; i < max_connections_; ++i) {
        open_connection();
      }
    }
    io_.run();
  }

  worker_stats& stats() { return stats_; }

  // --- called by connections ---

  /// A connection can take a request: the next one in line (open loop), a new one (closed
  /// loop), or none while stopping.
  void ready(connection& c) {
    if (stopping_) {
      return;
    }
    if (!plan_.open_loop) {
      c.send(clock_type::now());
    } else if (!pending_.empty()) {
      const auto t = pending_.front();
      pending_.pop_front();
      c.send(t);
    } else {
      idle_.push_back(&c);
    }
  }

  void sent() { ++in_flight_; }

  void completed(clock_type::time_point scheduled, unsigned status, const std::string& body) {
    --in_flight_;
    const auto now = clock_type::now();
    if (now >= plan_.window_begin && now < plan_.window_end) {
      ++stats_.answered;
      if (status == 200) {
        stats_.latencies_ns.push_back(
            std::chrono::duration_cast<std::chrono::nanoseconds>(now - scheduled).count());
      } else {
        ++stats_.non_200;
      }
    }
    if (status != 200 && !error_printed.exchange(true)) {
      std::fprintf(stderr, "servekit-loadgen: first error: HTTP %u: %s\n", status, body.c_str());
    }
    maybe_finish();
  }

  void failed(bool was_in_flight, const beast::error_code& ec) {
    if (was_in_flight) {
      --in_flight_;
    }
    const auto now = clock_type::now();
    if (!stopping_ && now >= plan_.window_begin && now < plan_.window_end) {
      ++stats_.io_errors;
    }
    if (!stopping_ && !error_printed.exchange(true)) {
      std::fprintf(stderr, "servekit-loadgen: first error: %s\n", ec.message().c_str());
    }
    maybe_finish();
  }

  [[nodiscard]] bool stopping() const { return stopping_; }
  [[nodiscard]] const plan& the_plan() const { return plan_; }

private:
  void open_connection() {
    connections_.push_back(std::make_unique<connection>(*this, io_));
    ++stats_.connections_opened;
    connections_.back()->connect();
  }

  /// Open loop: this worker's share of the timeline is every `threads`-th slot, from its index.
  [[nodiscard]] clock_type::time_point slot_time(std::uint64_t k) const {
    const double seconds =
        static_cast<double>(k * plan_.threads + index_) / plan_.rate; // slot k of this worker
    return plan_.start +
           std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
  }

  void schedule_next() {
    const auto next = slot_time(next_slot_);
    if (next >= plan_.window_end) {
      return;
    }
    tick_.expires_at(next);
    tick_.async_wait([this](const beast::error_code& ec) {
      if (ec || stopping_) {
        return;
      }
      // Every slot that is due, even if the timer fired late: they keep their scheduled times.
      const auto now = clock_type::now();
      for (auto t = slot_time(next_slot_); t <= now && t < plan_.window_end;
           t = slot_time(++next_slot_)) {
        dispatch(t);
      }
      schedule_next();
    });
  }

  void dispatch(clock_type::time_point scheduled) {
    if (!idle_.empty()) {
      connection* c = idle_.back();
      idle_.pop_back();
      c->send(scheduled);
      return;
    }
    pending_.push_back(scheduled);
    if (connections_.size() < max_connections_) {
      open_connection(); // takes the request once connected
    }
  }

  void stop() {
    stopping_ = true;
    tick_.cancel();
    stats_.backlog = pending_.size();
    pending_.clear();
    // Answers to requests still in flight are outside the window; wait a little for them so
    // the server is not left writing to closed sockets mid-response, then close.
    grace_.expires_after(2s);
    grace_.async_wait([this](const beast::error_code& ec) {
      if (!ec) {
        finish();
      }
    });
    maybe_finish();
  }

  void maybe_finish() {
    if (stopping_ && in_flight_ == 0) {
      finish();
    }
  }

  void finish() {
    grace_.cancel();
    for (auto& c : connections_) {
      c->close();
    }
    io_.stop();
  }

  const plan& plan_;
  std::size_t index_;
  std::size_t max_connections_;
  asio::io_context io_{1}; // before everything that uses it
  asio::steady_timer tick_;
  asio::steady_timer end_;
  asio::steady_timer grace_;
  std::vector<std::unique_ptr<connection>> connections_;
  std::vector<connection*> idle_;
  std::deque<clock_type::time_point> pending_;
  std::uint64_t next_slot_ = 0;
  std::size_t in_flight_ = 0;
  bool stopping_ = false;
  worker_stats stats_;
};

void connection::connect() {
  socket_.async_connect(owner_.the_plan().endpoint, [this](const beast::error_code& ec) {
    if (ec) {
      fail(ec);
      return;
    }
    beast::error_code ignored;
    socket_.set_option(tcp::no_delay{true}, ignored);
    owner_.ready(*this);
  });
}

void connection::send(clock_type::time_point scheduled) {
  scheduled_ = scheduled;
  busy_ = true;
  owner_.sent();
  asio::async_write(socket_, asio::buffer(owner_.the_plan().request),
                    [this](const beast::error_code& ec, std::size_t) {
                      if (ec) {
                        fail(ec);
                        return;
                      }
                      parser_.emplace();
                      parser_->body_limit(std::uint64_t{64} << 20);
                      http::async_read(socket_, buffer_, *parser_,
                                       [this](const beast::error_code& read_ec, std::size_t) {
                                         on_response(read_ec);
                                       });
                    });
}

void connection::on_response(const beast::error_code& ec) {
  if (ec) {
    fail(ec);
    return;
  }
  busy_ = false;
  auto& response = parser_->get();
  const bool keep_alive = response.keep_alive();
  owner_.completed(scheduled_, response.result_int(), response.body());
  if (!keep_alive) {
    beast::error_code ignored;
    socket_.close(ignored);
    buffer_.clear();
    if (!owner_.stopping()) {
      connect();
    }
    return;
  }
  owner_.ready(*this);
}

void connection::fail(const beast::error_code& ec) {
  const bool was_busy = busy_;
  busy_ = false;
  beast::error_code ignored;
  socket_.close(ignored);
  buffer_.clear();
  owner_.failed(was_busy, ec);
  if (owner_.stopping()) {
    return;
  }
  // Reconnect after a pause, so a server that refuses connections is not spun against.
  retry_.expires_after(10ms);
  retry_.async_wait([this](const beast::error_code& timer_ec) {
    if (!timer_ec && !owner_.stopping()) {
      connect();
    }
  });
}

struct run_result {
  std::vector<double> latencies_us; // sorted; successful answers in the window
  std::uint64_t responses = 0;      // --streaming: non-final responses in the window
  std::uint64_t requests = 0;
  std::uint64_t errors = 0;
  std::uint64_t non_200 = 0;
  std::uint64_t backlog = 0;
  std::size_t connections_opened = 0;
  double throughput_rps = 0;
  double p50_us = 0;
  double p90_us = 0;
  double p99_us = 0;
  double max_us = 0;
  std::optional<double> server_cpu_us_per_request;
  double client_cpu_us_per_request = 0;
};

/// Runs every worker (W: run(), stats() -> worker_stats) on its own thread, reads the CPU
/// clocks at the window's edges, and sums the workers' statistics.
template <class Worker>
run_result measure_workers(const options& o, const plan& p,
                           std::vector<std::unique_ptr<Worker>>& workers) {
  std::vector<std::thread> threads;
  for (auto& w : workers) {
    threads.emplace_back([&w] { w->run(); });
  }

  std::this_thread::sleep_until(p.window_begin);
  const std::optional<double> server_before =
      o.server_pid ? process_cpu_us(*o.server_pid) : std::nullopt;
  const double self_before = self_cpu_us();
  std::this_thread::sleep_until(p.window_end);
  const std::optional<double> server_after =
      o.server_pid ? process_cpu_us(*o.server_pid) : std::nullopt;
  const double self_after = self_cpu_us();
  for (auto& t : threads) {
    t.join();
  }

  run_result r;
  std::vector<std::int64_t> all;
  for (auto& w : workers) {
    const worker_stats& s = w->stats();
    r.requests += s.answered + s.io_errors;
    r.errors += s.non_200 + s.io_errors;
    r.non_200 += s.non_200;
    r.backlog += s.backlog;
    r.connections_opened += s.connections_opened;
    r.responses += s.responses;
    all.insert(all.end(), s.latencies_ns.begin(), s.latencies_ns.end());
  }
  std::vector<double>& us = r.latencies_us;
  us.reserve(all.size());
  for (const auto ns : all) {
    us.push_back(static_cast<double>(ns) / 1e3);
  }
  std::sort(us.begin(), us.end()); // percentile() sorts its copy again, cheaply once sorted
  r.throughput_rps = static_cast<double>(us.size()) / o.duration_s;
  r.p50_us = servekit_bench::percentile(us, 0.50);
  r.p90_us = servekit_bench::percentile(us, 0.90);
  r.p99_us = servekit_bench::percentile(us, 0.99);
  r.max_us = us.empty() ? 0.0 : us.back();
  if (server_before && server_after && r.requests > 0) {
    r.server_cpu_us_per_request =
        (*server_after - *server_before) / static_cast<double>(r.requests);
  }
  if (r.requests > 0) {
    r.client_cpu_us_per_request = (self_after - self_before) / static_cast<double>(r.requests);
  }
  return r;
}

/// The plan's timeline: starts 10 ms from now, so every worker starts at the same instant.
void set_timeline(plan& p, const options& o) {
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s));
  };
  p.start = clock_type::now() + 10ms;
  p.window_begin = p.start + seconds(o.warmup_s);
  p.window_end = p.window_begin + seconds(o.duration_s);
}

run_result run_load(const options& o, const tcp::endpoint& endpoint, std::string request) {
  plan p;
  p.endpoint = endpoint;
  p.request = std::move(request);
  p.open_loop = o.rate > 0;
  p.rate = o.rate;
  p.threads = o.threads;
  set_timeline(p, o);

  std::vector<std::unique_ptr<worker>> workers;
  for (std::size_t i = 0; i < o.threads; ++i) {
    const std::size_t share = o.connections / o.threads + (i < o.connections % o.threads ? 1 : 0);
    workers.push_back(std::make_unique<worker>(p, i, share));
  }
  return measure_workers(o, p, workers);
}

// ---------------------------------------------------------------------------------------------
// gRPC (--protocol grpc): KServe v2 over Triton's GRPCInferenceService, with gRPC's asynchronous
// completion-queue client API: each client thread owns one completion queue and a fixed set of
// call objects (no thread per call), the calls spread over --channels channels.

#if SERVEKIT_LOADGEN_GRPC

/// What every gRPC worker shares, fixed before the load starts.
struct grpc_plan : plan {
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs; // one per channel
  inference::ModelInferRequest request; // serialized by each call as it starts
  bool streaming = false;
};

/// The address of a channel: "host:port", IPv6 literals in brackets.
std::string grpc_target(const std::string& host, std::uint16_t port) {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                             : fmt::format("{}:{}", host, port);
}

/// A channel on its own TCP connection: gRPC shares one connection among channels with the same
/// target and arguments, so each gets a distinct argument.
std::shared_ptr<grpc::Channel> make_channel(const options& o, std::size_t index) {
  grpc::ChannelArguments args;
  args.SetInt("servekit.loadgen.channel", static_cast<int>(index));
  args.SetMaxReceiveMessageSize(64 << 20);
  // The client keeps out of the figures what it can: no retry filter and the minimal filter stack
  // (no deadlines, no census), about 3 us of client CPU per call less.
  args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  return grpc::CreateCustomChannel(grpc_target(o.host, o.port), grpc::InsecureChannelCredentials(),
                                   args);
}

/// One element of a KServe v2 datatype, appended to raw contents (little-endian). Signed
/// integers and floats vary; unsigned integers are 0, so repeat_int32's DELAY and WAIT (ms) are.
void append_raw_value(std::string& raw, std::string_view datatype, std::int64_t i) {
  const auto append = [&raw](auto value) {
    char bytes[sizeof(value)];
    std::memcpy(bytes, &value, sizeof(value));
    raw.append(bytes, sizeof(value));
  };
  if (datatype == "BOOL" || datatype == "INT8") {
    append(static_cast<std::int8_t>(datatype == "BOOL" ? i % 2 : i % 100));
  } else if (datatype == "UINT8") {
    append(std::uint8_t{0});
  } else if (datatype == "INT16") {
    append(static_cast<std::int16_t>(i % 100));
  } else if (datatype == "UINT16" || datatype == "FP16" || datatype == "BF16") {
    append(std::uint16_t{0});
  } else if (datatype == "INT32") {
    append(static_cast<std::int32_t>(i % 100));
  } else if (datatype == "UINT32") {
    append(std::uint32_t{0});
  } else if (datatype == "INT64") {
    append(static_cast<std::int64_t>(i % 100));
  } else if (datatype == "UINT64") {
    append(std::uint64_t{0});
  } else if (datatype == "FP32") {
    append(static_cast<float>(i % 20) * 0.5F);
  } else if (datatype == "FP64") {
    append(static_cast<double>(i % 20) * 0.5);
  } else if (datatype == "BYTES") {
    const std::string value = fmt::format("s{}", i % 10);
    append(static_cast<std::uint32_t>(value.size()));
    raw += value;
  } else {
    throw std::runtime_error{fmt::format("unknown datatype '{}'", datatype)};
  }
}

/// The infer request, as make_infer_body builds the HTTP one (same shapes), with every input in
/// raw_input_contents.
inference::ModelInferRequest make_grpc_request(const inference::ModelMetadataResponse& metadata,
                                               std::optional<bool> batching, const options& o) {
  if (metadata.inputs().empty()) {
    throw std::runtime_error{"the model's metadata lists no inputs"};
  }
  inference::ModelInferRequest request;
  request.set_model_name(o.model);
  for (const auto& input : metadata.inputs()) {
    std::vector<std::int64_t> shape{input.shape().begin(), input.shape().end()};
    const bool has_batch_dim = batching.value_or(!shape.empty() && shape.front() == -1);
    std::int64_t count = 1;
    for (std::size_t k = 0; k < shape.size(); ++k) {
      if (shape[k] < 0) {
        shape[k] = (k == 0 && has_batch_dim) ? 1 : o.input_size;
      }
      count *= shape[k];
    }
    if (count > (std::int64_t{1} << 26)) {
      throw std::runtime_error{
          fmt::format("input '{}' would have {} elements", input.name(), count)};
    }
    auto& tensor = *request.add_inputs();
    tensor.set_name(input.name());
    tensor.set_datatype(input.datatype());
    for (const auto d : shape) {
      tensor.add_shape(d);
    }
    std::string& raw = *request.add_raw_input_contents();
    for (std::int64_t i = 0; i < count; ++i) {
      append_raw_value(raw, input.datatype(), i);
    }
  }
  if (o.streaming) {
    // A decoupled model's flag-only final response tells the client the request is complete.
    (*request.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  }
  return request;
}

/// Something a completion queue hands back: every tag is one of these, and goes onto the queue
/// as a grpc_tag* (as_tag), so the queue's void* converts back exactly.
struct grpc_tag {
  virtual void done(bool ok) = 0;

protected:
  ~grpc_tag() = default;
};

void* as_tag(grpc_tag* t) { return t; }

class grpc_worker;

/// A ModelInfer call object, reused for one call after another.
class unary_call final : public grpc_tag {
public:
  unary_call(grpc_worker& owner, inference::GRPCInferenceService::Stub& stub)
      : owner_{owner}, stub_{stub} {}

  void start(clock_type::time_point scheduled);
  void done(bool ok) override;
  void cancel() {
    if (busy_) {
      context_->TryCancel();
    }
  }

private:
  grpc_worker& owner_;
  inference::GRPCInferenceService::Stub& stub_;
  std::optional<grpc::ClientContext> context_; // one per call
  std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> reader_;
  inference::ModelInferResponse response_;
  grpc::Status status_;
  clock_type::time_point scheduled_{};
  bool busy_ = false;
};

/// A ModelStreamInfer stream with one request in flight: a read always posted, a request written
/// when the previous one got its final response.
class stream_call {
public:
  stream_call(grpc_worker& owner, inference::GRPCInferenceService::Stub& stub)
      : owner_{owner}, stub_{stub} {}

  void open();
  void cancel() { context_.TryCancel(); }

private:
  /// One kind of operation on the stream, so each has its own tag.
  struct op final : grpc_tag {
    op(stream_call& c, void (stream_call::*f)(bool)) : call{c}, on_done{f} {}
    void done(bool ok) override { (call.*on_done)(ok); }
    stream_call& call;
    void (stream_call::*on_done)(bool);
  };

  void on_start(bool ok);
  void write_next();
  void on_write(bool ok);
  void read();
  void on_read(bool ok);
  void finish();
  void on_finish(bool ok);

  grpc_worker& owner_;
  inference::GRPCInferenceService::Stub& stub_;
  op start_op_{*this, &stream_call::on_start};
  op write_op_{*this, &stream_call::on_write};
  op read_op_{*this, &stream_call::on_read};
  op finish_op_{*this, &stream_call::on_finish};
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<inference::ModelInferRequest,
                                                inference::ModelStreamInferResponse>>
      stream_;
  inference::ModelStreamInferResponse response_;
  grpc::Status status_;
  clock_type::time_point scheduled_{};
  bool writes_done_ = false;
  bool finishing_ = false;
};

/// One client thread: its completion queue, call objects and statistics.
class grpc_worker {
public:
  grpc_worker(const grpc_plan& p, std::size_t index, std::size_t calls)
      : plan_{p}, index_{index}, calls_{calls} {}

  void run() {
    stats_.latencies_ns.reserve(1 << 16);
    for (std::size_t i = 0; i < calls_; ++i) {
      // Calls go round-robin over the channels, across workers.
      auto& stub = *plan_.stubs[(index_ + i * plan_.threads) % plan_.stubs.size()];
      if (plan_.streaming) {
        streams_.push_back(std::make_unique<stream_call>(*this, stub));
        streams_.back()->open();
      } else {
        unary_.push_back(std::make_unique<unary_call>(*this, stub));
        idle_.push_back(unary_.back().get());
      }
    }
    if (plan_.open_loop) {
      schedule_next();
    } else {
      while (!idle_.empty()) {
        take_idle()->start(clock_type::now());
      }
    }
    // Calls carry no deadline (gRPC arms a timer for each one that has): calls and streams still
    // open 10 s after the window (a stalled server) are cancelled instead.
    give_up_.Set(&queue_, to_system(plan_.window_end + 10s), as_tag(&give_up_tag_));
    ++outstanding_;
    void* tag = nullptr;
    bool ok = false;
    while (outstanding_ > 1 && queue_.Next(&tag, &ok)) { // all but give_up_
      --outstanding_;
      static_cast<grpc_tag*>(tag)->done(ok);
    }
    give_up_.Cancel();
    while (outstanding_ > 0 && queue_.Next(&tag, &ok)) {
      --outstanding_;
      static_cast<grpc_tag*>(tag)->done(ok);
    }
    queue_.Shutdown();
    while (queue_.Next(&tag, &ok)) {
    }
  }

  worker_stats& stats() { return stats_; }
  grpc::CompletionQueue& queue() { return queue_; }
  const grpc_plan& the_plan() const { return plan_; }
  void posted() { ++outstanding_; }

  /// Past the window's end: no new requests (completions after it are not counted).
  [[nodiscard]] bool stopping() const { return clock_type::now() >= plan_.window_end; }

  /// A request's answer: ok, or an error (its message printed once per process).
  void completed(clock_type::time_point scheduled, bool ok, const std::string& error) {
    const auto now = clock_type::now();
    if (now >= plan_.window_begin && now < plan_.window_end) {
      ++stats_.answered;
      if (ok) {
        stats_.latencies_ns.push_back(
            std::chrono::duration_cast<std::chrono::nanoseconds>(now - scheduled).count());
      } else {
        ++stats_.non_200;
      }
    }
    if (!ok && !error_printed.exchange(true)) {
      std::fprintf(stderr, "servekit-loadgen: first error: %s\n", error.c_str());
    }
  }

  void response_received() {
    const auto now = clock_type::now();
    if (now >= plan_.window_begin && now < plan_.window_end) {
      ++stats_.responses;
    }
  }

  /// A transport failure (a stream broken before its request's answer).
  void failed(const std::string& error) {
    const auto now = clock_type::now();
    if (now >= plan_.window_begin && now < plan_.window_end) {
      ++stats_.io_errors;
    }
    if (!error_printed.exchange(true)) {
      std::fprintf(stderr, "servekit-loadgen: first error: %s\n", error.c_str());
    }
  }

  /// A unary call is free again: the next request (closed loop: right away; open loop: the
  /// oldest due one), or it waits.
  void unary_free(unary_call& c) {
    if (stopping()) {
      return;
    }
    if (!plan_.open_loop) {
      c.start(clock_type::now());
    } else if (!pending_.empty()) {
      const auto t = pending_.front();
      pending_.pop_front();
      c.start(t);
    } else {
      idle_.push_back(&c);
    }
  }

private:
  /// The open loop's timer: a grpc::Alarm on this worker's queue.
  struct tick final : grpc_tag {
    explicit tick(grpc_worker& w) : worker{w} {}
    void done(bool ok) override { worker.on_tick(ok); }
    grpc_worker& worker;
  };

  /// The alarm after the window: cancels whatever is still open (ok false: not needed).
  struct give_up final : grpc_tag {
    explicit give_up(grpc_worker& w) : worker{w} {}
    void done(bool ok) override {
      if (ok) {
        worker.cancel_all();
      }
    }
    grpc_worker& worker;
  };

  void cancel_all() {
    for (auto& c : unary_) {
      c->cancel();
    }
    for (auto& c : streams_) {
      c->cancel();
    }
  }

  static std::chrono::system_clock::time_point to_system(clock_type::time_point t) {
    return std::chrono::system_clock::now() +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(t - clock_type::now());
  }

  unary_call* take_idle() {
    unary_call* c = idle_.back();
    idle_.pop_back();
    return c;
  }

  [[nodiscard]] clock_type::time_point slot_time(std::uint64_t k) const {
    const double seconds = static_cast<double>(k * plan_.threads + index_) / plan_.rate;
    return plan_.start +
           std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
  }

  /// Open loop: the alarm for the next slot, or for the window's end.
  void schedule_next() {
    const auto next = std::min(slot_time(next_slot_), plan_.window_end);
    alarm_.Set(&queue_, to_system(next), as_tag(&tick_));
    ++outstanding_;
  }

  void on_tick(bool ok) {
    if (!ok) {
      return;
    }
    const auto now = clock_type::now();
    if (now >= plan_.window_end) {
      stats_.backlog = pending_.size(); // due in the window but never sent
      pending_.clear();
      return;
    }
    for (auto t = slot_time(next_slot_); t <= now && t < plan_.window_end;
         t = slot_time(++next_slot_)) {
      if (!idle_.empty()) {
        take_idle()->start(t);
      } else {
        pending_.push_back(t);
      }
    }
    schedule_next();
  }

  const grpc_plan& plan_;
  std::size_t index_;
  std::size_t calls_;
  grpc::CompletionQueue queue_;
  std::vector<std::unique_ptr<unary_call>> unary_;
  std::vector<std::unique_ptr<stream_call>> streams_;
  std::vector<unary_call*> idle_;
  std::deque<clock_type::time_point> pending_;
  grpc::Alarm alarm_;
  tick tick_{*this};
  grpc::Alarm give_up_;
  give_up give_up_tag_{*this};
  std::uint64_t next_slot_ = 0;
  std::size_t outstanding_ = 0; // tags posted on queue_ and not yet returned
  worker_stats stats_;
};

void unary_call::start(clock_type::time_point scheduled) {
  scheduled_ = scheduled;
  context_.emplace(); // a ClientContext serves one call
  response_.Clear();
  reader_ = stub_.AsyncModelInfer(&*context_, owner_.the_plan().request, &owner_.queue());
  reader_->Finish(&response_, &status_, as_tag(this));
  busy_ = true;
  owner_.posted();
}

void unary_call::done(bool /*ok: always true for Finish*/) {
  busy_ = false;
  if (status_.ok()) {
    owner_.completed(scheduled_, true, {});
  } else {
    owner_.completed(scheduled_, false,
                     fmt::format("gRPC status {}: {}", static_cast<int>(status_.error_code()),
                                 status_.error_message()));
  }
  owner_.unary_free(*this);
}

void stream_call::open() {
  stream_ = stub_.AsyncModelStreamInfer(&context_, &owner_.queue(), as_tag(&start_op_));
  owner_.posted();
}

void stream_call::on_start(bool ok) {
  if (!ok) {
    finish();
    return;
  }
  read();
  write_next();
}

void stream_call::write_next() {
  if (owner_.stopping()) {
    // No more requests: the server ends the stream, and the posted read sees it end.
    writes_done_ = true;
    stream_->WritesDone(as_tag(&write_op_));
    owner_.posted();
    return;
  }
  scheduled_ = clock_type::now();
  stream_->Write(owner_.the_plan().request, as_tag(&write_op_));
  owner_.posted();
}

void stream_call::on_write(bool ok) {
  if (!ok) {
    context_.TryCancel(); // the read fails too, and finishes the stream
  }
}

void stream_call::read() {
  stream_->Read(&response_, as_tag(&read_op_));
  owner_.posted();
}

void stream_call::on_read(bool ok) {
  if (!ok) {
    finish();
    return;
  }
  if (!response_.error_message().empty()) {
    owner_.completed(scheduled_, false, response_.error_message());
    write_next();
  } else {
    const auto& r = response_.infer_response();
    const auto it = r.parameters().find("triton_final_response");
    const bool final = it != r.parameters().end() && it->second.bool_param();
    if (!r.outputs().empty()) {
      owner_.response_received();
    }
    if (final) {
      owner_.completed(scheduled_, true, {});
      write_next();
    }
  }
  read();
}

void stream_call::finish() {
  if (finishing_) {
    return;
  }
  finishing_ = true;
  stream_->Finish(&status_, as_tag(&finish_op_));
  owner_.posted();
}

void stream_call::on_finish(bool /*ok*/) {
  if (!writes_done_ || !status_.ok()) {
    owner_.failed(fmt::format("stream ended: gRPC status {}: {}",
                              static_cast<int>(status_.error_code()), status_.error_message()));
  }
}

/// The model's metadata and max_batch_size over gRPC (ModelMetadata, ModelConfig), and the
/// request built from them.
inference::ModelInferRequest prepare_grpc_request(const options& o,
                                                  inference::GRPCInferenceService::Stub& stub) {
  const auto deadline = [] { return std::chrono::system_clock::now() + 10s; };
  inference::ModelMetadataRequest metadata_request;
  metadata_request.set_name(o.model);
  inference::ModelMetadataResponse metadata;
  grpc::ClientContext metadata_context;
  metadata_context.set_deadline(deadline());
  if (const grpc::Status s = stub.ModelMetadata(&metadata_context, metadata_request, &metadata);
      !s.ok()) {
    throw std::runtime_error{fmt::format("gRPC ModelMetadata({}) at {}: status {}: {}", o.model,
                                         grpc_target(o.host, o.port),
                                         static_cast<int>(s.error_code()), s.error_message())};
  }
  std::optional<bool> batching;
  inference::ModelConfigRequest config_request;
  config_request.set_name(o.model);
  inference::ModelConfigResponse config;
  grpc::ClientContext config_context;
  config_context.set_deadline(deadline());
  if (stub.ModelConfig(&config_context, config_request, &config).ok()) {
    batching = config.config().max_batch_size() > 0;
  }
  return make_grpc_request(metadata, batching, o);
}

/// One gRPC window (warm-up, then --duration measured), unary or streaming.
run_result run_grpc_load(const options& o, const std::shared_ptr<grpc_plan>& p) {
  p->open_loop = o.rate > 0;
  p->rate = o.rate;
  p->threads = o.threads;
  set_timeline(*p, o);
  std::vector<std::unique_ptr<grpc_worker>> workers;
  for (std::size_t i = 0; i < o.threads; ++i) {
    const std::size_t share = o.connections / o.threads + (i < o.connections % o.threads ? 1 : 0);
    workers.push_back(std::make_unique<grpc_worker>(*p, i, share));
  }
  run_result r = measure_workers(o, *p, workers);
  r.connections_opened = p->stubs.size();
  return r;
}

std::shared_ptr<grpc_plan> make_grpc_plan(const options& o) {
  auto p = std::make_shared<grpc_plan>();
  const std::size_t channels =
      o.channels > 0 ? o.channels : std::min(o.connections, std::max<std::size_t>(o.threads, 2));
  for (std::size_t i = 0; i < channels; ++i) {
    p->stubs.push_back(inference::GRPCInferenceService::NewStub(make_channel(o, i)));
  }
  p->request = prepare_grpc_request(o, *p->stubs.front());
  p->streaming = o.streaming;
  return p;
}

#endif // SERVEKIT_LOADGEN_GRPC

// ---------------------------------------------------------------------------------------------
// --self-test: a minimal in-process KServe v2 server (one thread). It checks each infer body
// against the metadata it advertises, so a malformed body shows up as errors.

class stub_server {
public:
  explicit stub_server(std::string model)
      : model_{std::move(model)}, acceptor_{io_,
                                            tcp::endpoint{asio::ip::make_address("127.0.0.1"), 0}} {
    accept();
    thread_ = std::thread{[this] { io_.run(); }};
  }
  stub_server(const stub_server&) = delete;
  stub_server& operator=(const stub_server&) = delete;
  ~stub_server() {
    asio::post(io_, [this] { io_.stop(); });
    thread_.join();
  }

  [[nodiscard]] std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

private:
  struct session : std::enable_shared_from_this<session> {
    session(stub_server& server, tcp::socket socket)
        : server_{server}, socket_{std::move(socket)} {}

    void read() {
      request_ = {};
      http::async_read(socket_, buffer_, request_,
                       [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
                         if (!ec) {
                           self->answer();
                         }
                       });
    }

    void answer() {
      response_ = {};
      response_.version(11);
      response_.keep_alive(request_.keep_alive());
      const auto [status, body] = server_.handle(request_);
      response_.result(status);
      response_.set(http::field::content_type, "application/json");
      response_.body() = body;
      response_.prepare_payload();
      http::async_write(socket_, response_,
                        [self = shared_from_this()](const beast::error_code& ec, std::size_t) {
                          if (!ec && self->response_.keep_alive()) {
                            self->read();
                          }
                        });
    }

    stub_server& server_;
    tcp::socket socket_;
    beast::flat_buffer buffer_;
    http::request<http::string_body> request_;
    http::response<http::string_body> response_;
  };

  void accept() {
    acceptor_.async_accept([this](const beast::error_code& ec, tcp::socket socket) {
      if (ec) {
        return;
      }
      std::make_shared<session>(*this, std::move(socket))->read();
      accept();
    });
  }

  [[nodiscard]] std::pair<http::status, std::string>
  handle(const http::request<http::string_body>& request) const {
    const std::string target{request.target()};
    const std::string base = "/v2/models/" + model_;
    const bool get = request.method() == http::verb::get;
    if (get && target == "/v2/health/live") {
      return {http::status::ok, ""};
    }
    if (get && target == base) {
      return {http::status::ok,
              fmt::format(R"({{"name":"{}","versions":["1"],"platform":"stub","inputs":[)"
                          R"({{"name":"INPUT0","datatype":"FP32","shape":[-1,16]}},)"
                          R"({{"name":"INPUT1","datatype":"FP32","shape":[-1,16]}}],)"
                          R"("outputs":[{{"name":"OUTPUT0","datatype":"FP32","shape":[-1,16]}}]}})",
                          model_)};
    }
    if (get && target == base + "/config") {
      return {http::status::ok, fmt::format(R"({{"name":"{}","max_batch_size":8}})", model_)};
    }
    if (request.method() == http::verb::post && target == base + "/infer") {
      const auto body = nlohmann::json::parse(request.body(), nullptr, false);
      bool ok = body.is_object() && body.contains("inputs") && body["inputs"].size() == 2;
      if (ok) {
        for (const auto& input : body["inputs"]) {
          ok = ok && input.value("datatype", "") == "FP32" &&
               input.value("shape", nlohmann::json{}) == nlohmann::json{1, 16} &&
               input.contains("data") && input["data"].size() == 16;
        }
      }
      if (!ok) {
        return {http::status::bad_request, R"({"error":"stub: unexpected infer body"})"};
      }
      return {http::status::ok,
              fmt::format(R"({{"model_name":"{}","model_version":"1","outputs":[]}})", model_)};
    }
    return {http::status::not_found, R"({"error":"stub: no such route"})"};
  }

  std::string model_;
  asio::io_context io_{1};
  tcp::acceptor acceptor_;
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// Output

double round1(double x) { return std::round(x * 10.0) / 10.0; }

void print_table(const options& o, const run_result& r, const std::optional<run_result>& base,
                 double load_at_start) {
  const std::string mode =
      o.rate > 0 ? fmt::format("open loop at {} req/s, up to {} connections", o.rate, o.connections)
                 : fmt::format("closed loop, {} connections", o.connections);
  std::printf("servekit-loadgen: model %s at %s:%u, %s, %zu thread%s, %.3g s measured after "
              "%.3g s warm-up\n",
              o.model.c_str(), o.host.c_str(), static_cast<unsigned>(o.port), mode.c_str(),
              o.threads, o.threads == 1 ? "" : "s", o.duration_s, o.warmup_s);
  std::printf("  machine        %s, %u CPUs, load average %.2f at the start\n",
              servekit_bench::cpu_model().c_str(), std::thread::hardware_concurrency(),
              load_at_start);
  std::printf("  requests       %llu (errors %llu, non-200 %llu)\n",
              static_cast<unsigned long long>(r.requests),
              static_cast<unsigned long long>(r.errors),
              static_cast<unsigned long long>(r.non_200));
  if (o.rate > 0) {
    std::printf("  backlog        %llu scheduled but never sent; %zu connections opened\n",
                static_cast<unsigned long long>(r.backlog), r.connections_opened);
  }
  std::printf("  throughput     %.0f req/s\n", r.throughput_rps);
  std::printf("  latency (us)   p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n", r.p50_us, r.p90_us,
              r.p99_us, r.max_us);
  if (r.server_cpu_us_per_request) {
    std::printf("  server CPU     %.1f us/request\n", *r.server_cpu_us_per_request);
  }
  std::printf("  client CPU     %.1f us/request\n", r.client_cpu_us_per_request);
  if (base) {
    std::printf("  baseline       GET /v2/health/live: %.0f req/s, p50 %.1f us, p99 %.1f us; "
                "infer/baseline throughput %.3f\n",
                base->throughput_rps, base->p50_us, base->p99_us,
                servekit_bench::ratio_of(r.throughput_rps, base->throughput_rps));
    if (base->server_cpu_us_per_request) {
      std::printf("  baseline CPU   server %.1f us/request\n", *base->server_cpu_us_per_request);
    }
  }
}

std::string summary_json(const options& o, const run_result& r,
                         const std::optional<run_result>& base) {
  servekit_bench::json_object j;
  j.string("model", o.model).string("mode", o.rate > 0 ? "open" : "closed");
  j.count("connections", o.connections);
  if (o.rate > 0) {
    j.real("rate", o.rate);
  } else {
    j.null("rate");
  }
  j.real("duration_s", o.duration_s)
      .count("requests", r.requests)
      .count("errors", r.errors)
      .count("non_200", r.non_200)
      .real("throughput_rps", round1(r.throughput_rps))
      .real("p50_us", round1(r.p50_us))
      .real("p90_us", round1(r.p90_us))
      .real("p99_us", round1(r.p99_us))
      .real("max_us", round1(r.max_us));
  if (r.server_cpu_us_per_request) {
    j.real("server_cpu_us_per_request", round1(*r.server_cpu_us_per_request));
  }
  j.real("client_cpu_us_per_request", round1(r.client_cpu_us_per_request));
  if (o.rate > 0) {
    j.count("backlog", r.backlog);
  }
  j.count("threads", o.threads);
  if (base) {
    j.real("baseline_throughput_rps", round1(base->throughput_rps))
        .real("baseline_p50_us", round1(base->p50_us))
        .real("baseline_p99_us", round1(base->p99_us));
    if (base->server_cpu_us_per_request) {
      j.real("baseline_server_cpu_us_per_request", round1(*base->server_cpu_us_per_request));
    }
    j.real("ratio_to_baseline",
           std::round(servekit_bench::ratio_of(r.throughput_rps, base->throughput_rps) * 1000.0) /
               1000.0);
  }
  return j.str();
}

/// An HTTP server's endpoint and the infer request for --model, from its metadata.
struct http_target {
  tcp::endpoint endpoint;
  std::string host_header;
  std::string infer_request; // the whole HTTP request
};

http_target prepare_http(const options& o, std::uint16_t port) {
  http_target t;
  asio::io_context resolve_io;
  tcp::resolver resolver{resolve_io};
  const auto endpoints = resolver.resolve(o.host, std::to_string(port));
  t.endpoint = *endpoints.begin();
  t.host_header = fmt::format("{}:{}", o.host, port);

  const std::string model_path = "/v2/models/" + o.model;
  const reply metadata = http_get(t.endpoint, t.host_header, model_path);
  if (metadata.status != 200) {
    throw std::runtime_error{
        fmt::format("GET {}: HTTP {}: {}", model_path, metadata.status, metadata.body)};
  }
  // max_batch_size from Triton's config extension, when the server has it.
  std::optional<bool> batching;
  if (const reply config = http_get(t.endpoint, t.host_header, model_path + "/config");
      config.status == 200) {
    const auto j = nlohmann::json::parse(config.body, nullptr, false);
    if (j.is_object() && j.contains("max_batch_size") && j["max_batch_size"].is_number()) {
      batching = j["max_batch_size"].get<double>() > 0;
    }
  }
  const std::string body =
      make_infer_body(nlohmann::json::parse(metadata.body), batching, o.input_size);
  t.infer_request =
      fmt::format("POST {}/infer HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n"
                  "Content-Length: {}\r\n\r\n{}",
                  model_path, t.host_header, body.size(), body);
  return t;
}

int run_grpc(options o);

int run(options o) {
  if (o.protocol == "grpc") {
    return run_grpc(std::move(o));
  }
  std::unique_ptr<stub_server> stub;
  if (o.self_test) {
    stub = std::make_unique<stub_server>(o.model);
    o.host = "127.0.0.1";
    o.port = stub->port();
    if (!o.server_pid) {
      o.server_pid = static_cast<long>(getpid()); // exercises --server-pid (stub and client alike)
    }
  }

  const http_target target = prepare_http(o, o.port);
  const tcp::endpoint& endpoint = target.endpoint;
  const std::string& host_header = target.host_header;
  const std::string& infer_request = target.infer_request;

  const double load_at_start = servekit_bench::load_average(); // the machine is shared
  const run_result result = run_load(o, endpoint, infer_request);
  std::optional<run_result> base;
  if (o.baseline) {
    base = run_load(o, endpoint,
                    fmt::format("GET /v2/health/live HTTP/1.1\r\nHost: {}\r\n\r\n", host_header));
  }

  if (!o.json_only) {
    print_table(o, result, base, load_at_start);
  }
  std::printf("%s\n", summary_json(o, result, base).c_str());
  std::fflush(stdout);

  if (o.self_test) {
    const bool ok = result.requests > 0 && result.errors == 0 &&
                    (!base || (base->requests > 0 && base->errors == 0));
    if (!ok) {
      std::fprintf(stderr, "servekit-loadgen: self-test failed: no requests or errors\n");
      return 1;
    }
  }
  return 0;
}

#if SERVEKIT_LOADGEN_GRPC

/// The process listening on a local TCP port (from /proc/net/tcp{,6} and /proc/PID/fd), for
/// --compare-http without --server-pid; nullopt when not found (another user's process, or a
/// remote server).
std::optional<long> listening_pid(std::uint16_t port) {
  std::vector<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in{table};
    std::string line;
    std::getline(in, line); // the header
    while (std::getline(in, line)) {
      std::istringstream fields{line};
      std::string slot;
      std::string local;
      std::string remote;
      std::string state;
      std::string skip;
      std::string inode;
      fields >> slot >> local >> remote >> state;
      for (int k = 0; k < 5; ++k) { // tx:rx queues, timer, retransmits, uid, timeout
        fields >> skip;
      }
      fields >> inode;
      const auto colon = local.rfind(':');
      if (state == "0A" && colon != std::string::npos &&
          std::stoul(local.substr(colon + 1), nullptr, 16) == port) { // 0A: LISTEN
        inodes.push_back("socket:[" + inode + "]");
      }
    }
  }
  if (inodes.empty()) {
    return std::nullopt;
  }
  std::unique_ptr<DIR, int (*)(DIR*)> proc{opendir("/proc"), closedir};
  if (!proc) {
    return std::nullopt;
  }
  while (const dirent* entry = readdir(proc.get())) {
    const std::string pid = entry->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const std::string fd_dir = "/proc/" + pid + "/fd";
    std::unique_ptr<DIR, int (*)(DIR*)> fds{opendir(fd_dir.c_str()), closedir};
    if (!fds) {
      continue;
    }
    while (const dirent* fd = readdir(fds.get())) {
      char link[64] = {};
      const std::string path = fd_dir + "/" + fd->d_name;
      const auto n = readlink(path.c_str(), link, sizeof(link) - 1);
      if (n > 0 && std::find(inodes.begin(), inodes.end(),
                             std::string_view{link, static_cast<std::size_t>(n)}) != inodes.end()) {
        return std::stol(pid);
      }
    }
  }
  return std::nullopt;
}

/// Windows of one protocol as one run: answers, percentiles over every window's latencies, CPU
/// per request weighted by each window's requests.
run_result merge_windows(const std::vector<run_result>& windows, double duration_s) {
  run_result m;
  double server_cpu = 0;
  bool have_server_cpu = true;
  double client_cpu = 0;
  for (const auto& w : windows) {
    m.requests += w.requests;
    m.errors += w.errors;
    m.non_200 += w.non_200;
    m.backlog += w.backlog;
    m.responses += w.responses;
    m.connections_opened = std::max(m.connections_opened, w.connections_opened);
    m.latencies_us.insert(m.latencies_us.end(), w.latencies_us.begin(), w.latencies_us.end());
    const auto n = static_cast<double>(w.requests);
    have_server_cpu = have_server_cpu && w.server_cpu_us_per_request.has_value();
    server_cpu += w.server_cpu_us_per_request.value_or(0) * n;
    client_cpu += w.client_cpu_us_per_request * n;
  }
  auto& us = m.latencies_us;
  std::sort(us.begin(), us.end());
  m.throughput_rps = static_cast<double>(us.size()) / duration_s;
  m.p50_us = servekit_bench::percentile(us, 0.50);
  m.p90_us = servekit_bench::percentile(us, 0.90);
  m.p99_us = servekit_bench::percentile(us, 0.99);
  m.max_us = us.empty() ? 0.0 : us.back();
  if (m.requests > 0) {
    if (have_server_cpu) {
      m.server_cpu_us_per_request = server_cpu / static_cast<double>(m.requests);
    }
    m.client_cpu_us_per_request = client_cpu / static_cast<double>(m.requests);
  }
  return m;
}

void print_grpc_line(const char* label, const run_result& r, double duration_s) {
  std::printf("  %-14s %.0f req/s; p50 %.1f  p90 %.1f  p99 %.1f  max %.1f us; requests %llu "
              "(errors %llu)",
              label, r.throughput_rps, r.p50_us, r.p90_us, r.p99_us, r.max_us,
              static_cast<unsigned long long>(r.requests),
              static_cast<unsigned long long>(r.errors));
  if (r.responses > 0) {
    std::printf("; %.0f responses/s", static_cast<double>(r.responses) / duration_s);
  }
  if (r.server_cpu_us_per_request) {
    std::printf("; server CPU %.1f us/request", *r.server_cpu_us_per_request);
  }
  std::printf("; client CPU %.1f us/request\n", r.client_cpu_us_per_request);
}

/// Adds one protocol's figures to the --compare-http summary, each key prefixed.
void add_protocol_json(servekit_bench::json_object& j, const std::string& prefix,
                       const run_result& r, std::size_t threads) {
  j.count(prefix + "requests", r.requests)
      .count(prefix + "errors", r.errors)
      .real(prefix + "rps", round1(r.throughput_rps))
      .real(prefix + "p50_us", round1(r.p50_us))
      .real(prefix + "p90_us", round1(r.p90_us))
      .real(prefix + "p99_us", round1(r.p99_us))
      .real(prefix + "max_us", round1(r.max_us));
  if (r.server_cpu_us_per_request) {
    j.real(prefix + "cpu_us_per_request", round1(*r.server_cpu_us_per_request));
  } else {
    j.null(prefix + "cpu_us_per_request");
  }
  j.real(prefix + "client_cpu_us_per_request", round1(r.client_cpu_us_per_request))
      .count(prefix + "threads", threads);
}

int run_grpc(options o) {
  const std::size_t http_threads = o.threads;
  if (!o.threads_given) {
    o.threads =
        std::min<std::size_t>(std::max(1U, std::thread::hardware_concurrency()), o.connections);
  }
  const auto plan = make_grpc_plan(o);
  const double load_at_start = servekit_bench::load_average(); // the machine is shared

  if (!o.compare_http) {
    const run_result r = run_grpc_load(o, plan);
    if (!o.json_only) {
      std::printf("servekit-loadgen: model %s at %s (gRPC%s), %s, %zu thread%s, %zu channels, "
                  "%.3g s measured after %.3g s warm-up\n",
                  o.model.c_str(), grpc_target(o.host, o.port).c_str(),
                  o.streaming ? ", ModelStreamInfer" : ", ModelInfer",
                  o.rate > 0 ? fmt::format("open loop at {} req/s, up to {} calls in flight",
                                           o.rate, o.connections)
                                   .c_str()
                             : fmt::format("closed loop, {} {} in flight", o.connections,
                                           o.streaming ? "streams" : "calls")
                                   .c_str(),
                  o.threads, o.threads == 1 ? "" : "s", plan->stubs.size(), o.duration_s,
                  o.warmup_s);
      std::printf("  machine        %s, %u CPUs, load average %.2f at the start\n",
                  servekit_bench::cpu_model().c_str(), std::thread::hardware_concurrency(),
                  load_at_start);
      if (o.rate > 0) {
        std::printf("  backlog        %llu scheduled but never sent\n",
                    static_cast<unsigned long long>(r.backlog));
      }
      print_grpc_line("gRPC", r, o.duration_s);
    }
    servekit_bench::json_object j;
    j.string("model", o.model)
        .string("protocol", "grpc")
        .string("mode", o.rate > 0 ? "open" : "closed")
        .boolean("streaming", o.streaming)
        .count("connections", o.connections)
        .count("channels", plan->stubs.size());
    if (o.rate > 0) {
      j.real("rate", o.rate);
    } else {
      j.null("rate");
    }
    j.real("duration_s", o.duration_s)
        .count("requests", r.requests)
        .count("errors", r.errors)
        .real("throughput_rps", round1(r.throughput_rps))
        .real("p50_us", round1(r.p50_us))
        .real("p90_us", round1(r.p90_us))
        .real("p99_us", round1(r.p99_us))
        .real("max_us", round1(r.max_us));
    if (o.streaming) {
      j.real("responses_rps", round1(static_cast<double>(r.responses) / o.duration_s));
    }
    if (r.server_cpu_us_per_request) {
      j.real("server_cpu_us_per_request", round1(*r.server_cpu_us_per_request));
    }
    j.real("client_cpu_us_per_request", round1(r.client_cpu_us_per_request));
    if (o.rate > 0) {
      j.count("backlog", r.backlog);
    }
    j.count("threads", o.threads).real("load_average", round1(load_at_start));
    std::printf("%s\n", j.str().c_str());
    std::fflush(stdout);
    return r.requests > 0 ? 0 : 1;
  }

  // --compare-http: gRPC and HTTP windows in turn against the same server, each a share of
  // --duration after its own warm-up.
  if (!o.server_pid) {
    o.server_pid = listening_pid(o.port); // the gRPC port's process: the server
  }
  const http_target http = prepare_http(o, o.http_port);
  options grpc_window = o;
  grpc_window.duration_s = o.duration_s / static_cast<double>(o.rounds);
  options http_window = grpc_window;
  http_window.threads = std::min(http_threads, o.connections);
  std::vector<run_result> grpc_runs;
  std::vector<run_result> http_runs;
  for (std::size_t k = 0; k < o.rounds; ++k) {
    grpc_runs.push_back(run_grpc_load(grpc_window, plan));
    http_runs.push_back(run_load(http_window, http.endpoint, http.infer_request));
  }
  const run_result g = merge_windows(grpc_runs, o.duration_s);
  const run_result h = merge_windows(http_runs, o.duration_s);
  const double ratio = servekit_bench::ratio_of(g.throughput_rps, h.throughput_rps);
  if (!o.json_only) {
    std::printf("servekit-loadgen: model %s, gRPC %s against HTTP port %u, %zu calls/connections "
                "in flight, %zu rounds of %.3g s per protocol (after %.3g s warm-up each)\n",
                o.model.c_str(), grpc_target(o.host, o.port).c_str(),
                static_cast<unsigned>(o.http_port), o.connections, o.rounds, grpc_window.duration_s,
                o.warmup_s);
    std::printf("  machine        %s, %u CPUs, load average %.2f at the start; server pid %s\n",
                servekit_bench::cpu_model().c_str(), std::thread::hardware_concurrency(),
                load_at_start,
                o.server_pid ? std::to_string(*o.server_pid).c_str() : "unknown (no server CPU)");
    for (std::size_t k = 0; k < o.rounds; ++k) {
      print_grpc_line(fmt::format("gRPC round {}", k + 1).c_str(), grpc_runs[k],
                      grpc_window.duration_s);
      print_grpc_line(fmt::format("HTTP round {}", k + 1).c_str(), http_runs[k],
                      grpc_window.duration_s);
    }
    print_grpc_line("gRPC", g, o.duration_s);
    print_grpc_line("HTTP", h, o.duration_s);
    std::printf("  gRPC/HTTP      throughput %.3f\n", ratio);
  }
  servekit_bench::json_object j;
  j.string("model", o.model)
      .string("protocol", "grpc+http")
      .count("connections", o.connections)
      .count("channels", plan->stubs.size())
      .count("rounds", o.rounds)
      .real("duration_s", o.duration_s);
  add_protocol_json(j, "grpc_", g, o.threads);
  add_protocol_json(j, "http_", h, http_window.threads);
  j.real("grpc_to_http_rps", std::round(ratio * 1000.0) / 1000.0)
      .real("load_average", round1(load_at_start));
  std::printf("%s\n", j.str().c_str());
  std::fflush(stdout);
  return g.requests > 0 && h.requests > 0 ? 0 : 1;
}

#else

int run_grpc(options /*o*/) {
  std::fprintf(stderr, "servekit-loadgen: built without gRPC (servekit's gRPC front end, "
                       "SERVEKIT_GRPC, was off or gRPC was not found): --protocol grpc is "
                       "unavailable\n");
  return 2;
}

#endif // SERVEKIT_LOADGEN_GRPC

} // namespace

int main(int argc, char** argv) {
  const options o = parse_flags(argc, argv);
#if SERVEKIT_LOADGEN_ABSL_MUTEX
  // Not a test of gRPC's locking: the lock-order bookkeeping only costs client CPU.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "servekit-loadgen: %s\n", e.what());
    return 1;
  }
}
