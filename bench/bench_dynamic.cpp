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

#include "harness/command_line.hpp"
#include "harness/machine.hpp"
#include "harness/measure.hpp"
#include "harness/model.hpp"
#include "harness/report.hpp"

#include <servekit/servekit.hpp>

#include <fmt/format.h>

#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
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
using servekit_bench::bench_clock;
using servekit_bench::seed_of;

constexpr std::int32_t max_batch = 32;
constexpr std::size_t elements_per_request = 16;

// -- the backends -----------------------------------------------------------------------------

/// Triton's identity model: OUTPUT0 = INPUT0, FP32 [16], batching up to 32.
struct identity_backend {
  static constexpr std::int32_t max_batch_size = max_batch;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT0", servekit::data_type::fp32, {static_cast<std::int64_t>(elements_per_request)}},
  };
  static constexpr servekit::tensor_declaration outputs[] = {
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
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT0", servekit::data_type::fp32, {static_cast<std::int64_t>(elements_per_request)}},
  };

  static constexpr auto fixed = 1000us;
  static constexpr auto per_element = 20us;

  explicit sleeping_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    servekit_bench::precise_sleeps();
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
  return servekit_bench::seeded_request<elements_per_request>("INPUT0", seed);
}

/// The response callback of the throughput runs: check the answer, give back the credit.
servekit::response_sink make_sink(servekit_bench::window& w, float seed) {
  return [slots = &w, seed](servekit::response&& r) {
    const servekit::tensor* out = r.find_output("OUTPUT0");
    slots->answered(r.ok() && (out == nullptr || out->values<float>()[0] == seed));
  };
}

// -- where the threads run -----------------------------------------------------------------------

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
      servekit_bench::pin(pthread_self(), second);
    }
  }
  /// Call on the main thread after building it: submitters (the main thread, and the threads it
  /// starts) go here.
  void before_submitters() const {
    if (where == placement::split) {
      servekit_bench::pin(pthread_self(), first);
    }
  }
};

// -- latency: one request in flight -------------------------------------------------------------

struct latency_result {
  double p50_us = 0;
  double p99_us = 0;
  std::uint64_t wrong = 0;
};

/// One request in flight at a time, through `Submit(request&&, response_sink) -> status`. The
/// submitter sleeps on a std::condition_variable (what a synchronous client of an asynchronous
/// API writes), so the figure is comparable to pingpong. `flag` must outlive whatever runs the
/// sinks.
template <class Submit>
latency_result measure_latency(servekit_bench::one_response& flag, int samples, Submit&& submit,
                               std::chrono::microseconds pause = {}) {
  const servekit_bench::timed_calls calls = servekit_bench::time_calls(
      samples / 10, samples,
      [&](std::uint64_t n) {
        const float seed = seed_of(n);
        return servekit_bench::answers(servekit_bench::call_with(submit, flag, make_request(seed)),
                                       "OUTPUT0", seed);
      },
      pause);
  return {servekit_bench::percentile(calls.us, 0.5), servekit_bench::percentile(calls.us, 0.99),
          calls.wrong};
}

// -- throughput: submitters keeping a window in flight ------------------------------------------

/// `clients` threads each keep `total_in_flight / clients` requests in flight through `submit`;
/// after `warmup`, requests completed and `count()`'s batch counters are measured over `length`.
template <class Submit, class Count>
servekit_bench::closed_loop_result
measure_throughput(int clients, int total_in_flight, std::chrono::duration<double> warmup,
                   std::chrono::duration<double> length, Submit&& submit, Count&& count) {
  return servekit_bench::closed_loop(
      clients, total_in_flight, warmup, length,
      [&submit](servekit_bench::window& w, std::uint64_t n) {
        const float seed = seed_of(n);
        return submit(make_request(seed), make_sink(w, seed));
      },
      count);
}

// -- the servekit models ------------------------------------------------------------------------

using identity_model = servekit::model<identity_backend, servekit::dynamic_batcher<>>;
using sleeping_model = servekit::model<sleeping_backend, servekit::dynamic_batcher<>>;

servekit::model_options batching_options(std::string name) {
  return servekit_bench::batching_options(std::move(name), max_batch);
}

using baseline_batcher = servekit_bench::mutex_batcher<identity_backend>;

auto baseline_counters(const baseline_batcher& b) {
  return [&b] { return servekit_bench::batch_counters{b.inference_count(), b.execution_count()}; };
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

constexpr std::string_view placement_names[] = {"os", "same", "split"};

struct settings {
  bool json = false;
  bool quick = false;
  double seconds = 5.0;
  placement where = placement::os;
  servekit_bench::section_filter only;
};

settings parse(int argc, char** argv) {
  settings s;
  std::string where = "os";
  servekit_bench::command_line{"bench_dynamic"}
      .json(s.json)
      .window_seconds(s.seconds)
      .quick(s.quick, "1 s windows and fewer samples (CI smoke)")
      .text("--placement", where, {"os", "same", "split"},
            "where the measured threads run: os (default), same (one CPU) or split (instance "
            "threads on one CPU, submitters on another)")
      .only(s.only, "pingpong, latency, throughput, throughput_2x256, baseline, sim, threaded")
      .parse(argc, argv);
  s.where = static_cast<placement>(
      std::find(std::begin(placement_names), std::end(placement_names), where) -
      std::begin(placement_names));
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

  servekit_bench::report figures;
  std::uint64_t wrong = 0;
  const auto record_throughput = [&](const std::string& prefix, const std::string& suffix,
                                     std::string_view label,
                                     const servekit_bench::closed_loop_result& t) {
    wrong += t.wrong + t.rejected;
    figures.put(prefix + "throughput_rps" + suffix, t.rps);
    figures.put(prefix + "mean_batch" + suffix, t.mean_batch);
    figures.put(prefix + "cpu_us_per_request" + suffix, t.cpu_us_per_request);
    figures.put(prefix + "switches_per_batch" + suffix, t.switches_per_batch);
    fmt::print("{}: {:.0f} requests/s, mean batch {:.2f}, {:.2f} CPU us/request, {:.2f} context "
               "switches/batch\n",
               label, t.rps, t.mean_batch, t.cpu_us_per_request, t.switches_per_batch);
  };

  const servekit_bench::machine host;
  const std::vector<std::size_t> allowed = servekit_bench::allowed_cpus();
  const cpu_plan plan{cfg.where, allowed.front(),
                      allowed.size() > 1 ? allowed[1] : allowed.front()};
  const std::string_view placement_name = placement_names[static_cast<std::size_t>(cfg.where)];
  fmt::print("bench_dynamic: {} CPUs ({}), load average {:.2f}, {:.1f} s windows{}, placement {}\n",
             host.nproc, host.cpu, host.load, cfg.seconds, cfg.quick ? ", quick" : "",
             placement_name);

  if (cfg.only.runs("pingpong")) {
    servekit_bench::put_pingpong(figures, pingpong_rounds, plan.first,
                                 plan.second != plan.first ? std::optional{plan.second}
                                                           : std::nullopt);
  }

  // The pingpong figures above ignore --placement; everything below follows it.
  if (cfg.where == placement::same) {
    servekit_bench::pin(pthread_self(), plan.first); // every thread started from now on inherits it
  }

  if (cfg.only.runs("latency")) {
    servekit_bench::one_response flag;
    plan.before_instances();
    identity_model m{batching_options("identity_latency")};
    plan.before_submitters();
    const latency_result l = measure_latency(flag, latency_samples, servekit_bench::submitter(m));
    wrong += l.wrong;
    figures.put("latency_p50_us", l.p50_us);
    figures.put("latency_p99_us", l.p99_us);
    fmt::print("servekit latency, 1 in flight: p50 {:.1f} us, p99 {:.1f} us\n", l.p50_us, l.p99_us);
    // The same with 200 us between requests: each one finds the instance asleep (it watches
    // for work for 20 us only), so this is the cost of waking it.
    const latency_result cold =
        measure_latency(flag, latency_samples / 10, servekit_bench::submitter(m), 200us);
    wrong += cold.wrong;
    figures.put("latency_cold_p50_us", cold.p50_us);
    figures.put("latency_cold_p99_us", cold.p99_us);
    fmt::print("servekit latency, 1 in flight, instance asleep: p50 {:.1f} us, p99 {:.1f} us\n",
               cold.p50_us, cold.p99_us);
  }

  // servekit under `clients` submitting threads keeping `in_flight` requests in flight.
  const auto servekit_throughput = [&](const char* model_name, int clients, int in_flight,
                                       const char* suffix, const char* label) {
    plan.before_instances();
    identity_model m{batching_options(model_name)};
    plan.before_submitters();
    const servekit_bench::closed_loop_result t =
        measure_throughput(clients, in_flight, warmup, length, servekit_bench::submitter(m),
                           servekit_bench::statistics_counters(m));
    record_throughput("", suffix, label, t);
  };
  if (cfg.only.runs("throughput")) {
    servekit_throughput("identity", 1, 64, "", "servekit throughput, 1 x 64 in flight");
  }
  if (cfg.only.runs("throughput_2x256")) {
    servekit_throughput("identity_2x256", 2, 256, "_2x256",
                        "servekit throughput, 2 x 128 in flight");
  }

  if (cfg.only.runs("baseline")) {
    {
      servekit_bench::one_response flag;
      plan.before_instances();
      baseline_batcher b{static_cast<std::size_t>(max_batch)};
      plan.before_submitters();
      const latency_result l = measure_latency(flag, latency_samples, servekit_bench::submitter(b));
      wrong += l.wrong;
      figures.put("baseline_latency_p50_us", l.p50_us);
      figures.put("baseline_latency_p99_us", l.p99_us);
      fmt::print("baseline latency, 1 in flight: p50 {:.1f} us, p99 {:.1f} us\n", l.p50_us,
                 l.p99_us);
    }
    {
      plan.before_instances();
      baseline_batcher b{static_cast<std::size_t>(max_batch)};
      plan.before_submitters();
      const servekit_bench::closed_loop_result t = measure_throughput(
          1, 64, warmup, length, servekit_bench::submitter(b), baseline_counters(b));
      record_throughput("baseline_", "", "baseline throughput, 1 x 64 in flight", t);
    }
  }

  if (cfg.only.runs("sim")) {
    const sim_result s = simulate(cfg.quick ? 50'000 : 200'000);
    figures.put("sim_efficiency", s.efficiency);
    figures.put("sim_mean_batch", s.mean_batch);
    figures.put("sim_wall_ms", s.wall_ms);
    fmt::print("simulated 1000+20*b us, arrivals every 10 us: efficiency {:.4f}, mean batch "
               "{:.2f} ({:.0f} ms to simulate)\n",
               s.efficiency, s.mean_batch, s.wall_ms);
  }

  if (cfg.only.runs("threaded")) {
    plan.before_instances();
    sleeping_model m{batching_options("sleeping")};
    plan.before_submitters();
    struct probe_reading {
      std::int64_t executions, overshoot_ns, busy_ns, gaps, gap_ns;
    };
    std::vector<probe_reading> readings; // at the start and at the end of the window
    const auto count = [&, stats = servekit_bench::statistics_counters(m)] {
      const sleep_probe& p = the_sleep_probe;
      readings.push_back({p.executions.load(), p.overshoot_ns.load(), p.busy_ns.load(),
                          p.gaps.load(), p.gap_ns.load()});
      return stats();
    };
    const servekit_bench::closed_loop_result t = measure_throughput(
        1, 256, threaded_warmup, threaded_length, servekit_bench::submitter(m), count);
    wrong += t.wrong + t.rejected;
    const probe_reading& a = readings.front();
    const probe_reading& z = readings.back();
    const auto mean_us = [](std::int64_t ns, std::int64_t n) {
      return n == 0 ? 0.0 : static_cast<double>(ns) / static_cast<double>(n) / 1000.0;
    };
    const double overshoot_us =
        mean_us(z.overshoot_ns - a.overshoot_ns, z.executions - a.executions);
    const double gap_us = mean_us(z.gap_ns - a.gap_ns, z.gaps - a.gaps);
    figures.put("threaded_efficiency", t.rps / theoretical_rps);
    figures.put("threaded_mean_batch", t.mean_batch);
    figures.put("threaded_sleep_overshoot_us", overshoot_us);
    figures.put("threaded_gap_us", gap_us);
    // The share of the window the instance spent inside execute: what the shell controls. The
    // rest of the shortfall is sleep_until waking late (the OS timer, not servekit).
    const auto busy = static_cast<double>(z.busy_ns - a.busy_ns);
    const auto idle = static_cast<double>(z.gap_ns - a.gap_ns);
    const double busy_fraction = busy + idle == 0 ? 0.0 : busy / (busy + idle);
    figures.put("threaded_busy_fraction", busy_fraction);
    fmt::print("threaded 1000+20*b us (sleep_until), 256 in flight: {:.0f} requests/s of {:.0f}, "
               "efficiency {:.4f}, mean batch {:.2f}\n"
               "  per execution: sleep_until wakes {:.1f} us late; {:.1f} us from one execute's "
               "return to the next's start (instance busy {:.2f}% of the time)\n",
               t.rps, theoretical_rps, t.rps / theoretical_rps, t.mean_batch, overshoot_us, gap_us,
               busy_fraction * 100.0);
  }

  figures.ratio("throughput_ratio", "throughput_rps", "baseline_throughput_rps");
  if (figures.ratio("ratio_latency_to_pingpong", "latency_p50_us", "pingpong_us")) {
    // Under `os` placement the kernel may put the pingpong pair on one CPU and the latency pair
    // on two (or the reverse), and a cross-CPU wake-up on a VM costs several times a same-CPU
    // one. With --placement same or split, compare like with like.
    const char* matched = cfg.where == placement::same    ? "pingpong_pinned_us"
                          : cfg.where == placement::split ? "pingpong_cross_us"
                                                          : "pingpong_us";
    figures.ratio("ratio_latency_to_pingpong_matched", "latency_p50_us", matched);
  }

  servekit_bench::goals goals;
  goals.check(fmt::format("latency_p50_us <= 3 x pingpong_us (ratio {:.2f})",
                          figures.get("ratio_latency_to_pingpong")),
              figures.at_most("ratio_latency_to_pingpong", 3.0));
  if (cfg.where != placement::os) {
    goals.check(
        fmt::format("latency_p50_us <= 3 x the pingpong of the same placement (ratio {:.2f})",
                    figures.get("ratio_latency_to_pingpong_matched")),
        figures.at_most("ratio_latency_to_pingpong_matched", 3.0));
  }
  goals.check("throughput_rps >= 1,000,000", figures.at_least("throughput_rps", 1e6));
  goals.check(
      fmt::format("throughput_rps >= 2 x baseline (ratio {:.2f})", figures.get("throughput_ratio")),
      figures.at_least("throughput_ratio", 2.0));
  goals.check("sim_efficiency >= 0.99", figures.at_least("sim_efficiency", 0.99));
  goals.check("threaded_efficiency >= 0.95", figures.at_least("threaded_efficiency", 0.95));
  fmt::print("{} goal(s) missed; {} wrong or rejected responses\n", goals.missed(), wrong);

  if (cfg.json) {
    figures.number("seconds", cfg.seconds);
    figures.string("placement", placement_name);
    figures.put_run(cfg.quick, host, wrong);
    figures.print_json();
  }
  return wrong == 0 ? 0 : 1;
}
