// bench/bench_gpu.cpp: the mlp example backend (examples/cuda/mlp) on a GPU, through the whole
// servekit path and on its own. Built only when CUDA is enabled; needs a GPU to measure.
//
//     bench_gpu [--json] [--seconds N] [--quick] [--instances N] [--precision FP32|FP16]
//
// Figures (docs/benchmarks.md explains them):
//   mlp_rps_batch1, mlp_rps_batch32  requests/s through model<mlp, dynamic_batcher<>> with
//                                    max_batch_size 1 and 32, 256 requests in flight (two
//                                    client threads, closed loop), 1024,4096,1024
//   graph_speedup                    time per execute() at batch 8 without CUDA graphs over
//                                    with them, on a 256,256,256,256 MLP, called directly
//   graph_speedup_forward            the same for the forward pass alone (no copies, one wait
//                                    per 100 passes): the launch overhead graphs remove
//   scheduler_share                  in a second batch-32 run at saturation, 1 - GPU busy
//                                    time / wall time; busy time is the union over instances
//                                    of the intervals between CUDA events recorded around each
//                                    execution's GPU work on its stream
//
// --seconds N    length of each throughput window (default 5; warm-up 1 s before each)
// --quick        1 s windows, fewer graph rounds (ctest smoke)
// --instances N  instances on GPU 0, each with its own stream (default 2: while one instance
//                stages a batch on the host, the other's work keeps the GPU busy)
// --precision P  of the throughput runs (default FP32)
// --json         every figure as one JSON object on the last line
//
// About 3 x (1 + N) s for the throughput runs plus a few seconds for the graph runs.
//
// Without a GPU it says so, prints {"device": null, "skipped": "..."} and exits 77 (ctest's
// SKIP_RETURN_CODE).
#include "harness/command_line.hpp"
#include "harness/machine.hpp"
#include "harness/measure.hpp"
#include "harness/report.hpp"

#include "mlp/mlp_backend.hpp"
#include "mlp/mlp_host.hpp"
#include "mlp/mlp_weights.hpp"

#include <servekit/cuda/device.hpp>
#include <servekit/cuda/event.hpp>
#include <servekit/cuda/stream.hpp>
#include <servekit/servekit.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <semaphore>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

using cuda_examples::mlp_backend;
using servekit_bench::bench_clock;

constexpr int device = 0;
constexpr std::int64_t big_in = 1024;
constexpr std::int64_t big_out = 1024;
constexpr const char* big_layers = "1024,4096,1024";
constexpr const char* small_layers = "256,256,256,256";

// -- GPU busy time ------------------------------------------------------------------------------

/// The busy intervals of every instance on `device`, in ms after a reference event recorded when
/// the window opens. Instances add an interval per execution while the window is open.
class gpu_timeline {
public:
  gpu_timeline() : stream_{device}, reference_{device}, closing_{device} {}

  /// Opens the window: later executions record their intervals.
  void open() {
    check(reference_.record(stream_.get()));
    check(reference_.synchronize()); // every event recorded from now on completes after it
    const std::lock_guard lock{m_};
    intervals_.clear();
    recording_.store(true, std::memory_order_release);
  }

  /// Closes the window; returns its length on the GPU's clock, in ms.
  double close() {
    recording_.store(false, std::memory_order_release);
    check(closing_.record(stream_.get()));
    check(closing_.synchronize());
    float ms = 0;
    check(servekit::cuda::event::elapsed_ms(reference_, closing_, ms));
    return ms;
  }

  [[nodiscard]] bool recording() const noexcept {
    return recording_.load(std::memory_order_acquire);
  }

  /// Adds [begin, end] (both complete, on this device).
  void add(const servekit::cuda::event& begin, const servekit::cuda::event& end) {
    float a = 0;
    float z = 0;
    check(servekit::cuda::event::elapsed_ms(reference_, begin, a));
    check(servekit::cuda::event::elapsed_ms(reference_, end, z));
    const std::lock_guard lock{m_};
    intervals_.emplace_back(a, z);
  }

  /// The union of the intervals within [0, window_ms], in ms: overlapping executions of two
  /// instances count once.
  [[nodiscard]] double busy_ms(double window_ms) {
    const std::lock_guard lock{m_};
    std::sort(intervals_.begin(), intervals_.end());
    double busy = 0;
    double covered_to = 0;
    for (auto [a, z] : intervals_) {
      a = std::max(a, covered_to);
      z = std::min(z, window_ms);
      if (z > a) {
        busy += z - a;
        covered_to = z;
      }
    }
    return busy;
  }

  static void check(const servekit::status& s) {
    if (!s.ok()) {
      throw servekit::cuda::cuda_error{s};
    }
  }

private:
  servekit::cuda::stream stream_;
  servekit::cuda::event reference_;
  servekit::cuda::event closing_;
  std::atomic<bool> recording_{false};
  std::mutex m_;
  std::vector<std::pair<double, double>> intervals_;
};

/// Set by main before the timed models are built.
gpu_timeline* the_timeline = nullptr;

/// mlp_backend with CUDA events around each execution's GPU work (see cuda_examples::
/// gpu_observer), for the scheduler_share figure. Same tensors, same placement rule.
class timed_mlp_backend {
public:
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT0", servekit::data_type::fp32, {-1}},
  };
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUTPUT0", servekit::data_type::fp32, {-1}},
  };
  [[nodiscard]] static int device_count() noexcept { return mlp_backend::device_count(); }

  explicit timed_mlp_backend(const servekit::instance_context& context)
      : inner_{context}, begin_{context.device_id}, end_{context.device_id} {}

  void execute(servekit::batch& b) {
    probe p{*this};
    inner_.execute(b, p);
    // execute() waited for the stream: both events have completed.
    if (p.recorded && the_timeline != nullptr) {
      the_timeline->add(begin_, end_);
    }
  }

private:
  struct probe {
    timed_mlp_backend& self;
    bool recorded = false;

    void gpu_work_begins(cudaStream_t s) {
      recorded = the_timeline != nullptr && the_timeline->recording() && self.begin_.record(s).ok();
    }
    void gpu_work_ends(cudaStream_t s) { recorded = recorded && self.end_.record(s).ok(); }
  };

  mlp_backend inner_;
  servekit::cuda::event begin_;
  servekit::cuda::event end_;
};

// -- the throughput runs ------------------------------------------------------------------------

struct settings {
  bool json = false;
  bool quick = false;
  double seconds = 5.0;
  int instances = 2;
  std::string precision = "FP32";
};

servekit::model_options mlp_options(std::int32_t max_batch, const settings& cfg) {
  servekit::model_options o;
  o.name = "gpu_mlp_batch" + std::to_string(max_batch);
  o.max_batch_size = max_batch;
  o.input = {{"INPUT0", servekit::data_type::fp32, servekit::shape{big_in}}};
  o.output = {{"OUTPUT0", servekit::data_type::fp32, servekit::shape{big_out}}};
  servekit::dynamic_batching_options batching;
  batching.max_queue_delay_microseconds = 0;
  o.dynamic_batching = batching;
  servekit::instance_group_options group;
  group.kind = servekit::instance_group_kind::kind_gpu;
  group.count = cfg.instances;
  group.gpus = {device};
  o.instance_group = {group};
  o.parameters = {{"layers", big_layers},
                  {"precision", cfg.precision},
                  {"cuda_graphs", "true"},
                  {"graph_batch_sizes", "1,2,4,8,16,32"},
                  {"pad_to_graph_batch_size", "true"}};
  return o;
}

/// Opens and closes `timeline` (when given) with the measured window; the GPU's idle share of
/// the window is then `scheduler_share`.
struct timeline_hooks {
  gpu_timeline* timeline = nullptr;
  double scheduler_share = -1; ///< -1: not measured

  void open() {
    if (timeline != nullptr) {
      timeline->open();
    }
  }
  void close() {
    if (timeline != nullptr) {
      const double window_ms = timeline->close();
      scheduler_share = 1.0 - timeline->busy_ms(window_ms) / window_ms;
    }
  }
};

struct throughput_result {
  double rps = 0;
  double mean_batch = 0;
  double scheduler_share = -1; ///< -1: not measured
  std::uint64_t wrong = 0;
};

/// `clients` threads keep `in_flight` requests in flight through `m` for `warmup` + `length`;
/// counts completions over `length` (and the GPU's busy time over it, with a timeline).
template <class Model>
throughput_result closed_loop(Model& m, int clients, int in_flight,
                              std::chrono::duration<double> warmup,
                              std::chrono::duration<double> length, gpu_timeline* timeline) {
  const std::vector<float> pattern = [] {
    std::vector<float> v(static_cast<std::size_t>(big_in));
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0F;
    }
    return v;
  }();
  timeline_hooks hooks{timeline};
  const servekit_bench::closed_loop_result r = servekit_bench::closed_loop(
      clients, in_flight, warmup, length,
      [&](servekit_bench::window& w, std::uint64_t) {
        servekit::request q;
        q.inputs.push_back(servekit::make_tensor("INPUT0", servekit::data_type::fp32,
                                                 servekit::shape{1, big_in},
                                                 std::span<const float>{pattern}));
        return m.submit(std::move(q), [slots = &w](servekit::response&& out) {
          const servekit::tensor* y = out.find_output("OUTPUT0");
          slots->answered(out.ok() && y != nullptr && y->shape == servekit::shape{1, big_out});
        });
      },
      servekit_bench::statistics_counters(m), hooks);
  return {r.rps, r.mean_batch, hooks.scheduler_share, r.wrong + r.rejected};
}

// -- calling a backend instance directly --------------------------------------------------------

/// A GPU instance built by hand, as a shell builds one.
struct direct_instance {
  servekit::parameter_map parameters;
  std::vector<servekit::tensor_config> inputs;
  std::vector<servekit::tensor_config> outputs;
  servekit::instance_context context;

  direct_instance(std::int64_t in, std::int64_t out, std::int32_t max_batch,
                  servekit::parameter_map p)
      : parameters{std::move(p)} {
    inputs = {{"INPUT0", servekit::data_type::fp32, servekit::shape{in}}};
    outputs = {{"OUTPUT0", servekit::data_type::fp32, servekit::shape{out}}};
    context.model_name = "direct";
    context.instance_name = "direct_0_0";
    context.kind = servekit::instance_kind::gpu;
    context.device_id = device;
    context.max_batch_size = max_batch;
    context.inputs = inputs;
    context.outputs = outputs;
    context.parameters = &parameters;
  }
};

/// `rows` single-row requests with deterministic inputs in [-1, 1).
std::vector<servekit::request> direct_requests(std::int64_t rows, std::int64_t width) {
  std::vector<servekit::request> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<float> v(static_cast<std::size_t>(width));
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i] = static_cast<float>(
                 static_cast<std::int64_t>((static_cast<std::size_t>(r) * 31U + i) % 64U) - 32) /
             32.0F;
    }
    servekit::request q;
    q.inputs.push_back(servekit::make_tensor("INPUT0", servekit::data_type::fp32,
                                             servekit::shape{1, width}, std::span<const float>{v}));
    out.push_back(std::move(q));
  }
  return out;
}

/// Builds the batch of `requests` anew (as a shell does for every execution) and executes it.
/// Returns false if a response failed.
bool execute_once(mlp_backend& backend, const servekit::instance_context& context,
                  std::vector<servekit::request>& requests,
                  std::vector<servekit::response_sink>& sinks, servekit::batch& b) {
  b.clear();
  b.bind(context, false);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    b.add(requests[i], 1, sinks[i]);
  }
  backend.execute(b);
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (!b.response(i).ok()) {
      std::fprintf(stderr, "bench_gpu: %s\n", b.response(i).status.message().c_str());
      return false;
    }
  }
  return true;
}

/// The GPU result against the float64 reference: max |error| / max |reference| over 4 rows.
double verify(std::uint64_t& wrong) {
  direct_instance instance{big_in, big_out, 4, {{"layers", big_layers}}};
  mlp_backend backend{instance.context};
  auto requests = direct_requests(4, big_in);
  std::vector<servekit::response_sink> sinks(requests.size());
  servekit::batch b;
  if (!execute_once(backend, instance.context, requests, sinks, b)) {
    ++wrong;
    return 1.0;
  }
  const auto weights =
      cuda_examples::make_mlp_weights(std::vector<std::int64_t>{big_in, 4096, big_out}, 1);
  double scale = 0;
  double error = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const auto x = requests[i].find_input("INPUT0")->values<float>();
    const auto want = cuda_examples::mlp_reference(weights, x, 1);
    const auto got = b.response(i).find_output("OUTPUT0")->values<float>();
    for (std::size_t k = 0; k < want.size(); ++k) {
      scale = std::max(scale, std::abs(want[k]));
      error = std::max(error, std::abs(static_cast<double>(got[k]) - want[k]));
    }
  }
  const double relative = error / scale;
  if (relative >= 1e-3) {
    ++wrong;
  }
  return relative;
}

struct graph_result {
  double eager_us = 0; ///< per execute(), graphs off
  double graph_us = 0; ///< per execute(), graphs on
  double eager_forward_us = 0;
  double graph_forward_us = 0;
};

/// Median over `rounds` of the mean time per batch of `per_round` executions, alternating the
/// two instances round by round so that drift (clocks, other load) hits both alike.
graph_result measure_graphs(int rounds, int per_round, std::uint64_t& wrong) {
  constexpr std::int64_t rows = 8;
  direct_instance eager_instance{
      256, 256, rows, {{"layers", small_layers}, {"cuda_graphs", "false"}}};
  direct_instance graph_instance{
      256,
      256,
      rows,
      {{"layers", small_layers}, {"cuda_graphs", "true"}, {"graph_batch_sizes", "8"}}};
  mlp_backend eager{eager_instance.context};
  mlp_backend graphs{graph_instance.context};
  auto requests = direct_requests(rows, 256);
  std::vector<servekit::response_sink> sinks(requests.size());
  servekit::batch b;

  const auto time_execute = [&](mlp_backend& backend, const direct_instance& instance) {
    const auto t0 = bench_clock::now();
    for (int i = 0; i < per_round; ++i) {
      if (!execute_once(backend, instance.context, requests, sinks, b)) {
        ++wrong;
      }
    }
    return std::chrono::duration<double, std::micro>(bench_clock::now() - t0).count() / per_round;
  };
  // The pass alone: `per_round` passes queued back to back, one wait at the end.
  const auto time_forward = [&](mlp_backend& backend) {
    cuda_examples::mlp_device_runner& r = *backend.device_runner();
    const auto t0 = bench_clock::now();
    for (int i = 0; i < per_round; ++i) {
      if (!r.forward(rows).ok()) {
        ++wrong;
      }
    }
    if (!r.synchronize().ok()) {
      ++wrong;
    }
    return std::chrono::duration<double, std::micro>(bench_clock::now() - t0).count() / per_round;
  };

  // Warm-up: captures the graph, settles clocks.
  static_cast<void>(time_execute(eager, eager_instance));
  static_cast<void>(time_execute(graphs, graph_instance));
  std::vector<double> eager_us;
  std::vector<double> graph_us;
  std::vector<double> eager_forward_us;
  std::vector<double> graph_forward_us;
  for (int round = 0; round < rounds; ++round) {
    eager_us.push_back(time_execute(eager, eager_instance));
    graph_us.push_back(time_execute(graphs, graph_instance));
    eager_forward_us.push_back(time_forward(eager));
    graph_forward_us.push_back(time_forward(graphs));
  }
  return {servekit_bench::median(eager_us), servekit_bench::median(graph_us),
          servekit_bench::median(eager_forward_us), servekit_bench::median(graph_forward_us)};
}

// -- command line -------------------------------------------------------------------------------

settings parse(int argc, char** argv) {
  settings s;
  servekit_bench::command_line{"bench_gpu"}
      .json(s.json)
      .window_seconds(s.seconds)
      .quick(s.quick, "1 s windows, fewer graph rounds (ctest smoke)")
      .integer("--instances", s.instances, 1, 16,
               "instances on GPU 0, each with its own stream (default 2)")
      .text("--precision", s.precision, {"FP32", "FP16"}, "of the throughput runs (default FP32)")
      .parse(argc, argv);
  return s;
}

} // namespace

int main(int argc, char** argv) {
  const settings cfg = parse(argc, argv);
  if (servekit::cuda::device_count() == 0) {
    std::printf("bench_gpu: no CUDA device visible (servekit::cuda::device_count() == 0): the GPU "
                "figures need a GPU; nothing measured\n");
    fmt::print("{}\n", servekit_bench::json_object{}
                           .null("device")
                           .string("skipped", "no CUDA device visible")
                           .str());
    return 77;
  }
  try {
    const std::string device_name = servekit::cuda::device_name(device);
    const std::chrono::duration<double> warmup{cfg.quick ? 0.5 : 1.0};
    const std::chrono::duration<double> length{cfg.seconds};
    const servekit_bench::machine host;
    fmt::print("bench_gpu: {} (GPU {}), {} ({} CPUs), load average {:.2f}, {:.1f} s windows{}, "
               "{} instance(s), {}\n",
               device_name, device, host.cpu, host.nproc, host.load, cfg.seconds,
               cfg.quick ? ", quick" : "", cfg.instances, cfg.precision);

    std::uint64_t wrong = 0;
    const double verified = verify(wrong);
    fmt::print("GPU vs float64 reference ({}, FP32): relative error {:.2e}\n", big_layers,
               verified);

    using plain_model = servekit::model<mlp_backend, servekit::dynamic_batcher<>>;
    using timed_model = servekit::model<timed_mlp_backend, servekit::dynamic_batcher<>>;
    // max_batch_size 1 and 32 through the plain backend; then 32 again with CUDA events around
    // each execution (their cost stays out of the requests/s figures).
    const auto run = [&](std::int32_t max_batch, gpu_timeline* timeline) {
      throughput_result r;
      if (timeline == nullptr) {
        plain_model m{mlp_options(max_batch, cfg)};
        r = closed_loop(m, 2, 256, warmup, length, nullptr);
      } else {
        timed_model m{mlp_options(max_batch, cfg)};
        r = closed_loop(m, 2, 256, warmup, length, timeline);
      }
      wrong += r.wrong;
      fmt::print("mlp {} max_batch_size {}, 256 in flight{}: {:.0f} requests/s (mean batch "
                 "{:.2f})\n",
                 big_layers, max_batch, timeline == nullptr ? "" : ", timed", r.rps, r.mean_batch);
      return r;
    };
    const throughput_result batch1 = run(1, nullptr);
    const throughput_result batch32 = run(32, nullptr);
    gpu_timeline timeline;
    the_timeline = &timeline;
    const throughput_result timed = run(32, &timeline);
    the_timeline = nullptr;
    const double scheduler_share = timed.scheduler_share;
    fmt::print("GPU without servekit work queued: {:.1f}% of the window\n",
               scheduler_share * 100.0);

    const graph_result g = measure_graphs(cfg.quick ? 3 : 9, cfg.quick ? 300 : 2000, wrong);
    const double graph_speedup = g.eager_us / g.graph_us;
    const double graph_speedup_forward = g.eager_forward_us / g.graph_forward_us;
    fmt::print("mlp {} at batch 8, execute(): {:.1f} us without CUDA graphs, {:.1f} us with "
               "(x{:.2f}); forward pass alone: {:.1f} us vs {:.1f} us (x{:.2f})\n",
               small_layers, g.eager_us, g.graph_us, graph_speedup, g.eager_forward_us,
               g.graph_forward_us, graph_speedup_forward);

    const double ratio = servekit_bench::ratio_of(batch32.rps, batch1.rps);
    servekit_bench::goals goals;
    const bool ratio_met = *goals.check(
        fmt::format("mlp_rps_batch32 >= 10 x mlp_rps_batch1 (x{:.1f})", ratio), ratio >= 10.0);
    const bool graphs_met = *goals.check(
        fmt::format("graph_speedup >= 1.3 ({:.2f})", graph_speedup), graph_speedup >= 1.3);
    const bool share_met = *goals.check(
        fmt::format("scheduler_share <= 0.05 ({:.3f})", scheduler_share), scheduler_share <= 0.05);
    fmt::print("{} wrong or rejected responses\n", wrong);

    if (cfg.json) {
      servekit_bench::json_object j;
      j.string("device", device_name)
          .number("mlp_rps_batch1", batch1.rps)
          .number("mlp_rps_batch32", batch32.rps)
          .number("mean_batch_batch32", batch32.mean_batch)
          .number("graph_speedup", graph_speedup)
          .number("execute_us_eager", g.eager_us)
          .number("execute_us_graph", g.graph_us)
          .number("graph_speedup_forward", graph_speedup_forward)
          .number("scheduler_share", scheduler_share)
          .number("verified_relative_error", verified, "{:.3g}")
          .number("batch32_over_batch1", ratio)
          .integer("goal_batch32_over_batch1", 10)
          .boolean("goal_batch32_over_batch1_met", ratio_met)
          .number("goal_graph_speedup", 1.3)
          .boolean("goal_graph_speedup_met", graphs_met)
          .number("goal_scheduler_share", 0.05)
          .boolean("goal_scheduler_share_met", share_met)
          .integer("instances", cfg.instances)
          .string("precision", cfg.precision)
          .number("seconds", cfg.seconds)
          .boolean("quick", cfg.quick)
          .count("wrong", wrong);
      fmt::print("{}\n", j.str());
    }
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 1;
  }
}
