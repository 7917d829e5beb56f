// bench/bench_ensemble.cpp: the compile-time ensemble (servekit::ensemble) against calling its
// composing models by hand: what a step costs, whether independent branches run in parallel,
// and whether composing models still batch when requests reach them through an ensemble.
//
//     bench_ensemble [--json] [--quick] [--only pingpong,overhead,parallel,batched]
//
// --quick       fewer samples and a shorter window (CI smoke, well under 20 s)
// --only LIST   run only these sections (for profiling one of them)
// --json        print every figure as one JSON object on the last line
//
// Sections:
//   pingpong  the condition_variable one-way hand-off between two threads (as bench_dynamic):
//             the floor for waking a sleeping thread, and the unit of the step-overhead goal.
//   overhead  a 4-step linear ensemble A -> B -> C -> D of null models (1 instance each) against
//             the client calling A, B, C, D by hand, one request at a time, in interleaved
//             blocks; step_overhead_us = (ensemble p50 - by-hand p50) / 4. By hand, the client
//             is woken after every step; the ensemble wakes it once, so this figure can be
//             negative. step_overhead_vs_callbacks_us compares with the chain driven from the
//             models' response callbacks (one client wake-up, like the ensemble): what the
//             ensemble's own bookkeeping costs per step.
//   parallel  one input feeding two branches whose backends sleep 1 ms (one instance each):
//             the two models called one after the other by hand, against one ensemble request;
//             parallel_speedup = sequential p50 / ensemble p50.
//   batched   64 ensemble requests kept in flight through a one-step ensemble whose model
//             batches up to 8 (dynamic batcher, 200 us per batch); batched_fraction = the
//             model's mean executed batch size over the window / 8; then the same load on the
//             model itself, for comparison (batched_model_*).
//
// See docs/benchmarks.md for what each figure means and for our results.
#include "bench_support.hpp"

#include <servekit/servekit.hpp>

#include <fmt/format.h>

#include <pthread.h>
#include <sched.h>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <semaphore>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using bench_clock = std::chrono::steady_clock;
using servekit::in;
using servekit::out;
using servekit::step;

constexpr std::size_t elements_per_request = 4;
constexpr std::int32_t batched_max_batch = 8;
constexpr auto branch_latency = 1000us;
constexpr auto batch_latency = 200us;

// -- the backends -----------------------------------------------------------------------------

constexpr servekit::tensor_spec tiny_input[] = {
    {"INPUT0", servekit::data_type::fp32, {static_cast<std::int64_t>(elements_per_request)}},
};
constexpr servekit::tensor_spec tiny_output[] = {
    {"OUTPUT0", servekit::data_type::fp32, {static_cast<std::int64_t>(elements_per_request)}},
};

/// OUTPUT0 = INPUT0 for each request of the batch: the smallest backend that answers.
void copy_through(servekit::batch& b) {
  for (std::size_t i = 0; i < b.size(); ++i) {
    const servekit::tensor* in = b.request(i).find_input("INPUT0");
    servekit::tensor& o = b.response(i).add_output("OUTPUT0", servekit::data_type::fp32, in->shape);
    std::memcpy(o.data.data(), in->data.data(), in->data.size());
  }
}

/// A backend that models a kernel's duration by sleeping wants its sleeps exact: Linux rounds a
/// thread's timed sleeps up by its timer slack (50 us by default). execute always runs on the
/// instance's own thread, so setting it once per thread is enough.
void precise_sleeps() {
#if defined(__linux__)
  thread_local const bool set = ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
  static_cast<void>(set);
#endif
}

/// Does nothing but copy its tiny input to its output.
struct null_backend {
  static constexpr std::int32_t max_batch_size = batched_max_batch;
  static constexpr std::span<const servekit::tensor_spec> inputs{tiny_input};
  static constexpr std::span<const servekit::tensor_spec> outputs{tiny_output};

  explicit null_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) { copy_through(b); }
};

/// Sleeps `Latency` per execution (whatever the batch size), then copies its input.
template <std::int64_t LatencyUs>
struct sleeping_backend {
  static constexpr std::int32_t max_batch_size = batched_max_batch;
  static constexpr std::span<const servekit::tensor_spec> inputs{tiny_input};
  static constexpr std::span<const servekit::tensor_spec> outputs{tiny_output};

  explicit sleeping_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    precise_sleeps();
    std::this_thread::sleep_for(std::chrono::microseconds{LatencyUs});
    copy_through(b);
  }
};

using null_model = servekit::model<null_backend, servekit::dynamic_batcher<>>;
using branch_model =
    servekit::model<sleeping_backend<branch_latency.count()>, servekit::dynamic_batcher<>>;
using batch_model =
    servekit::model<sleeping_backend<batch_latency.count()>, servekit::dynamic_batcher<>>;

/// A -> B -> C -> D: each step reads the previous step's output.
using chain_ensemble =
    servekit::ensemble<servekit::inputs<"IN">, servekit::outputs<"OUT">,
                       step<null_model, in<"INPUT0", "IN">, out<"OUTPUT0", "t1">>,
                       step<null_model, in<"INPUT0", "t1">, out<"OUTPUT0", "t2">>,
                       step<null_model, in<"INPUT0", "t2">, out<"OUTPUT0", "t3">>,
                       step<null_model, in<"INPUT0", "t3">, out<"OUTPUT0", "OUT">>>;
constexpr int chain_steps = 4;

/// IN feeds two independent branches, each with its own output.
using fork_ensemble =
    servekit::ensemble<servekit::inputs<"IN">, servekit::outputs<"LEFT", "RIGHT">,
                       step<branch_model, in<"INPUT0", "IN">, out<"OUTPUT0", "LEFT">>,
                       step<branch_model, in<"INPUT0", "IN">, out<"OUTPUT0", "RIGHT">>>;

/// One batching step.
using batch_ensemble =
    servekit::ensemble<servekit::inputs<"IN">, servekit::outputs<"OUT">,
                       step<batch_model, in<"INPUT0", "IN">, out<"OUTPUT0", "OUT">>>;

servekit::model_options batching_options(std::string name) {
  servekit::model_options options;
  options.name = std::move(name);
  options.max_batch_size = batched_max_batch;
  servekit::dynamic_batching_options batching;
  batching.max_queue_delay_microseconds = 0;
  options.dynamic_batching = batching;
  return options;
}

// -- requests and waiting for one response ------------------------------------------------------

float seed_of(std::uint64_t n) { return static_cast<float>(n & 0xffffU); }

/// One FP32 [1, 4] tensor named `name`, filled with seed, seed + 1, ...
servekit::request make_request(const char* name, float seed) {
  std::array<float, elements_per_request> values{};
  for (std::size_t k = 0; k < values.size(); ++k) {
    values[k] = seed + static_cast<float>(k);
  }
  servekit::request r;
  r.inputs.push_back(servekit::make_tensor(name, servekit::data_type::fp32,
                                           {1, static_cast<std::int64_t>(elements_per_request)},
                                           std::span<const float>{values}));
  return r;
}

/// Whether `r` succeeded and carries `output` starting with `seed`.
bool answers(const servekit::response& r, std::string_view output, float seed) {
  const servekit::tensor* o = r.find_output(output);
  return r.ok() && o != nullptr && o->values<float>()[0] == seed;
}

/// The client's side of a synchronous call to an asynchronous API: it sleeps on a
/// std::condition_variable until the sink hands it the response (so the figures compare with
/// pingpong).
struct one_response {
  std::mutex m;
  std::condition_variable cv;
  bool done = false; // guarded by m
  servekit::response value;

  /// Before each submit.
  void arm() {
    const std::lock_guard lock{m};
    done = false;
  }

  servekit::response_sink sink() {
    return [self = this](servekit::response&& r) {
      {
        const std::lock_guard lock{self->m};
        self->value = std::move(r);
        self->done = true;
      }
      self->cv.notify_one();
    };
  }

  /// Waits for the response; a refused submit (`accepted` failed) is the answer itself.
  servekit::response wait(const servekit::status& accepted) {
    if (!accepted.ok()) {
      return servekit::response::failure(servekit::status{accepted});
    }
    std::unique_lock lock{m};
    cv.wait(lock, [&] { return done; });
    return std::move(value);
  }
};

/// Submits `r` to `target` and waits for its response.
template <class Target>
servekit::response call(Target& target, one_response& flag, servekit::request&& r) {
  flag.arm();
  const servekit::status accepted = target.submit(std::move(r), flag.sink());
  return flag.wait(accepted);
}

/// The response's OUTPUT0, renamed INPUT0, as the next model's request (what a client that
/// chains models writes).
servekit::request forward(servekit::response&& r) {
  servekit::request next;
  for (auto& t : r.outputs) {
    if (t.name == "OUTPUT0") {
      t.name = "INPUT0";
      next.inputs.push_back(std::move(t));
      break;
    }
  }
  return next;
}

double us_between(bench_clock::time_point a, bench_clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// -- pingpong (bench_support::pingpong_us): the floor for waking a sleeping thread ---------------

/// The first CPU this process may run on.
std::size_t first_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (std::size_t cpu = 0; cpu < std::size_t{CPU_SETSIZE}; ++cpu) {
      if (CPU_ISSET(cpu, &set)) {
        return cpu;
      }
    }
  }
  return 0;
}

// -- interleaved closed-loop latency ------------------------------------------------------------

/// Latency samples of several ways to answer one request, taken in interleaved blocks so that a
/// noisy neighbour slows all of them alike.
struct interleaved {
  std::vector<std::vector<double>> us;
  std::uint64_t wrong = 0;
};

/// Runs `ways` (each `bool(float seed)`: one request, true if answered correctly) in rounds of
/// `block` requests each, rotating which goes first, until each has `samples` samples (after
/// `warmup` unrecorded ones each).
template <class... Ways>
interleaved measure_interleaved(int samples, int block, int warmup, Ways&&... ways) {
  constexpr std::size_t n = sizeof...(Ways);
  interleaved out;
  out.us.resize(n);
  for (auto& v : out.us) {
    v.reserve(static_cast<std::size_t>(samples));
  }
  std::uint64_t seed = 0;
  const auto run_block = [&](std::size_t which, int count, bool record) {
    std::size_t k = 0;
    const auto one = [&](auto& way) {
      if (k++ != which) {
        return;
      }
      for (int i = 0; i < count; ++i) {
        const float s = seed_of(seed++);
        const auto t0 = bench_clock::now();
        const bool ok = way(s);
        const auto t1 = bench_clock::now();
        out.wrong += ok ? 0U : 1U;
        if (record) {
          out.us[which].push_back(us_between(t0, t1));
        }
      }
    };
    (one(ways), ...);
  };
  for (std::size_t w = 0; w < n; ++w) {
    run_block(w, warmup, false);
  }
  for (int done = 0, round = 0; done < samples; done += block, ++round) {
    const int count = std::min(block, samples - done);
    for (std::size_t w = 0; w < n; ++w) {
      run_block((w + static_cast<std::size_t>(round)) % n, count, true);
    }
  }
  return out;
}

// -- overhead: a 4-step chain, ensemble against by hand -----------------------------------------

/// The chain by hand without waking the client between steps: each model's response callback
/// submits the next model (what the ensemble does, minus its bookkeeping), and only the last
/// one wakes the client.
struct callback_chain {
  std::array<null_model*, 4> models{};
  one_response* flag = nullptr;

  servekit::response_sink sink_for(std::size_t i) {
    return [self = this, i](servekit::response&& r) { self->answered(i, std::move(r)); };
  }
  void answered(std::size_t i, servekit::response&& r) {
    if (i + 1 == models.size() || !r.ok()) {
      flag->sink()(std::move(r));
      return;
    }
    const servekit::status s = models[i + 1]->submit(forward(std::move(r)), sink_for(i + 1));
    if (!s.ok()) {
      flag->sink()(servekit::response::failure(servekit::status{s}));
    }
  }
  servekit::response call(servekit::request&& r) {
    flag->arm();
    const servekit::status accepted = models[0]->submit(std::move(r), sink_for(0));
    return flag->wait(accepted);
  }
};

struct overhead_result {
  double ensemble_p50_us = 0;
  double ensemble_p99_us = 0;
  double by_hand_p50_us = 0;
  double by_hand_p99_us = 0;
  double callbacks_p50_us = 0; ///< the chain through the models' response callbacks
  double single_p50_us = 0;    ///< one null model alone, called back to back
  std::uint64_t wrong = 0;
  servekit::ensemble_statistics stats;
};

overhead_result measure_overhead(int samples) {
  null_model a{batching_options("A")};
  null_model b{batching_options("B")};
  null_model c{batching_options("C")};
  null_model d{batching_options("D")};
  chain_ensemble chain{{.name = "chain"}, a, b, c, d};
  one_response flag;

  const auto ensemble_way = [&](float seed) {
    return answers(call(chain, flag, make_request("IN", seed)), "OUT", seed);
  };
  const auto by_hand_way = [&](float seed) {
    servekit::response r = call(a, flag, make_request("INPUT0", seed));
    for (null_model* m : {&b, &c, &d}) {
      if (!r.ok()) {
        return false;
      }
      r = call(*m, flag, forward(std::move(r)));
    }
    return answers(r, "OUTPUT0", seed);
  };
  const auto single_way = [&](float seed) {
    return answers(call(a, flag, make_request("INPUT0", seed)), "OUTPUT0", seed);
  };
  callback_chain chained{{&a, &b, &c, &d}, &flag};
  const auto callbacks_way = [&](float seed) {
    return answers(chained.call(make_request("INPUT0", seed)), "OUTPUT0", seed);
  };
  const interleaved m = measure_interleaved(samples, 50, samples / 10, ensemble_way, by_hand_way,
                                            callbacks_way, single_way);
  overhead_result out;
  out.ensemble_p50_us = bench_support::median(m.us[0]);
  out.ensemble_p99_us = bench_support::percentile(m.us[0], 0.99);
  out.by_hand_p50_us = bench_support::median(m.us[1]);
  out.by_hand_p99_us = bench_support::percentile(m.us[1], 0.99);
  out.callbacks_p50_us = bench_support::median(m.us[2]);
  out.single_p50_us = bench_support::median(m.us[3]);
  out.wrong = m.wrong;
  out.stats = chain.statistics();
  return out;
}

// -- parallel: two 1 ms branches --------------------------------------------------------------

struct parallel_result {
  double sequential_p50_us = 0;
  double ensemble_p50_us = 0;
  std::uint64_t wrong = 0;
};

parallel_result measure_parallel(int samples) {
  branch_model left{batching_options("left")};
  branch_model right{batching_options("right")};
  fork_ensemble fork{{.name = "fork"}, left, right};
  one_response flag;

  const auto sequential_way = [&](float seed) {
    const bool l = answers(call(left, flag, make_request("INPUT0", seed)), "OUTPUT0", seed);
    const bool r = answers(call(right, flag, make_request("INPUT0", seed)), "OUTPUT0", seed);
    return l && r;
  };
  const auto ensemble_way = [&](float seed) {
    const servekit::response r = call(fork, flag, make_request("IN", seed));
    return answers(r, "LEFT", seed) && answers(r, "RIGHT", seed);
  };
  const interleaved m =
      measure_interleaved(samples, 20, samples / 10, sequential_way, ensemble_way);
  return {bench_support::median(m.us[0]), bench_support::median(m.us[1]), m.wrong};
}

// -- batched: 64 in flight through a batching step ----------------------------------------------

struct batched_result {
  double mean_batch = 0;
  double rps = 0;
  std::uint64_t wrong = 0;
};

/// A client's window of requests in flight: credits taken before each submit and given back by
/// the response callback.
struct window {
  explicit window(int depth, std::string_view expected) : credits{depth}, output{expected} {}
  std::counting_semaphore<> credits;
  std::string_view output; ///< the output that carries the seed
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> wrong{0};
};

/// One client thread keeps `depth` requests in flight through `e` (the ensemble, or the model
/// itself). Batch sizes are `m`'s, counted over the window.
template <class Target>
batched_result measure_batched(Target& e, const batch_model& m, const char* input,
                               std::string_view output, int depth,
                               std::chrono::duration<double> warmup,
                               std::chrono::duration<double> length) {
  window w{depth, output};
  std::counting_semaphore<>& credits = w.credits;
  std::atomic<std::uint64_t>& completed = w.completed;
  std::atomic<std::uint64_t>& wrong = w.wrong;
  std::atomic<bool> stop{false};
  std::thread client{[&] {
    std::uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      credits.acquire();
      const float seed = seed_of(n++);
      const servekit::status s =
          e.submit(make_request(input, seed), [slots = &w, seed](servekit::response&& r) {
            if (!answers(r, slots->output, seed)) {
              slots->wrong.fetch_add(1, std::memory_order_relaxed);
            }
            slots->completed.fetch_add(1, std::memory_order_relaxed);
            slots->credits.release();
          });
      if (!s.ok()) {
        wrong.fetch_add(1, std::memory_order_relaxed);
        credits.release();
      }
    }
    for (int i = 0; i < depth; ++i) {
      credits.acquire(); // every request answered
    }
  }};

  std::this_thread::sleep_for(warmup);
  const auto t0 = bench_clock::now();
  const std::uint64_t done0 = completed.load();
  const servekit::statistics_snapshot s0 = m.statistics();
  std::this_thread::sleep_for(length);
  const auto t1 = bench_clock::now();
  const std::uint64_t done1 = completed.load();
  const servekit::statistics_snapshot s1 = m.statistics();
  stop.store(true, std::memory_order_relaxed);
  client.join();

  batched_result out;
  const auto executions = s1.execution_count - s0.execution_count;
  out.mean_batch = executions == 0 ? 0.0
                                   : static_cast<double>(s1.inference_count - s0.inference_count) /
                                         static_cast<double>(executions);
  out.rps = static_cast<double>(done1 - done0) / std::chrono::duration<double>(t1 - t0).count();
  out.wrong = wrong.load();
  return out;
}

// -- command line and report --------------------------------------------------------------------

struct settings {
  bool json = false;
  bool quick = false;
  std::set<std::string, std::less<>> only;

  [[nodiscard]] bool runs(std::string_view section) const {
    return only.empty() || only.find(section) != only.end();
  }
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "bench_ensemble: %s\nusage: bench_ensemble [--json] [--quick] "
               "[--only pingpong,overhead,parallel,batched]\n",
               why);
  std::exit(2);
}

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg{argv[i]};
    if (arg == "--json") {
      s.json = true;
    } else if (arg == "--quick") {
      s.quick = true;
    } else if (arg == "--only") {
      if (i + 1 >= argc) {
        usage("missing value");
      }
      bench_support::add_names(std::string{argv[++i]}, s.only);
    } else if (arg == "--help" || arg == "-h") {
      usage("help");
    } else {
      usage("unknown argument");
    }
  }
  return s;
}

/// `s` as a JSON string literal.
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    if (static_cast<unsigned char>(c) >= 0x20) {
      out += c;
    }
  }
  return out + "\"";
}

} // namespace

int main(int argc, char** argv) {
  const settings cfg = parse(argc, argv);
  const int pingpong_rounds = cfg.quick ? 2000 : 20000;
  const int overhead_samples = cfg.quick ? 2000 : 20000;
  const int parallel_samples = cfg.quick ? 200 : 1500;
  const std::chrono::duration<double> batched_warmup{cfg.quick ? 0.3 : 0.5};
  const std::chrono::duration<double> batched_length{cfg.quick ? 1.0 : 5.0};

  // Figures in report order.
  std::map<std::string, double, std::less<>> figures;
  std::vector<std::string> order;
  const auto put = [&](const std::string& key, double v) {
    if (figures.emplace(key, v).second) {
      order.push_back(key);
    }
  };
  const auto has = [&](std::string_view k) { return figures.find(k) != figures.end(); };
  std::uint64_t wrong = 0;

  const unsigned cpus = std::thread::hardware_concurrency();
  const double load = bench_support::load_average();
  const std::string cpu = bench_support::cpu_model();
  fmt::print("bench_ensemble: {} CPUs ({}), load average {:.2f}{}\n", cpus, cpu, load,
             cfg.quick ? ", quick" : "");

  if (cfg.runs("pingpong")) {
    put("pingpong_us", bench_support::pingpong_us(pingpong_rounds, std::nullopt));
    put("pingpong_pinned_us",
        bench_support::pingpong_us(pingpong_rounds,
                                   std::pair{first_allowed_cpu(), first_allowed_cpu()}));
    fmt::print("pingpong (condition_variable, one way, median): {:.1f} us; pinned to one CPU "
               "{:.1f} us\n",
               figures["pingpong_us"], figures["pingpong_pinned_us"]);
  }

  if (cfg.runs("overhead")) {
    const overhead_result r = measure_overhead(overhead_samples);
    wrong += r.wrong;
    put("ensemble_p50_us", r.ensemble_p50_us);
    put("ensemble_p99_us", r.ensemble_p99_us);
    put("by_hand_p50_us", r.by_hand_p50_us);
    put("by_hand_p99_us", r.by_hand_p99_us);
    put("callback_chain_p50_us", r.callbacks_p50_us);
    put("single_model_p50_us", r.single_p50_us);
    put("step_overhead_us", (r.ensemble_p50_us - r.by_hand_p50_us) / chain_steps);
    put("step_overhead_vs_callbacks_us", (r.ensemble_p50_us - r.callbacks_p50_us) / chain_steps);
    fmt::print("4-step chain of null models, 1 in flight: ensemble p50 {:.1f} us (p99 {:.1f}), "
               "by hand p50 {:.1f} us (p99 {:.1f}), by hand through response callbacks p50 "
               "{:.1f} us; one model alone p50 {:.1f} us\n"
               "  step overhead (ensemble - by hand) / 4: {:.2f} us; (ensemble - callbacks) / 4: "
               "{:.2f} us\n",
               r.ensemble_p50_us, r.ensemble_p99_us, r.by_hand_p50_us, r.by_hand_p99_us,
               r.callbacks_p50_us, r.single_p50_us, figures["step_overhead_us"],
               figures["step_overhead_vs_callbacks_us"]);
    // Where an ensemble request's time went, from the ensemble's own statistics (means over
    // every request, warm-up included).
    const auto mean_us = [](const servekit::duration_stat& d) {
      return d.count == 0 ? 0.0 : static_cast<double>(d.ns) / static_cast<double>(d.count) / 1e3;
    };
    fmt::print("  ensemble statistics (means): request {:.1f} us;", mean_us(r.stats.success));
    for (const auto& s : r.stats.steps) {
      fmt::print(" step {} {:.1f} us (queue {:.1f}, infer {:.1f});", s.step, mean_us(s.success),
                 mean_us(s.queue), mean_us(s.compute_infer));
    }
    fmt::print("\n");
  }

  if (cfg.runs("parallel")) {
    const parallel_result r = measure_parallel(parallel_samples);
    wrong += r.wrong;
    put("parallel_sequential_p50_us", r.sequential_p50_us);
    put("parallel_ensemble_p50_us", r.ensemble_p50_us);
    put("parallel_speedup", r.ensemble_p50_us == 0 ? 0.0 : r.sequential_p50_us / r.ensemble_p50_us);
    fmt::print("two 1 ms branches, 1 in flight: one after the other by hand p50 {:.1f} us, "
               "ensemble p50 {:.1f} us: speedup {:.3f}\n",
               r.sequential_p50_us, r.ensemble_p50_us, figures["parallel_speedup"]);
  }

  if (cfg.runs("batched")) {
    batch_model m{batching_options("batched")};
    batch_ensemble e{{.name = "batched_pipeline"}, m};
    const batched_result r = measure_batched(e, m, "IN", "OUT", 64, batched_warmup, batched_length);
    // The same load on the model itself: what the ensemble costs a batching step.
    const batched_result d =
        measure_batched(m, m, "INPUT0", "OUTPUT0", 64, batched_warmup, batched_length);
    wrong += d.wrong;
    put("batched_model_mean_batch", d.mean_batch);
    put("batched_model_rps", d.rps);
    wrong += r.wrong;
    put("batched_mean_batch", r.mean_batch);
    put("batched_fraction", r.mean_batch / batched_max_batch);
    put("batched_rps", r.rps);
    fmt::print("64 in flight through a one-step ensemble (max batch {}, {} us per batch): mean "
               "batch {:.2f}, batched fraction {:.3f}, {:.0f} requests/s (at most {:.0f})\n",
               batched_max_batch, batch_latency.count(), r.mean_batch,
               r.mean_batch / batched_max_batch, r.rps,
               batched_max_batch / std::chrono::duration<double>(batch_latency).count());
    fmt::print("  the same load on the model itself: mean batch {:.2f}, {:.0f} requests/s\n",
               d.mean_batch, d.rps);
  }

  // Goals: a boolean each in the JSON; missing one does not fail the run.
  if (has("pingpong_us")) {
    put("step_overhead_goal_us", 2.0 * figures["pingpong_us"]);
  }
  struct goal {
    const char* flag;
    const char* what;
    std::optional<bool> met;
  };
  const auto when = [&](std::initializer_list<std::string_view> keys,
                        auto test) -> std::optional<bool> {
    for (const auto k : keys) {
      if (!has(k)) {
        return std::nullopt;
      }
    }
    return test();
  };
  const std::array goals = {
      goal{"step_overhead_ok", "step_overhead_us <= 2 x pingpong_us",
           when({"step_overhead_us", "step_overhead_goal_us"},
                [&] { return figures["step_overhead_us"] <= figures["step_overhead_goal_us"]; })},
      goal{"parallel_speedup_ok", "parallel_speedup >= 1.9",
           when({"parallel_speedup"}, [&] { return figures["parallel_speedup"] >= 1.9; })},
      goal{"batched_fraction_ok", "batched_fraction >= 0.8",
           when({"batched_fraction"}, [&] { return figures["batched_fraction"] >= 0.8; })},
  };
  int missed = 0;
  std::string goals_json;
  fmt::print("goals:\n");
  for (const auto& g : goals) {
    if (!g.met) {
      continue; // its section was left out
    }
    missed += *g.met ? 0 : 1;
    fmt::print("  [{}] {}\n", *g.met ? "met " : "MISS", g.what);
    goals_json += fmt::format("\"{}\": {}, ", g.flag, *g.met ? "true" : "false");
  }
  fmt::print("{} goal(s) missed; {} wrong or refused answers\n", missed, wrong);

  if (cfg.json) {
    std::string json = "{";
    for (const auto& k : order) {
      json += fmt::format("\"{}\": {:.6g}, ", k, figures[k]);
    }
    json += goals_json;
    json += fmt::format("\"goals_missed\": {}, \"quick\": {}, \"nproc\": {}, \"cpu_model\": {}, "
                        "\"load_average\": {:.2f}, \"wrong\": {}}}",
                        missed, cfg.quick ? "true" : "false", cpus, json_string(cpu), load, wrong);
    fmt::print("{}\n", json);
  }
  return wrong == 0 ? 0 : 1;
}
