/// bench_adaptive: adaptive dynamic batching against the best static Triton settings, in
/// virtual time (the simulated shell, docs/adaptive-batching.md).
///
/// A day-shaped load (5 % of capacity to 120 % and back, Poisson arrivals with a burst in every
/// level) over a backend of latency(b) = a + c·b, 2 instances, max_batch_size 32, and the
/// objective p99 <= --target-ms (50). Every configuration has the same queue policy: REJECT
/// timeouts at the objective (a request that waited that long can no longer make it). Compared,
/// by goodput (requests per second answered within the objective) at each load level:
///
///   oracle        per level, the best static (max_queue_delay_microseconds, preferred size)
///                 of a sweep, run on that level alone: it knows the load
///   best_static   the one static setting with the most goodput over the whole ramp
///   tf_serving    in_flight_hill_climb (TF Serving's adaptive scheduler), over the ramp
///   clipper_aimd  clipper_aimd (Clipper's AIMD batch size), over the ramp
///   servekit      latency_target, over the ramp (it must adapt as the load changes)
///   admission     latency_target with deadline-aware admission, over the ramp
///
/// Then a threaded confirmation on this machine: the first backend as one that sleeps, at 30, 70
/// and 95 % of its capacity, under static settings and latency_target (p99, share within the
/// objective, goodput).
///
/// The last line with --json is one JSON object: worst_ratio_to_oracle (servekit with admission
/// / oracle, the smallest over the levels up to capacity and the backends),
/// ratio_to_best_static (servekit with admission / best static, whole ramp, the smallest over
/// backends), both also `_without_admission` (latency_target alone), overload_admission_gain
/// (admission / servekit over the 120 % level and the level after it, the smallest over backends),
/// the two bounds oracle_ratio_to_best_static_max (the per-level oracle over the whole ramp / best
/// static: what tuning the static knobs per level could give) and ideal_ratio_to_best_static_max
/// (every request within the objective up to capacity / best static: what any policy could give),
/// and per backend and configuration the per-level goodput and p99 that scripts/plot_adaptive.py
/// draws. The fourth backend, `libtorch`, is the image classifier's profile measured by
/// bench_libtorch (--libtorch-fixed-us, --libtorch-per-element-us).
#include "harness/command_line.hpp"
#include "harness/machine.hpp"
#include "harness/report.hpp"

#include <servekit/runtime/model.hpp>
#include <servekit/runtime/simulated_shell.hpp>
#include <servekit/schedule/adaptive_batcher.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using servekit::duration;
using servekit::time_point;

constexpr std::int32_t max_batch = 32;
constexpr std::size_t instances = 2;

struct backend_case {
  std::string name;
  double fixed_ms;
  double per_element_ms;
  /// The objective and the unit of time of the ramp: level lengths, bursts, the sweep's queue
  /// delays and the controllers' rate window are `time_scale` times the first backend's, so a
  /// backend 300 times faster runs levels of about as many requests against an objective of the
  /// same multiple of its full batch's latency.
  double target_ms = 50;
  double time_scale = 1;

  [[nodiscard]] double capacity() const { // requests/s with full batches on every instance
    return static_cast<double>(instances) * max_batch /
           ((fixed_ms + per_element_ms * max_batch) / 1000.0);
  }
  [[nodiscard]] double full_batch_ms() const { return fixed_ms + per_element_ms * max_batch; }
  [[nodiscard]] servekit::latency_model latency() const {
    return {
        std::chrono::duration_cast<duration>(std::chrono::duration<double, std::milli>(fixed_ms)),
        std::chrono::duration_cast<duration>(
            std::chrono::duration<double, std::milli>(per_element_ms))};
  }
};

/// One load level: its arrivals (µs since the start of the ramp) and where it lies.
struct level {
  double fraction = 0; ///< of capacity
  std::int64_t from_us = 0;
  std::int64_t to_us = 0;
};

struct trace {
  std::vector<level> levels;
  std::vector<std::int64_t> arrivals; ///< µs, sorted
};

/// The ramp: each fraction of capacity for `seconds` (times the backend's time scale), Poisson,
/// plus a burst of 10 ms (scaled too) of capacity at once in the middle of each level.
trace make_ramp(const backend_case& b, const std::vector<double>& fractions, double seconds,
                std::uint64_t seed) {
  trace t;
  std::mt19937_64 random{seed};
  const auto length = static_cast<std::int64_t>(seconds * b.time_scale * 1e6);
  std::int64_t from = 0;
  for (const double f : fractions) {
    t.levels.push_back({f, from, from + length});
    std::exponential_distribution<double> gap{f * b.capacity() / 1e6};
    for (double at = static_cast<double>(from) + gap(random);
         at < static_cast<double>(from + length); at += gap(random)) {
      t.arrivals.push_back(static_cast<std::int64_t>(at));
    }
    const auto burst = static_cast<int>(0.01 * b.time_scale * b.capacity());
    for (int i = 0; i < burst; ++i) {
      t.arrivals.push_back(from + length / 2);
    }
    from += length;
  }
  std::sort(t.arrivals.begin(), t.arrivals.end());
  return t;
}

/// Level `i` of `ramp` alone: a (scaled) second of warm-up at its rate, then the same arrivals.
trace make_level(const backend_case& b, const trace& ramp, std::size_t i, std::uint64_t seed) {
  const level& l = ramp.levels[i];
  trace t = make_ramp(b, {l.fraction}, 1.0, seed); // the warm-up, not counted
  t.levels.front().to_us = t.levels.front().from_us;
  const std::int64_t shift = static_cast<std::int64_t>(b.time_scale * 1e6) - l.from_us;
  for (const std::int64_t at : ramp.arrivals) {
    if (at >= l.from_us && at < l.to_us) {
      t.arrivals.push_back(at + shift);
    }
  }
  t.levels.push_back({l.fraction, l.from_us + shift, l.to_us + shift});
  return t;
}

/// What a configuration achieved in each level of a trace.
struct outcome {
  std::vector<double> goodput; ///< requests/s within the objective, by level
  std::vector<double> p99_ms;  ///< of the requests served, by level (refused ones excluded)
  std::vector<double> mean_batch;
  double total_goodput = 0; ///< over every level
  std::uint64_t answered = 0;
  std::uint64_t arrived = 0;
};

/// The settings every configuration shares for backend `b`; `delay_us` is before the time scale.
servekit::scheduler_settings settings(const backend_case& b, std::uint64_t delay_us,
                                      std::int32_t preferred, bool admission) {
  const double target_ms = b.target_ms;
  servekit::scheduler_settings s;
  s.model_name = "bench_adaptive";
  s.max_batch_size = max_batch;
  s.dynamic_batching.max_queue_delay_microseconds =
      static_cast<std::uint64_t>(static_cast<double>(delay_us) * b.time_scale);
  if (preferred != 0) {
    s.dynamic_batching.preferred_batch_size = {preferred};
  }
  s.dynamic_batching.priority.default_queue_policy.default_timeout_microseconds =
      static_cast<std::uint64_t>(target_ms * 1000.0);
  s.dynamic_batching.adaptive.target_latency_microseconds =
      static_cast<std::uint64_t>(target_ms * 1000.0);
  s.dynamic_batching.adaptive.deadline_admission = admission;
  s.dynamic_batching.adaptive.rate_window_microseconds = static_cast<std::uint64_t>(
      static_cast<double>(s.dynamic_batching.adaptive.rate_window_microseconds) * b.time_scale);
  return s;
}

template <class Policy>
outcome run(const servekit::scheduler_settings& s, const backend_case& b, const trace& t) {
  servekit::simulated_shell<Policy> sim{s, instances, b.latency()};
  std::vector<std::int64_t> latency_us(t.arrivals.size(), -1); // -1: failed
  std::uint64_t answered = 0;
  for (std::size_t i = 0; i < t.arrivals.size(); ++i) {
    servekit::request r;
    r.id = std::to_string(i);
    const std::int64_t arrival = t.arrivals[i];
    sim.submit_at(time_point{} + std::chrono::microseconds(arrival), std::move(r),
                  [&, i, arrival](servekit::response&& answer) {
                    ++answered;
                    if (answer.status.ok()) {
                      latency_us[i] = std::chrono::duration_cast<std::chrono::microseconds>(
                                          sim.now() - time_point{})
                                          .count() -
                                      arrival;
                    }
                  });
  }
  sim.run();

  outcome o;
  o.answered = answered;
  o.arrived = t.arrivals.size();
  const auto target_us = static_cast<std::int64_t>(b.target_ms * 1000.0);
  double within_all = 0;
  double seconds_all = 0;
  for (const level& l : t.levels) {
    if (l.to_us <= l.from_us) {
      continue;
    }
    std::vector<std::int64_t> served;
    double within = 0;
    for (std::size_t i = 0; i < t.arrivals.size(); ++i) {
      if (t.arrivals[i] < l.from_us || t.arrivals[i] >= l.to_us || latency_us[i] < 0) {
        continue;
      }
      served.push_back(latency_us[i]);
      within += latency_us[i] <= target_us ? 1 : 0;
    }
    std::sort(served.begin(), served.end());
    const double seconds = static_cast<double>(l.to_us - l.from_us) / 1e6;
    o.goodput.push_back(within / seconds);
    o.p99_ms.push_back(
        served.empty() ? 0.0
                       : static_cast<double>(served[std::min(
                             served.size() - 1, static_cast<std::size_t>(
                                                    0.99 * static_cast<double>(served.size())))]) /
                             1000.0);
    double elements = 0;
    double batches = 0;
    for (const auto& batch : sim.batches()) {
      const auto start =
          std::chrono::duration_cast<std::chrono::microseconds>(batch.start - time_point{}).count();
      if (start >= l.from_us && start < l.to_us) {
        elements += static_cast<double>(batch.elements);
        batches += 1;
      }
    }
    o.mean_batch.push_back(batches == 0 ? 0 : elements / batches);
    within_all += within;
    seconds_all += seconds;
  }
  o.total_goodput = seconds_all == 0 ? 0 : within_all / seconds_all;
  return o;
}

struct static_setting {
  std::uint64_t delay_us;
  std::int32_t preferred; ///< 0: none ([max_batch_size])
};

std::string describe(const static_setting& s, const backend_case& b) {
  const double us = static_cast<double>(s.delay_us) * b.time_scale;
  const std::string delay =
      us == std::floor(us) ? fmt::format("{:.0f}", us) : fmt::format("{:.3g}", us);
  return s.preferred == 0 ? fmt::format("delay {} us", delay)
                          : fmt::format("delay {} us, preferred {}", delay, s.preferred);
}

nlohmann::json to_json(const outcome& o) {
  return {{"goodput", o.goodput},
          {"p99_ms", o.p99_ms},
          {"mean_batch", o.mean_batch},
          {"total_goodput", o.total_goodput}};
}

// -- the threaded confirmation --------------------------------------------------------------------

/// Sleeps 5 ms + 0.5 ms per request of the batch (the first backend of the simulation) and answers
/// without outputs.
struct sleeping_backend {
  static constexpr std::int32_t max_batch_size = max_batch;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT0", servekit::data_type::int32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUTPUT0", servekit::data_type::int32, {1}}};

  explicit sleeping_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    std::this_thread::sleep_for(std::chrono::microseconds(5000 + 500 * b.size()));
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("INPUT0");
      b.response(i).add_output("OUTPUT0", servekit::data_type::int32, in.shape);
    }
  }
};

struct threaded_outcome {
  double p99_ms = 0;
  double within = 0; ///< share of the requests sent answered ok within the objective
  double goodput = 0;
};

/// `rate` requests/s at Poisson gaps for `seconds` into a model of `Policy` on 2 instances;
/// waits for every answer.
template <class Policy>
threaded_outcome threaded_run(const servekit::scheduler_settings& s, double rate, double seconds,
                              double target_ms, std::uint64_t& wrong) {
  servekit::model_options o;
  o.name = "sleeping";
  o.dynamic_batching = s.dynamic_batching;
  servekit::model<sleeping_backend, Policy, servekit::instance_group<2>> m{o};
  const auto n = static_cast<std::size_t>(rate * seconds);
  std::vector<std::int64_t> latency_us(n, -1);
  std::atomic<std::size_t> answered{0};
  std::mt19937_64 random{11};
  std::exponential_distribution<double> gap{rate};
  using steady = std::chrono::steady_clock;
  const auto start = steady::now();
  double at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    at += gap(random);
    std::this_thread::sleep_until(start + std::chrono::duration<double>(at));
    servekit::request r;
    r.id = std::to_string(i);
    r.inputs.push_back(
        servekit::make_tensor("INPUT0", servekit::data_type::int32, servekit::shape{1, 1}));
    const auto sent = steady::now();
    const servekit::status st = m.submit(std::move(r), [&, i, sent](servekit::response&& a) {
      if (a.ok()) {
        latency_us[i] =
            std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - sent).count();
      }
      answered.fetch_add(1, std::memory_order_release);
    });
    if (!st.ok()) {
      answered.fetch_add(1, std::memory_order_release);
    }
  }
  while (answered.load(std::memory_order_acquire) != n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  threaded_outcome out;
  std::vector<std::int64_t> served;
  for (const auto l : latency_us) {
    if (l >= 0) {
      served.push_back(l);
    }
  }
  wrong += served.empty() ? 1U : 0U;
  std::sort(served.begin(), served.end());
  const auto target_us = static_cast<std::int64_t>(target_ms * 1000);
  const auto within = static_cast<double>(
      std::count_if(served.begin(), served.end(), [&](std::int64_t l) { return l <= target_us; }));
  out.p99_ms = served.empty()
                   ? 0
                   : static_cast<double>(served[std::min(
                         served.size() - 1,
                         static_cast<std::size_t>(0.99 * static_cast<double>(served.size())))]) /
                         1000.0;
  out.within = n == 0 ? 0 : within / static_cast<double>(n);
  out.goodput = within / seconds;
  return out;
}

} // namespace

int main(int argc, char** argv) {
  bool json = false;
  bool quick = false;
  double seconds = 4;
  double target_ms = 50;
  double threaded_seconds = 3;
  // Measured by bench_libtorch (batch_fixed_us, batch_per_element_us) on the bundled
  // image_classifier, one intra-op thread, 2-core AMD EPYC VM, 2026-11-28.
  double libtorch_fixed_us = 24.1;
  double libtorch_per_element_us = 1.26;
  servekit_bench::command_line cl{"bench_adaptive"};
  cl.json(json)
      .quick(quick, "1 s levels, one backend, a smaller sweep (the smoke test, a few seconds)")
      .number("--seconds", seconds, 0.2, 60, "virtual seconds of each load level (4)")
      .number("--target-ms", target_ms, 1, 10000, "the p99 objective in ms (50)")
      .number("--threaded-seconds", threaded_seconds, 0.2, 60,
              "real seconds of each level of the threaded confirmation (3)")
      .number("--libtorch-fixed-us", libtorch_fixed_us, 0.01, 1e6,
              "the libtorch backend's a: bench_libtorch's batch_fixed_us (24.1)")
      .number("--libtorch-per-element-us", libtorch_per_element_us, 0, 1e6,
              "the libtorch backend's c: bench_libtorch's batch_per_element_us (1.26)")
      .when_quick("--seconds", seconds, 1.0)
      .when_quick("--threaded-seconds", threaded_seconds, 0.5);
  cl.parse(argc, argv);

  const servekit_bench::machine host;
  std::printf("bench_adaptive  cpu: %s  nproc: %u  load: %.2f%s\n", host.cpu.c_str(), host.nproc,
              host.load, quick ? "  (quick)" : "");

  std::vector<backend_case> cases{
      {"a5_c0.5", 5.0, 0.5}, {"a10_c0.2", 10.0, 0.2}, {"a2_c1", 2.0, 1.0}};
  // The image classifier through LibTorch (issue 18's model), about 300 times faster than the
  // others: its objective is the same multiple of its full batch's latency as the first
  // backend's, and its ramp runs on that time scale (the others on 1, against --target-ms).
  cases.push_back({"libtorch", libtorch_fixed_us / 1000, libtorch_per_element_us / 1000});
  cases.back().time_scale = cases.back().full_batch_ms() / cases.front().full_batch_ms();
  if (quick) {
    cases.resize(1);
  }
  for (backend_case& b : cases) {
    b.target_ms = target_ms * b.time_scale;
  }
  const std::vector<double> ramp{0.05, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.0, 0.8, 0.6, 0.4, 0.2, 0.05};
  std::vector<static_setting> sweep;
  const std::vector<std::uint64_t> delays =
      quick ? std::vector<std::uint64_t>{0, 5000, 20000}
            : std::vector<std::uint64_t>{0, 1000, 2000, 5000, 10000, 20000};
  const std::vector<std::int32_t> preferred =
      quick ? std::vector<std::int32_t>{0, 16} : std::vector<std::int32_t>{0, 4, 8, 16, 32};
  for (const auto d : delays) {
    for (const auto p : preferred) {
      sweep.push_back({d, p});
    }
  }

  using static_policy = servekit::dynamic_batcher<>;
  using ours = servekit::dynamic_batcher<servekit::adaptive<servekit::latency_target>>;
  using tf = servekit::dynamic_batcher<servekit::adaptive<servekit::in_flight_hill_climb>>;
  using aimd = servekit::dynamic_batcher<servekit::adaptive<servekit::clipper_aimd>>;

  servekit_bench::report figures;
  nlohmann::json detail = nlohmann::json::object();
  std::uint64_t wrong = 0;
  double worst_ratio_to_oracle = std::numeric_limits<double>::infinity();
  double ratio_to_best_static = std::numeric_limits<double>::infinity();
  double admission_gain = std::numeric_limits<double>::infinity();
  double worst_without = std::numeric_limits<double>::infinity();
  double static_without = std::numeric_limits<double>::infinity();
  double oracle_over_static = 0;
  double ideal_over_static = 0;

  for (const backend_case& b : cases) {
    std::printf("\nbackend %s: %.4g ms + %.4g ms/element, %zu instances, max batch %d: capacity "
                "%.0f/s; objective p99 <= %.4g ms; time scale %.4g\n",
                b.name.c_str(), b.fixed_ms, b.per_element_ms, instances, max_batch, b.capacity(),
                b.target_ms, b.time_scale);
    const trace t = make_ramp(b, ramp, seconds, 7);

    // The oracle: per level, the best static setting on that level alone.
    std::vector<double> oracle;
    std::vector<std::string> oracle_setting;
    for (std::size_t i = 0; i < ramp.size(); ++i) {
      const trace alone = make_level(b, t, i, 100 + i);
      double best = -1;
      std::string name;
      for (const auto& s : sweep) {
        const outcome o = run<static_policy>(settings(b, s.delay_us, s.preferred, false), b, alone);
        wrong += o.answered == o.arrived ? 0 : 1;
        if (o.total_goodput > best) {
          best = o.total_goodput;
          name = describe(s, b);
        }
      }
      oracle.push_back(best);
      oracle_setting.push_back(name);
    }

    // The best single static setting over the ramp.
    outcome best_static;
    std::string best_static_name;
    for (const auto& s : sweep) {
      outcome o = run<static_policy>(settings(b, s.delay_us, s.preferred, false), b, t);
      wrong += o.answered == o.arrived ? 0 : 1;
      if (best_static_name.empty() || o.total_goodput > best_static.total_goodput) {
        best_static = std::move(o);
        best_static_name = describe(s, b);
      }
    }
    const outcome mine = run<ours>(settings(b, 0, 0, false), b, t);
    const outcome admitted = run<ours>(settings(b, 0, 0, true), b, t);
    const outcome hill = run<tf>(settings(b, 0, 0, false), b, t);
    const outcome clipper = run<aimd>(settings(b, 0, 0, false), b, t);
    for (const outcome* o : {&mine, &admitted, &hill, &clipper}) {
      wrong += o->answered == o->arrived ? 0 : 1;
    }

    std::printf("%6s %8s | %-28s | %8s %8s %8s %8s %8s %8s | %6s %6s %5s\n", "load", "rate/s",
                "oracle's setting", "oracle", "static", "tf", "aimd", "ours", "admit", "ours/o",
                "p99 ms", "batch");
    double worst_here = std::numeric_limits<double>::infinity();
    double worst_alone = std::numeric_limits<double>::infinity();
    std::size_t overload = 0;
    for (std::size_t i = 0; i < ramp.size(); ++i) {
      const double ratio = servekit_bench::ratio_of(mine.goodput[i], oracle[i]);
      if (ramp[i] <= 1.0) {
        worst_here = std::min(worst_here, servekit_bench::ratio_of(admitted.goodput[i], oracle[i]));
        worst_alone = std::min(worst_alone, ratio);
      } else {
        overload = i;
      }
      std::printf(
          "%5.0f%% %8.0f | %-28s | %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f | %6.3f %6.1f %5.1f\n",
          ramp[i] * 100, ramp[i] * b.capacity(), oracle_setting[i].c_str(), oracle[i],
          best_static.goodput[i], hill.goodput[i], clipper.goodput[i], mine.goodput[i],
          admitted.goodput[i], ratio, mine.p99_ms[i], mine.mean_batch[i]);
    }
    const double vs_static =
        servekit_bench::ratio_of(admitted.total_goodput, best_static.total_goodput);
    const double vs_static_alone =
        servekit_bench::ratio_of(mine.total_goodput, best_static.total_goodput);
    // The ceiling of any static tuning: the per-level oracle over the whole ramp (the levels are
    // equally long) against the best single setting. Only admission can exceed it.
    double oracle_total = 0;
    for (const double g : oracle) {
      oracle_total += g;
    }
    oracle_total /= static_cast<double>(oracle.size());
    const double ceiling = servekit_bench::ratio_of(oracle_total, best_static.total_goodput);
    // The most any policy could do: every request answered within the objective, up to the
    // capacity in each level (about: a level's last requests may be served in the next one).
    double ideal_total = 0;
    for (const level& l : t.levels) {
      const auto from = std::lower_bound(t.arrivals.begin(), t.arrivals.end(), l.from_us);
      const auto to = std::lower_bound(t.arrivals.begin(), t.arrivals.end(), l.to_us);
      const double level_s = static_cast<double>(l.to_us - l.from_us) / 1e6;
      ideal_total += std::min(static_cast<double>(to - from) / level_s, b.capacity());
    }
    ideal_total /= static_cast<double>(t.levels.size());
    const double ideal = servekit_bench::ratio_of(ideal_total, best_static.total_goodput);
    // The overload and the level after it, where the backlog it left is worked off.
    const double gain =
        servekit_bench::ratio_of(admitted.goodput[overload] + admitted.goodput[overload + 1],
                                 mine.goodput[overload] + mine.goodput[overload + 1]);
    std::printf("whole ramp goodput: best static (%s) %.0f/s, tf %.0f/s, aimd %.0f/s, ours %.0f/s "
                "(%.3f x static), ours with admission %.0f/s (%.3f x static); 120 %% and after: "
                "admission / ours %.3f; worst ratio to the oracle up to capacity: %.3f with "
                "admission, %.3f without; the per-level oracle over the ramp: %.3f x static; every "
                "request within the objective up to capacity (the ideal): %.0f/s, %.3f x static\n",
                best_static_name.c_str(), best_static.total_goodput, hill.total_goodput,
                clipper.total_goodput, mine.total_goodput, vs_static_alone, admitted.total_goodput,
                vs_static, gain, worst_here, worst_alone, ceiling, ideal_total, ideal);

    worst_ratio_to_oracle = std::min(worst_ratio_to_oracle, worst_here);
    worst_without = std::min(worst_without, worst_alone);
    ratio_to_best_static = std::min(ratio_to_best_static, vs_static);
    static_without = std::min(static_without, vs_static_alone);
    admission_gain = std::min(admission_gain, gain);
    oracle_over_static = std::max(oracle_over_static, ceiling);
    figures.put(fmt::format("{}_oracle_ratio_to_best_static", b.name), ceiling);
    figures.put(fmt::format("{}_ideal_ratio_to_best_static", b.name), ideal);
    figures.put(fmt::format("{}_ratio_to_ideal", b.name),
                servekit_bench::ratio_of(admitted.total_goodput, ideal_total));
    ideal_over_static = std::max(ideal_over_static, ideal);
    figures.put(fmt::format("{}_ratio_to_oracle", b.name), worst_here);
    figures.put(fmt::format("{}_ratio_to_oracle_without_admission", b.name), worst_alone);
    figures.put(fmt::format("{}_ratio_to_best_static", b.name), vs_static);
    figures.put(fmt::format("{}_ratio_to_best_static_without_admission", b.name), vs_static_alone);
    figures.put(fmt::format("{}_overload_admission_gain", b.name), gain);
    detail[b.name] = {{"fixed_ms", b.fixed_ms},
                      {"target_ms", b.target_ms},
                      {"time_scale", b.time_scale},
                      {"per_element_ms", b.per_element_ms},
                      {"capacity", b.capacity()},
                      {"levels", ramp},
                      {"oracle", oracle},
                      {"oracle_setting", oracle_setting},
                      {"best_static_setting", best_static_name},
                      {"best_static", to_json(best_static)},
                      {"tf_serving", to_json(hill)},
                      {"clipper_aimd", to_json(clipper)},
                      {"servekit", to_json(mine)},
                      {"admission", to_json(admitted)}};
  }

  // The threaded confirmation: the first backend as a sleeping one, three load levels.
  {
    const backend_case& b = cases.front();
    std::printf("\nthreaded, this machine: a backend that sleeps %.1f ms + %.2f ms/element, %zu "
                "instances, %.0f s per level\n",
                b.fixed_ms, b.per_element_ms, instances, threaded_seconds);
    std::printf("%6s %8s | %-24s | %8s %8s %8s\n", "load", "rate/s", "configuration", "p99 ms",
                "within", "goodput");
    using static_policy_t = servekit::dynamic_batcher<>;
    using ours_t = servekit::dynamic_batcher<servekit::adaptive<servekit::latency_target>>;
    for (const double f : {0.3, 0.7, 0.95}) {
      const double rate = f * b.capacity();
      const auto report = [&](const char* name, const threaded_outcome& o) {
        std::printf("%5.0f%% %8.0f | %-24s | %8.1f %8.3f %8.0f\n", f * 100, rate, name, o.p99_ms,
                    o.within, o.goodput);
        figures.put(fmt::format("threaded_{}_{:.0f}_p99_ms", name, f * 100), o.p99_ms);
        figures.put(fmt::format("threaded_{}_{:.0f}_within", name, f * 100), o.within);
      };
      report("static_delay_0", threaded_run<static_policy_t>(settings(b, 0, 0, false), rate,
                                                             threaded_seconds, target_ms, wrong));
      report("static_delay_5ms_pref_16",
             threaded_run<static_policy_t>(settings(b, 5000, 16, false), rate, threaded_seconds,
                                           target_ms, wrong));
      report("latency_target", threaded_run<ours_t>(settings(b, 0, 0, false), rate,
                                                    threaded_seconds, target_ms, wrong));
    }
  }

  figures.put("worst_ratio_to_oracle", worst_ratio_to_oracle);
  figures.put("ratio_to_best_static", ratio_to_best_static);
  figures.put("overload_admission_gain", admission_gain);
  figures.put("worst_ratio_to_oracle_without_admission", worst_without);
  figures.put("ratio_to_best_static_without_admission", static_without);
  figures.put("oracle_ratio_to_best_static_max", oracle_over_static);
  figures.put("ideal_ratio_to_best_static_max", ideal_over_static);
  std::printf("\n");
  servekit_bench::goals goals;
  goals.check("ours (with admission) within 5 % of the per-load oracle's goodput at every load "
              "up to capacity",
              figures.at_least("worst_ratio_to_oracle", 0.95));
  // Unreachable on this ramp whenever ideal_ratio_to_best_static_max is below 1.5: no policy
  // answers more than every request within the objective (docs/adaptive-batching.md).
  goals.check("ours (with admission) >= 1.5 x the goodput of the best single static setting "
              "over the ramp",
              figures.at_least("ratio_to_best_static", 1.5));
  goals.check("deadline-aware admission raises goodput at 120 % of capacity",
              figures.at_least("overload_admission_gain", 1.0001));
  if (json) {
    figures.put_run(quick, host, wrong);
    figures.number("target_ms", target_ms);
    figures.number("level_seconds", seconds);
    figures.raw("backends", detail.dump());
    figures.print_json();
  }
  return wrong == 0 ? 0 : 1;
}
