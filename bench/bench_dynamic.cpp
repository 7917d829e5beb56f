// bench/bench_dynamic.cpp: dynamic batching through servekit::model, against the floor (a
// condition-variable ping-pong), a mutex + condition_variable batcher (bench/baseline/), and the
// batching rules' theoretical capacity (simulated and threaded).
//
//     bench_dynamic [--json] [--seconds N] [--quick] [--placement os|same|split] [--only a,b,...]
//
// --seconds N   length of each throughput window (default 5; warm-up 1 s before each)
// --quick       1 s windows and fewer samples (CI smoke)
// --placement P where the measured threads run: os (default: where the kernel puts them), same
//               (all on one CPU) or split (instance threads on one CPU, submitters on another)
// --only LIST   run only these sections: pingpong, latency, throughput, throughput_2x256,
//               baseline, sim, threaded (for profiling one of them)
// --json        print every figure as one JSON object on the last line
//
// See docs/benchmarks.md for what each figure means and for our results.
#include "baseline/mutex_batcher.hpp"

#include "bench_support.hpp"

#include <servekit/servekit.hpp>

#include <fmt/format.h>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using bench_clock = std::chrono::steady_clock;

constexpr std::int32_t max_batch = 32;
constexpr std::size_t elements_per_request = 16;

// -- the backends -----------------------------------------------------------------------------

/// Triton's identity model: OUTPUT0 = INPUT0, FP32 [16], batching up to 32.
struct identity_backend {
  static constexpr std::int32_t max_batch_size = max_batch;
  static constexpr servekit::tensor_spec inputs[] = {
      {"INPUT0", servekit::data_type::fp32, {static_cast<std::int64_t>(elements_per_request)}},
  };
  static constexpr servekit::tensor_spec outputs[] = {
      {"OUTPUT0", servekit::data_type::fp32, {static_cast<std::int64_t>(elements_per_request)}},
  };

  explicit identity_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::tensor* in = b.request(i).find_input("INPUT0");
      servekit::tensor& out =
          b.response(i).add_output("OUTPUT0", servekit::data_type::fp32, in->shape);
      std::memcpy(out.data.data(), in->data.data(), in->data.size());
    }
  }
};

/// What the sleeping backend sees, to split the threaded efficiency into its causes: how late
/// sleep_until wakes it (the OS), and how long the shell takes between two executions.
struct sleep_probe {
  std::atomic<std::int64_t> executions{0};
  std::atomic<std::int64_t> overshoot_ns{0}; ///< woke this long after the deadline, summed
  std::atomic<std::int64_t> busy_ns{0};      ///< inside execute, summed
  std::atomic<std::int64_t> gaps{0};
  std::atomic<std::int64_t> gap_ns{0}; ///< from one execute's return to the next's start, summed
};
sleep_probe the_sleep_probe;

/// Batch latency 1000 us + 20 us per element, by sleeping until the batch's deadline.
struct sleeping_backend {
  static constexpr std::int32_t max_batch_size = max_batch;
  static constexpr servekit::tensor_spec inputs[] = {
      {"INPUT0", servekit::data_type::fp32, {static_cast<std::int64_t>(elements_per_request)}},
  };

  static constexpr auto fixed = 1000us;
  static constexpr auto per_element = 20us;

  explicit sleeping_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
#if defined(__linux__)
    // A backend that models a kernel's duration by sleeping wants its sleeps exact: Linux
    // rounds a thread's timed sleeps up by its timer slack (50 us by default). execute always
    // runs on this instance's own thread, so setting it once here is enough.
    thread_local const bool precise_sleeps = ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
    static_cast<void>(precise_sleeps);
#endif
    const auto start = bench_clock::now();
    const auto deadline = start + fixed + per_element * b.batch_size();
    std::this_thread::sleep_until(deadline);
    const auto woke = bench_clock::now();

    sleep_probe& p = the_sleep_probe;
    p.executions.fetch_add(1, std::memory_order_relaxed);
    p.overshoot_ns.fetch_add((woke - deadline).count(), std::memory_order_relaxed);
    p.busy_ns.fetch_add((woke - start).count(), std::memory_order_relaxed);
    if (last_return_ != bench_clock::time_point{}) {
      p.gaps.fetch_add(1, std::memory_order_relaxed);
      p.gap_ns.fetch_add((start - last_return_).count(), std::memory_order_relaxed);
    }
    last_return_ = woke;
  }

private:
  bench_clock::time_point last_return_{};
};

/// Requests per second the 1000 + 20 * b latency model allows at batch 32: 32 / 1640 us.
constexpr double theoretical_rps = 32.0 / 1640e-6;

// -- request building and the response callback (shared by servekit and the baseline) ---------

/// A new request, as a server builds one per call: one FP32 [1,16] tensor named INPUT0.
servekit::request make_request(float seed) {
  std::array<float, elements_per_request> values{};
  for (std::size_t k = 0; k < values.size(); ++k) {
    values[k] = seed + static_cast<float>(k);
  }
  servekit::request r;
  r.inputs.push_back(servekit::make_tensor("INPUT0", servekit::data_type::fp32,
                                           {1, static_cast<std::int64_t>(elements_per_request)},
                                           std::span<const float>{values}));
  return r;
}

/// A submitting thread's window of requests in flight: a semaphore of credits, taken before each
/// submit and given back by the response callback (what a client that bounds its requests in
/// flight writes with C++20). libstdc++'s release() enters the kernel only when the count was 0,
/// that is when the submitter may be asleep; a full window blocks the submitter in acquire().
struct window {
  explicit window(int depth) : credits{depth} {}
  std::counting_semaphore<> credits;
  alignas(64) std::atomic<std::uint64_t> completed{0}; // by the response callback
  std::atomic<std::uint64_t> wrong{0};
  alignas(64) std::atomic<std::uint64_t> rejected{0}; // written by the submitter
};

/// The response callback of the throughput runs: check the answer, give back the credit.
servekit::response_sink make_sink(window& w, float seed) {
  return [slots = &w, seed](servekit::response&& r) {
    const servekit::tensor* out = r.find_output("OUTPUT0");
    const bool expected = r.ok() && (out == nullptr || out->values<float>()[0] == seed);
    if (!expected) {
      slots->wrong.fetch_add(1, std::memory_order_relaxed);
    }
    slots->completed.fetch_add(1, std::memory_order_relaxed);
    slots->credits.release();
  };
}

float seed_of(std::uint64_t n) { return static_cast<float>(n & 0xffffU); }

// -- measurement helpers ------------------------------------------------------------------------

double seconds_between(bench_clock::time_point a, bench_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// CPU time and context switches of the whole process (every thread) so far.
struct process_usage {
  double cpu_s = 0;
  double switches = 0; ///< voluntary (went to sleep) + involuntary (preempted)

  static process_usage now() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    const auto tv = [](const timeval& t) {
      return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
    };
    return {tv(u.ru_utime) + tv(u.ru_stime), static_cast<double>(u.ru_nvcsw + u.ru_nivcsw)};
  }
};

/// The CPUs this process may run on (all of them if the query fails).
std::vector<std::size_t> allowed_cpus() {
  std::vector<std::size_t> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (std::size_t cpu = 0; cpu < std::size_t{CPU_SETSIZE}; ++cpu) {
      if (CPU_ISSET(cpu, &set)) {
        cpus.push_back(cpu);
      }
    }
  }
  if (cpus.empty()) {
    cpus.push_back(0);
  }
  return cpus;
}

/// Where the measured threads run. `os`: wherever the kernel puts them (the default; on a
/// small VM it usually keeps a waker and the thread it wakes on one CPU). `same`: every thread
/// on one CPU. `split`: instance threads on one CPU, submitting threads on another.
enum class placement : std::uint8_t { os, same, split };

struct cpu_plan {
  placement where = placement::os;
  std::size_t first = 0;  ///< submitters (and everything, for `same`)
  std::size_t second = 0; ///< instance threads, for `split`

  /// Call on the main thread before building a model: its threads inherit this.
  void before_instances() const {
    if (where == placement::split) {
      bench_support::pin(pthread_self(), second);
    }
  }
  /// Call on the main thread after building it: submitters (the main thread, and the threads it
  /// starts) go here.
  void before_submitters() const {
    if (where == placement::split) {
      bench_support::pin(pthread_self(), first);
    }
  }
};

// -- latency: one request in flight -------------------------------------------------------------

struct latency_result {
  double p50_us = 0;
  double p99_us = 0;
  std::uint64_t wrong = 0;
};

/// Waits for one response at a time. The submitter sleeps on a std::condition_variable (what a
/// synchronous client of an asynchronous API writes), so the figure is comparable to pingpong.
struct one_response {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;  // guarded by m
  bool wrong = false; // guarded by m
};

/// `Submit(request&&, response_sink) -> status`. `flag` must outlive whatever runs the sinks.
template <class Submit>
latency_result measure_latency(one_response& flag, int samples, Submit&& submit,
                               std::chrono::microseconds pause = {}) {
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(samples));
  latency_result out;
  const int warmup = samples / 10;
  for (int i = 0; i < warmup + samples; ++i) {
    const float seed = seed_of(static_cast<std::uint64_t>(i));
    if (pause != std::chrono::microseconds{}) {
      std::this_thread::sleep_for(pause); // long enough for an idle instance to go to sleep
    }
    const auto t0 = bench_clock::now();
    {
      const std::lock_guard lock{flag.m};
      flag.done = false;
    }
    const servekit::status s =
        submit(make_request(seed), [f = &flag, seed](servekit::response&& r) {
          const servekit::tensor* o = r.find_output("OUTPUT0");
          const bool expected = r.ok() && o != nullptr && o->values<float>()[0] == seed;
          {
            const std::lock_guard lock{f->m};
            f->done = true;
            f->wrong = !expected;
          }
          f->cv.notify_one();
        });
    if (!s.ok()) {
      ++out.wrong;
      continue;
    }
    bool wrong = false;
    {
      std::unique_lock lock{flag.m};
      flag.cv.wait(lock, [&] { return flag.done; });
      wrong = flag.wrong;
    }
    const auto t1 = bench_clock::now();
    out.wrong += wrong ? 1U : 0U;
    if (i >= warmup) {
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  out.p50_us = bench_support::percentile(us, 0.5);
  out.p99_us = bench_support::percentile(us, 0.99);
  return out;
}

// -- throughput: submitters keeping a window in flight ------------------------------------------

struct counters {
  std::uint64_t inferences = 0;
  std::uint64_t executions = 0;
};

struct throughput_result {
  double rps = 0;
  double mean_batch = 0;
  double cpu_us_per_request = 0; ///< process CPU time (all threads) per completed request
  double switches_per_batch = 0; ///< context switches (all threads) per execution
  std::uint64_t wrong = 0;
  std::uint64_t rejected = 0;
};

/// `clients` threads each keep `total_in_flight / clients` requests in flight through `submit`;
/// after `warmup`, requests completed and `count()`'s batch counters are measured over `length`.
template <class Submit, class Count>
throughput_result
measure_throughput(int clients, int total_in_flight, std::chrono::duration<double> warmup,
                   std::chrono::duration<double> length, Submit&& submit, Count&& count) {
  const int depth = total_in_flight / clients;
  std::vector<std::unique_ptr<window>> windows;
  for (int c = 0; c < clients; ++c) {
    windows.push_back(std::make_unique<window>(depth));
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      window& w = *windows[static_cast<std::size_t>(c)];
      std::uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        w.credits.acquire();
        const float seed = seed_of(n++);
        if (!submit(make_request(seed), make_sink(w, seed)).ok()) {
          w.credits.release();
          w.rejected.fetch_add(1, std::memory_order_relaxed);
        }
      }
      for (int i = 0; i < depth; ++i) {
        w.credits.acquire(); // every request answered
      }
    });
  }
  const auto completed = [&] {
    std::uint64_t total = 0;
    for (const auto& w : windows) {
      total += w->completed.load(std::memory_order_relaxed);
    }
    return total;
  };

  std::this_thread::sleep_for(warmup);
  const auto t0 = bench_clock::now();
  const std::uint64_t done0 = completed();
  const counters c0 = count();
  const process_usage u0 = process_usage::now();
  std::this_thread::sleep_for(length);
  const auto t1 = bench_clock::now();
  const std::uint64_t done1 = completed();
  const counters c1 = count();
  const process_usage u1 = process_usage::now();
  stop.store(true, std::memory_order_relaxed);
  for (auto& t : threads) {
    t.join();
  }

  throughput_result out;
  const double requests = static_cast<double>(done1 - done0);
  out.rps = requests / seconds_between(t0, t1);
  const auto executions = c1.executions - c0.executions;
  out.mean_batch = executions == 0 ? 0.0
                                   : static_cast<double>(c1.inferences - c0.inferences) /
                                         static_cast<double>(executions);
  out.cpu_us_per_request = requests == 0 ? 0.0 : (u1.cpu_s - u0.cpu_s) * 1e6 / requests;
  out.switches_per_batch =
      executions == 0 ? 0.0 : (u1.switches - u0.switches) / static_cast<double>(executions);
  for (const auto& w : windows) {
    out.wrong += w->wrong.load(std::memory_order_relaxed);
    out.rejected += w->rejected.load(std::memory_order_relaxed);
  }
  return out;
}

// -- the servekit models ------------------------------------------------------------------------

using identity_model = servekit::model<identity_backend, servekit::dynamic_batcher<>>;
using sleeping_model = servekit::model<sleeping_backend, servekit::dynamic_batcher<>>;

servekit::model_options batching_options(std::string name) {
  servekit::model_options options;
  options.name = std::move(name);
  options.max_batch_size = max_batch;
  servekit::dynamic_batching_options batching;
  batching.max_queue_delay_microseconds = 0;
  options.dynamic_batching = batching;
  return options;
}

template <class Model>
auto model_submitter(Model& m) {
  return [&m](servekit::request&& r, servekit::response_sink&& sink) {
    return m.submit(std::move(r), std::move(sink));
  };
}

template <class Model>
auto model_counters(const Model& m) {
  return [&m] {
    const auto s = m.statistics();
    return counters{s.inference_count, s.execution_count};
  };
}

using baseline_batcher = servekit_bench::mutex_batcher<identity_backend>;

auto baseline_submitter(baseline_batcher& b) {
  return [&b](servekit::request&& r, servekit::response_sink&& sink) {
    return b.submit(std::move(r), std::move(sink));
  };
}

auto baseline_counters(const baseline_batcher& b) {
  return [&b] { return counters{b.inference_count(), b.execution_count()}; };
}

// -- simulated capacity -------------------------------------------------------------------------

struct sim_result {
  double efficiency = 0;
  double mean_batch = 0;
  double wall_ms = 0; ///< how long the simulation itself took
};

sim_result simulate(std::size_t requests) {
  servekit::scheduler_settings settings;
  settings.model_name = "simulated";
  settings.max_batch_size = max_batch;
  settings.dynamic_batching.max_queue_delay_microseconds = 0;
  const servekit::latency_model latency{std::chrono::microseconds{1000},
                                        std::chrono::microseconds{20}};
  const auto wall0 = bench_clock::now();
  servekit::simulated_shell<servekit::dynamic_batcher<>> shell{settings, 1, latency};
  std::uint64_t answered = 0;
  for (std::size_t i = 0; i < requests; ++i) {
    const servekit::time_point at{std::chrono::microseconds{10 * static_cast<std::int64_t>(i)}};
    shell.submit_at(at, servekit::request{},
                    [&answered](servekit::response&& r) { answered += r.ok() ? 1U : 0U; });
  }
  shell.run();
  const auto wall1 = bench_clock::now();

  sim_result out;
  const auto& batches = shell.batches();
  if (batches.empty() || answered != requests) {
    std::fprintf(stderr, "bench_dynamic: simulation answered %llu of %zu requests\n",
                 static_cast<unsigned long long>(answered), requests);
    return out;
  }
  const double makespan_s =
      std::chrono::duration<double>(batches.back().end - batches.front().start).count();
  out.efficiency = static_cast<double>(requests) / makespan_s / theoretical_rps;
  out.mean_batch = static_cast<double>(requests) / static_cast<double>(batches.size());
  out.wall_ms = std::chrono::duration<double, std::milli>(wall1 - wall0).count();
  return out;
}

// -- command line and report --------------------------------------------------------------------

struct settings {
  bool json = false;
  bool quick = false;
  double seconds = 5.0;
  placement where = placement::os;
  std::set<std::string, std::less<>> only;

  [[nodiscard]] bool runs(std::string_view section) const {
    return only.empty() || only.find(section) != only.end();
  }
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "bench_dynamic: %s\nusage: bench_dynamic [--json] [--seconds N] [--quick] "
               "[--placement os|same|split] "
               "[--only pingpong,latency,throughput,throughput_2x256,baseline,sim,threaded]\n",
               why);
  std::exit(2);
}

settings parse(int argc, char** argv) {
  settings s;
  bool seconds_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg{argv[i]};
    if (arg == "--json") {
      s.json = true;
    } else if (arg == "--quick") {
      s.quick = true;
    } else if (arg == "--placement") {
      if (i + 1 >= argc) {
        usage("missing value");
      }
      const std::string_view value{argv[++i]};
      if (value == "os") {
        s.where = placement::os;
      } else if (value == "same") {
        s.where = placement::same;
      } else if (value == "split") {
        s.where = placement::split;
      } else {
        usage("--placement takes os, same or split");
      }
    } else if (arg == "--seconds" || arg == "--only") {
      if (i + 1 >= argc) {
        usage("missing value");
      }
      const std::string value{argv[++i]};
      if (arg == "--seconds") {
        char* end = nullptr;
        s.seconds = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0' || s.seconds <= 0) {
          usage("--seconds needs a positive number");
        }
        seconds_given = true;
      } else {
        bench_support::add_names(value, s.only);
      }
    } else if (arg == "--help" || arg == "-h") {
      usage("help");
    } else {
      usage("unknown argument");
    }
  }
  if (s.quick && !seconds_given) {
    s.seconds = 1.0;
  }
  return s;
}

} // namespace

int main(int argc, char** argv) {
  const settings cfg = parse(argc, argv);
  const int pingpong_rounds = cfg.quick ? 2000 : 20000;
  const int latency_samples = cfg.quick ? 2000 : 20000;
  const std::chrono::duration<double> warmup{cfg.quick ? 0.5 : 1.0};
  const std::chrono::duration<double> length{cfg.seconds};
  const std::chrono::duration<double> threaded_length{cfg.quick ? 1.0 : 3.0};
  const std::chrono::duration<double> threaded_warmup{cfg.quick ? 0.3 : 0.5};

  // Figures in report order; absent ones (sections left out with --only) print as null.
  std::map<std::string, double, std::less<>> figures;
  std::vector<std::string> order;
  const auto put = [&](const std::string& key, double v) {
    if (figures.emplace(key, v).second) {
      order.push_back(key);
    }
  };
  const auto has = [&](std::string_view k) { return figures.find(k) != figures.end(); };
  std::uint64_t wrong = 0;
  const auto record_throughput = [&](const std::string& prefix, const std::string& suffix,
                                     std::string_view label, const throughput_result& t) {
    wrong += t.wrong + t.rejected;
    put(prefix + "throughput_rps" + suffix, t.rps);
    put(prefix + "mean_batch" + suffix, t.mean_batch);
    put(prefix + "cpu_us_per_request" + suffix, t.cpu_us_per_request);
    put(prefix + "switches_per_batch" + suffix, t.switches_per_batch);
    fmt::print("{}: {:.0f} requests/s, mean batch {:.2f}, {:.2f} CPU us/request, {:.2f} context "
               "switches/batch\n",
               label, t.rps, t.mean_batch, t.cpu_us_per_request, t.switches_per_batch);
  };

  const unsigned cpus = std::thread::hardware_concurrency();
  const double load = bench_support::load_average();
  const std::vector<std::size_t> allowed = allowed_cpus();
  const cpu_plan plan{cfg.where, allowed.front(),
                      allowed.size() > 1 ? allowed[1] : allowed.front()};
  constexpr std::string_view placement_names[] = {"os", "same", "split"};
  const std::string_view placement_name = placement_names[static_cast<std::size_t>(cfg.where)];
  fmt::print("bench_dynamic: {} CPUs ({}), load average {:.2f}, {:.1f} s windows{}, placement {}\n",
             cpus, bench_support::cpu_model(), load, cfg.seconds, cfg.quick ? ", quick" : "",
             placement_name);

  if (cfg.runs("pingpong")) {
    put("pingpong_us", bench_support::pingpong_us(pingpong_rounds, std::nullopt));
    put("pingpong_pinned_us",
        bench_support::pingpong_us(pingpong_rounds, std::pair{plan.first, plan.first}));
    if (plan.second != plan.first) {
      put("pingpong_cross_us",
          bench_support::pingpong_us(pingpong_rounds, std::pair{plan.first, plan.second}));
    }
    fmt::print("pingpong (condition_variable, one way, median): {:.1f} us; pinned to one CPU "
               "{:.1f} us; pinned to two CPUs {:.1f} us\n",
               figures["pingpong_us"], figures["pingpong_pinned_us"],
               has("pingpong_cross_us") ? figures["pingpong_cross_us"] : 0.0);
  }

  // The pingpong figures above ignore --placement; everything below follows it.
  if (cfg.where == placement::same) {
    bench_support::pin(pthread_self(), plan.first); // every thread started from now on inherits it
  }

  if (cfg.runs("latency")) {
    one_response flag;
    plan.before_instances();
    identity_model m{batching_options("identity_latency")};
    plan.before_submitters();
    const latency_result l = measure_latency(flag, latency_samples, model_submitter(m));
    wrong += l.wrong;
    put("latency_p50_us", l.p50_us);
    put("latency_p99_us", l.p99_us);
    fmt::print("servekit latency, 1 in flight: p50 {:.1f} us, p99 {:.1f} us\n", l.p50_us, l.p99_us);
    // The same with 200 us between requests: each one finds the instance asleep (it watches
    // for work for 20 us only), so this is the cost of waking it.
    const latency_result cold =
        measure_latency(flag, latency_samples / 10, model_submitter(m), 200us);
    wrong += cold.wrong;
    put("latency_cold_p50_us", cold.p50_us);
    put("latency_cold_p99_us", cold.p99_us);
    fmt::print("servekit latency, 1 in flight, instance asleep: p50 {:.1f} us, p99 {:.1f} us\n",
               cold.p50_us, cold.p99_us);
  }

  // servekit under `clients` submitting threads keeping `in_flight` requests in flight.
  const auto servekit_throughput = [&](const char* model_name, int clients, int in_flight,
                                       const char* suffix, const char* label) {
    plan.before_instances();
    identity_model m{batching_options(model_name)};
    plan.before_submitters();
    const throughput_result t = measure_throughput(clients, in_flight, warmup, length,
                                                   model_submitter(m), model_counters(m));
    record_throughput("", suffix, label, t);
  };
  if (cfg.runs("throughput")) {
    servekit_throughput("identity", 1, 64, "", "servekit throughput, 1 x 64 in flight");
  }
  if (cfg.runs("throughput_2x256")) {
    servekit_throughput("identity_2x256", 2, 256, "_2x256",
                        "servekit throughput, 2 x 128 in flight");
  }

  if (cfg.runs("baseline")) {
    {
      one_response flag;
      plan.before_instances();
      baseline_batcher b{static_cast<std::size_t>(max_batch)};
      plan.before_submitters();
      const latency_result l = measure_latency(flag, latency_samples, baseline_submitter(b));
      wrong += l.wrong;
      put("baseline_latency_p50_us", l.p50_us);
      put("baseline_latency_p99_us", l.p99_us);
      fmt::print("baseline latency, 1 in flight: p50 {:.1f} us, p99 {:.1f} us\n", l.p50_us,
                 l.p99_us);
    }
    {
      plan.before_instances();
      baseline_batcher b{static_cast<std::size_t>(max_batch)};
      plan.before_submitters();
      const throughput_result t =
          measure_throughput(1, 64, warmup, length, baseline_submitter(b), baseline_counters(b));
      record_throughput("baseline_", "", "baseline throughput, 1 x 64 in flight", t);
    }
  }

  if (cfg.runs("sim")) {
    const sim_result s = simulate(cfg.quick ? 50'000 : 200'000);
    put("sim_efficiency", s.efficiency);
    put("sim_mean_batch", s.mean_batch);
    put("sim_wall_ms", s.wall_ms);
    fmt::print("simulated 1000+20*b us, arrivals every 10 us: efficiency {:.4f}, mean batch "
               "{:.2f} ({:.0f} ms to simulate)\n",
               s.efficiency, s.mean_batch, s.wall_ms);
  }

  if (cfg.runs("threaded")) {
    plan.before_instances();
    sleeping_model m{batching_options("sleeping")};
    plan.before_submitters();
    struct probe_reading {
      std::int64_t executions, overshoot_ns, busy_ns, gaps, gap_ns;
    };
    std::vector<probe_reading> readings; // at the start and at the end of the window
    const auto count = [&, stats = model_counters(m)] {
      const sleep_probe& p = the_sleep_probe;
      readings.push_back({p.executions.load(), p.overshoot_ns.load(), p.busy_ns.load(),
                          p.gaps.load(), p.gap_ns.load()});
      return stats();
    };
    const throughput_result t =
        measure_throughput(1, 256, threaded_warmup, threaded_length, model_submitter(m), count);
    wrong += t.wrong + t.rejected;
    const probe_reading& a = readings.front();
    const probe_reading& z = readings.back();
    const auto mean_us = [](std::int64_t ns, std::int64_t n) {
      return n == 0 ? 0.0 : static_cast<double>(ns) / static_cast<double>(n) / 1000.0;
    };
    const double overshoot_us =
        mean_us(z.overshoot_ns - a.overshoot_ns, z.executions - a.executions);
    const double gap_us = mean_us(z.gap_ns - a.gap_ns, z.gaps - a.gaps);
    put("threaded_efficiency", t.rps / theoretical_rps);
    put("threaded_mean_batch", t.mean_batch);
    put("threaded_sleep_overshoot_us", overshoot_us);
    put("threaded_gap_us", gap_us);
    // The share of the window the instance spent inside execute: what the shell controls. The
    // rest of the shortfall is sleep_until waking late (the OS timer, not servekit).
    const auto busy = static_cast<double>(z.busy_ns - a.busy_ns);
    const auto idle = static_cast<double>(z.gap_ns - a.gap_ns);
    const double busy_fraction = busy + idle == 0 ? 0.0 : busy / (busy + idle);
    put("threaded_busy_fraction", busy_fraction);
    fmt::print("threaded 1000+20*b us (sleep_until), 256 in flight: {:.0f} requests/s of {:.0f}, "
               "efficiency {:.4f}, mean batch {:.2f}\n"
               "  per execution: sleep_until wakes {:.1f} us late; {:.1f} us from one execute's "
               "return to the next's start (instance busy {:.2f}% of the time)\n",
               t.rps, theoretical_rps, t.rps / theoretical_rps, t.mean_batch, overshoot_us, gap_us,
               busy_fraction * 100.0);
  }

  if (has("throughput_rps") && has("baseline_throughput_rps")) {
    put("throughput_ratio", figures["throughput_rps"] / figures["baseline_throughput_rps"]);
  }
  if (has("latency_p50_us") && has("pingpong_us")) {
    put("ratio_latency_to_pingpong", figures["latency_p50_us"] / figures["pingpong_us"]);
    // Under `os` placement the kernel may put the pingpong pair on one CPU and the latency pair
    // on two (or the reverse), and a cross-CPU wake-up on a VM costs several times a same-CPU
    // one. With --placement same or split, compare like with like.
    const char* matched = cfg.where == placement::same    ? "pingpong_pinned_us"
                          : cfg.where == placement::split ? "pingpong_cross_us"
                                                          : "pingpong_us";
    if (has(matched)) {
      put("ratio_latency_to_pingpong_matched", figures["latency_p50_us"] / figures[matched]);
    }
  }

  // Goals.
  int missed = 0;
  const auto goal = [&](std::string_view what, std::optional<bool> met) {
    if (!met) {
      return;
    }
    missed += *met ? 0 : 1;
    fmt::print("  [{}] {}\n", *met ? "met " : "MISS", what);
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
  fmt::print("goals:\n");
  goal(fmt::format("latency_p50_us <= 3 x pingpong_us (ratio {:.2f})",
                   has("ratio_latency_to_pingpong") ? figures["ratio_latency_to_pingpong"] : 0.0),
       when({"ratio_latency_to_pingpong"},
            [&] { return figures["ratio_latency_to_pingpong"] <= 3.0; }));
  if (cfg.where != placement::os) {
    goal(fmt::format("latency_p50_us <= 3 x the pingpong of the same placement (ratio {:.2f})",
                     has("ratio_latency_to_pingpong_matched")
                         ? figures["ratio_latency_to_pingpong_matched"]
                         : 0.0),
         when({"ratio_latency_to_pingpong_matched"},
              [&] { return figures["ratio_latency_to_pingpong_matched"] <= 3.0; }));
  }
  goal("throughput_rps >= 1,000,000",
       when({"throughput_rps"}, [&] { return figures["throughput_rps"] >= 1e6; }));
  goal(fmt::format("throughput_rps >= 2 x baseline (ratio {:.2f})",
                   has("throughput_ratio") ? figures["throughput_ratio"] : 0.0),
       when({"throughput_ratio"}, [&] { return figures["throughput_ratio"] >= 2.0; }));
  goal("sim_efficiency >= 0.99",
       when({"sim_efficiency"}, [&] { return figures["sim_efficiency"] >= 0.99; }));
  goal("threaded_efficiency >= 0.95",
       when({"threaded_efficiency"}, [&] { return figures["threaded_efficiency"] >= 0.95; }));
  fmt::print("{} goal(s) missed; {} wrong or rejected responses\n", missed, wrong);

  if (cfg.json) {
    std::string json = "{";
    for (const auto& k : order) {
      json += fmt::format("\"{}\": {:.6g}, ", k, figures[k]);
    }
    json +=
        fmt::format("\"seconds\": {:.6g}, \"quick\": {}, \"placement\": \"{}\", \"nproc\": {}, "
                    "\"load_average\": {:.2f}, \"wrong\": {}}}",
                    cfg.seconds, cfg.quick ? "true" : "false", placement_name, cpus, load, wrong);
    fmt::print("{}\n", json);
  }
  return wrong == 0 ? 0 : 1;
}
