/// \file
/// servekit-loadgen: a KServe v2 HTTP/REST load generator (Boost.Beast/Asio), for the example
/// server (examples/server) or any KServe v2 server.
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

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <fstream>
#include <iterator>
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
  std::optional<long> server_pid;
  bool baseline = false;
  bool json_only = false;
  bool self_test = false;
};

/// Parses the flags, or exits (0 after --help, 2 after an error).
options parse_flags(int argc, char** argv) {
  options o;
  long server_pid = 0;
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
      .integer("--threads", o.threads, 1, 1024, "client I/O threads (1)")
      .integer("--server-pid", server_pid, 1, 1e9,
               "report the server's CPU time per request (from /proc/PID/stat)")
      .flag("--baseline", o.baseline,
            "also run the same load on GET /v2/health/live and report the ratio")
      .flag("--json", o.json_only, "print only the JSON summary line")
      .flag("--self-test", o.self_test,
            "run against an in-process KServe stub (smoke test); fails on any error")
      .parse(argc, argv);
  if (cl.given("--server-pid")) {
    o.server_pid = server_pid;
  }
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

run_result run_load(const options& o, const tcp::endpoint& endpoint, std::string request) {
  plan p;
  p.endpoint = endpoint;
  p.request = std::move(request);
  p.open_loop = o.rate > 0;
  p.rate = o.rate;
  p.threads = o.threads;
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s));
  };
  p.start = clock_type::now() + 10ms; // every worker starts its timeline at the same instant
  p.window_begin = p.start + seconds(o.warmup_s);
  p.window_end = p.window_begin + seconds(o.duration_s);

  std::vector<std::unique_ptr<worker>> workers;
  for (std::size_t i = 0; i < o.threads; ++i) {
    const std::size_t share = o.connections / o.threads + (i < o.connections % o.threads ? 1 : 0);
    workers.push_back(std::make_unique<worker>(p, i, share));
  }
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
    const auto& s = w->stats();
    r.requests += s.answered + s.io_errors;
    r.errors += s.non_200 + s.io_errors;
    r.non_200 += s.non_200;
    r.backlog += s.backlog;
    r.connections_opened += s.connections_opened;
    all.insert(all.end(), s.latencies_ns.begin(), s.latencies_ns.end());
  }
  std::vector<double> us;
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

int run(options o) {
  std::unique_ptr<stub_server> stub;
  if (o.self_test) {
    stub = std::make_unique<stub_server>(o.model);
    o.host = "127.0.0.1";
    o.port = stub->port();
    if (!o.server_pid) {
      o.server_pid = static_cast<long>(getpid()); // exercises --server-pid (stub and client alike)
    }
  }

  asio::io_context resolve_io;
  tcp::resolver resolver{resolve_io};
  const auto endpoints = resolver.resolve(o.host, std::to_string(o.port));
  const tcp::endpoint endpoint = *endpoints.begin();
  const std::string host_header = fmt::format("{}:{}", o.host, o.port);

  const std::string model_path = "/v2/models/" + o.model;
  const reply metadata = http_get(endpoint, host_header, model_path);
  if (metadata.status != 200) {
    std::fprintf(stderr, "servekit-loadgen: GET %s: HTTP %u: %s\n", model_path.c_str(),
                 metadata.status, metadata.body.c_str());
    return 1;
  }
  // max_batch_size from Triton's config extension, when the server has it.
  std::optional<bool> batching;
  if (const reply config = http_get(endpoint, host_header, model_path + "/config");
      config.status == 200) {
    const auto j = nlohmann::json::parse(config.body, nullptr, false);
    if (j.is_object() && j.contains("max_batch_size") && j["max_batch_size"].is_number()) {
      batching = j["max_batch_size"].get<double>() > 0;
    }
  }
  const std::string body =
      make_infer_body(nlohmann::json::parse(metadata.body), batching, o.input_size);
  const std::string infer_request =
      fmt::format("POST {}/infer HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n"
                  "Content-Length: {}\r\n\r\n{}",
                  model_path, host_header, body.size(), body);

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

} // namespace

int main(int argc, char** argv) {
  const options o = parse_flags(argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "servekit-loadgen: %s\n", e.what());
    return 1;
  }
}
