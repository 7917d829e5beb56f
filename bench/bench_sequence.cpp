// bench/bench_sequence.cpp: the sequence batcher through servekit::model, with the direct and
// oldest strategies, against the dynamic batcher under the same load (the price of the sequence
// rules), and the direct strategy's capacity in virtual time (simulated shell).
//
//     bench_sequence [--json] [--quick] [--reps N] [--only direct,oldest,dynamic,sim]
//
// --reps N     repetitions of each threaded load (default 200, about 1.5 ms each; the median is
//              reported)
// --quick      20 repetitions (CI smoke)
// --only LIST  run only these sections (for profiling one of them)
// --json       print every figure as one JSON object on the last line
//
// The load: 64 live sequences of 100 steps each on 2 instances x max_batch_size 8 (16 slots), a
// null backend. Each sequence is a closed loop: step k+1 is submitted from step k's response
// callback, as soon as the client may; the 64 STARTs are submitted up front (48 wait in the
// backlog). See docs/benchmarks.md for what each figure means and for our results.
#include "harness/command_line.hpp"
#include "harness/machine.hpp"
#include "harness/measure.hpp"
#include "harness/model.hpp"
#include "harness/report.hpp"

#include <servekit/servekit.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <semaphore>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using servekit_bench::bench_clock;

constexpr std::int32_t max_batch = 8;
constexpr std::size_t instance_count = 2;
constexpr std::size_t sequence_count = 64;
constexpr std::uint32_t steps_per_sequence = 100;
constexpr std::uint64_t total_steps = sequence_count * steps_per_sequence;

// -- the backend and the models -----------------------------------------------------------------

/// Does nothing: every response stays ok and empty. What is left to measure is the scheduler.
struct null_backend {
  static constexpr std::int32_t max_batch_size = max_batch;
  explicit null_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

template <class Strategy>
using sequence_model =
    servekit::model<null_backend, servekit::sequence_batcher<Strategy, servekit::host_state_store>,
                    servekit::instance_group<instance_count>>;
using dynamic_model = servekit::model<null_backend, servekit::dynamic_batcher<>,
                                      servekit::instance_group<instance_count>>;

template <class Strategy>
servekit::model_options sequence_options(std::string name) {
  servekit::model_options options;
  options.name = std::move(name);
  options.max_batch_size = max_batch;
  servekit::sequence_batching_options sequencing;
  sequencing.strategy = Strategy::strategy; // no controls, no state
  options.sequence_batching = sequencing;
  return options;
}

// -- closed-loop clients on real threads --------------------------------------------------------

/// One repetition's shared counters. The response callback that answers the last step records
/// the time and releases `done`.
struct run_state {
  std::atomic<std::uint64_t> answered{0};
  std::atomic<std::uint64_t> wrong{0}; ///< failed responses and refused submits
  std::atomic<std::int64_t> last_ns{0};
  std::binary_semaphore done{0};

  /// Counts `n` steps as answered (or given up); the last one ends the repetition.
  void count(std::uint64_t n) {
    if (answered.fetch_add(n, std::memory_order_acq_rel) + n == total_steps) {
      last_ns.store(bench_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
      done.release();
    }
  }
};

/// One client: a sequence (`id` != 0) or, for the dynamic baseline, an independent loop.
struct client {
  run_state* run = nullptr;
  std::uint64_t id = 0;
  std::uint32_t next_step = 0;
};

/// Submits `c`'s next step; its response callback submits the one after.
template <class Model>
void submit_step(Model& m, client& c) {
  servekit::request r;
  const std::uint32_t step = c.next_step++;
  if (c.id != 0) {
    r.sequence_id = c.id;
    r.sequence_start = step == 0;
    r.sequence_end = step + 1 == steps_per_sequence;
  }
  const servekit::status s = m.submit(std::move(r), [&m, &c](servekit::response&& out) {
    if (!out.ok()) {
      c.run->wrong.fetch_add(1, std::memory_order_relaxed);
    }
    // Submit first: the last answer of the run must come after every submit.
    const bool more = c.next_step < steps_per_sequence;
    if (more) {
      submit_step(m, c);
    }
    c.run->count(1);
  });
  if (!s.ok()) {
    // Refused: this step and the rest of the sequence are given up (and counted wrong).
    const std::uint64_t left = steps_per_sequence - step;
    c.run->wrong.fetch_add(left, std::memory_order_relaxed);
    c.next_step = steps_per_sequence;
    c.run->count(left);
  }
}

double cpu_seconds() { return servekit_bench::process_usage::now().cpu_s; }

struct load_result {
  std::vector<double> steps_per_s; ///< one per repetition
  double mean_batch = 0;           ///< inference_count / execution_count over the repetitions
  double slot_utilization = 0;     ///< inference_count / (execution_count x max_batch)
  double cpu_us_per_step = 0;      ///< process CPU time (every thread) per step
  std::uint64_t wrong = 0;
};

/// `reps` repetitions of the closed-loop load (plus one warm-up) on one model. Sequences get
/// fresh correlation ids each time; every sequence has ended before the next repetition.
template <class Model>
load_result run_load(Model& m, bool sequences, int reps) {
  load_result out;
  servekit::statistics_snapshot s0;
  double cpu0 = 0;
  // Kept until the end: the callback that answers a repetition's last step may still be
  // returning from done.release() when the main thread wakes.
  std::vector<std::unique_ptr<run_state>> runs;
  std::vector<std::vector<client>> all_clients;
  for (int rep = -1; rep < reps; ++rep) {
    if (rep == 0) {
      s0 = m.statistics();
      cpu0 = cpu_seconds();
    }
    run_state& run = *runs.emplace_back(std::make_unique<run_state>());
    std::vector<client>& clients = all_clients.emplace_back(sequence_count);
    for (std::size_t k = 0; k < clients.size(); ++k) {
      clients[k].run = &run;
      clients[k].id =
          sequences ? static_cast<std::uint64_t>(rep + 2) * 1000U + static_cast<std::uint64_t>(k)
                    : 0U;
    }
    const auto t0 = bench_clock::now();
    for (auto& c : clients) {
      submit_step(m, c);
    }
    run.done.acquire();
    const bench_clock::time_point t1{bench_clock::duration{run.last_ns.load()}};
    out.wrong += run.wrong.load();
    if (rep >= 0) {
      out.steps_per_s.push_back(static_cast<double>(total_steps) /
                                std::chrono::duration<double>(t1 - t0).count());
    }
  }
  const double cpu1 = cpu_seconds();
  const servekit::statistics_snapshot s1 = m.statistics();
  const auto executions = static_cast<double>(s1.execution_count - s0.execution_count);
  const auto inferences = static_cast<double>(s1.inference_count - s0.inference_count);
  out.mean_batch = executions == 0 ? 0.0 : inferences / executions;
  out.slot_utilization = out.mean_batch / max_batch;
  out.cpu_us_per_step = (cpu1 - cpu0) * 1e6 / (static_cast<double>(total_steps) * reps);
  return out;
}

// -- the direct strategy's capacity in virtual time ---------------------------------------------

const servekit::latency_model sim_latency{1000us, 20us};

/// Steps/s the latency model allows with every slot busy: 2 x 8 / latency(8).
double sim_bound_steps_per_s() {
  return static_cast<double>(instance_count) * max_batch /
         std::chrono::duration<double>(sim_latency(max_batch)).count();
}

struct sim_result {
  double steps_per_s = 0;
  double efficiency = 0;
  double slot_utilization = 0;
  double wall_ms = 0; ///< how long the simulation itself took
  std::uint64_t wrong = 0;
};

template <class Strategy>
using sim_shell =
    servekit::simulated_shell<servekit::sequence_batcher<Strategy, servekit::host_state_store>>;

struct sim_client {
  std::uint64_t id = 0;
  std::uint32_t next_step = 0;
  std::uint64_t* answered = nullptr;
};

/// Schedules `c`'s next step now; its response callback schedules the one after, at the
/// completion's (virtual) time.
template <class Shell>
void sim_submit(Shell& shell, sim_client& c) {
  servekit::request r;
  const std::uint32_t step = c.next_step++;
  r.sequence_id = c.id;
  r.sequence_start = step == 0;
  r.sequence_end = step + 1 == steps_per_sequence;
  shell.submit_at(shell.now(), std::move(r), [&shell, &c](servekit::response&& out) {
    *c.answered += out.ok() ? 1U : 0U;
    if (c.next_step < steps_per_sequence) {
      sim_submit(shell, c);
    }
  });
}

template <class Strategy>
sim_result simulate() {
  servekit::scheduler_settings settings;
  settings.model_name = "simulated";
  settings.max_batch_size = max_batch;
  settings.sequence_batching.strategy = Strategy::strategy;
  const auto wall0 = bench_clock::now();
  sim_shell<Strategy> shell{settings, instance_count, sim_latency};
  std::uint64_t answered = 0;
  std::vector<sim_client> clients(sequence_count);
  for (std::size_t k = 0; k < clients.size(); ++k) {
    clients[k] = {static_cast<std::uint64_t>(k) + 1U, 0, &answered};
    sim_submit(shell, clients[k]);
  }
  shell.run();
  const auto wall1 = bench_clock::now();

  sim_result out;
  out.wrong = total_steps - answered;
  const auto& batches = shell.batches();
  if (batches.empty()) {
    return out;
  }
  servekit::time_point last{};
  for (const auto& b : batches) {
    last = std::max(last, b.end);
  }
  const double makespan_s = std::chrono::duration<double>(last - batches.front().start).count();
  out.steps_per_s = static_cast<double>(answered) / makespan_s;
  out.efficiency = out.steps_per_s / sim_bound_steps_per_s();
  const auto st = shell.statistics();
  out.slot_utilization = st.execution_count == 0
                             ? 0.0
                             : static_cast<double>(st.inference_count) /
                                   (static_cast<double>(st.execution_count) * max_batch);
  out.wall_ms = std::chrono::duration<double, std::milli>(wall1 - wall0).count();
  return out;
}

// -- command line and report --------------------------------------------------------------------

struct settings {
  bool json = false;
  bool quick = false;
  int reps = 200;
  servekit_bench::section_filter only;
};

settings parse(int argc, char** argv) {
  settings s;
  servekit_bench::command_line{"bench_sequence"}
      .json(s.json)
      .quick(s.quick, "20 repetitions (CI smoke)")
      .integer("--reps", s.reps, 1, 10000,
               "repetitions of each threaded load (default 200; the median is reported)")
      .when_quick("--reps", s.reps, 20)
      .only(s.only, "direct, oldest, dynamic, sim")
      .parse(argc, argv);
  return s;
}

} // namespace

int main(int argc, char** argv) {
  const settings cfg = parse(argc, argv);
  const servekit_bench::machine host;
  fmt::print("bench_sequence: {} CPUs, load average {:.2f}, {} repetitions of {} sequences x {} "
             "steps on {} instances x {} slots{}\n",
             host.nproc, host.load, cfg.reps, sequence_count, steps_per_sequence, instance_count,
             max_batch, cfg.quick ? ", quick" : "");

  servekit_bench::report figures;
  std::uint64_t wrong = 0;
  const auto record = [&](const std::string& prefix, std::string_view label, const load_result& r) {
    wrong += r.wrong;
    const double mid = servekit_bench::median(r.steps_per_s);
    const auto [lo, hi] = std::minmax_element(r.steps_per_s.begin(), r.steps_per_s.end());
    figures.put(prefix + "steps_per_s", mid);
    figures.put(prefix + "steps_per_s_min", *lo);
    figures.put(prefix + "steps_per_s_max", *hi);
    figures.put(prefix + "mean_batch", r.mean_batch);
    figures.put(prefix + "cpu_us_per_step", r.cpu_us_per_step);
    fmt::print("{}: {:.0f} steps/s (median; {:.0f} to {:.0f}), mean batch {:.2f}, {:.2f} CPU "
               "us/step\n",
               label, mid, *lo, *hi, r.mean_batch, r.cpu_us_per_step);
  };

  if (cfg.only.runs("direct")) {
    sequence_model<servekit::direct> m{sequence_options<servekit::direct>("sequence_direct")};
    const load_result r = run_load(m, true, cfg.reps);
    record("direct_", "sequence batcher, direct", r);
    figures.put("slot_utilization", r.slot_utilization);
    fmt::print("  slot utilization (inference_count / (execution_count x {})): {:.4f}\n", max_batch,
               r.slot_utilization);
  }
  if (cfg.only.runs("oldest")) {
    sequence_model<servekit::oldest> m{sequence_options<servekit::oldest>("sequence_oldest")};
    record("oldest_", "sequence batcher, oldest", run_load(m, true, cfg.reps));
  }
  if (cfg.only.runs("dynamic")) {
    dynamic_model m{servekit_bench::batching_options("dynamic_baseline", max_batch)};
    record("dynamic_baseline_", "dynamic batcher, 64 independent loops (baseline)",
           run_load(m, false, cfg.reps));
  }
  for (const std::string strategy : {"direct", "oldest"}) {
    if (const auto ratio = figures.ratio(strategy + "_vs_dynamic", strategy + "_steps_per_s",
                                         "dynamic_baseline_steps_per_s")) {
      fmt::print("{} / dynamic baseline: {:.3f}\n", strategy, *ratio);
    }
  }

  if (cfg.only.runs("sim")) {
    const sim_result direct_sim = simulate<servekit::direct>();
    const sim_result oldest_sim = simulate<servekit::oldest>();
    wrong += direct_sim.wrong + oldest_sim.wrong;
    figures.put("sim_direct_efficiency", direct_sim.efficiency);
    figures.put("sim_direct_steps_per_s", direct_sim.steps_per_s);
    figures.put("sim_direct_slot_utilization", direct_sim.slot_utilization);
    figures.put("sim_oldest_efficiency", oldest_sim.efficiency);
    figures.put("sim_bound_steps_per_s", sim_bound_steps_per_s());
    figures.put("sim_wall_ms", direct_sim.wall_ms + oldest_sim.wall_ms);
    fmt::print("simulated 1000+20*b us: direct {:.0f} steps/s of {:.0f}, efficiency {:.4f} (slot "
               "utilization {:.4f}); oldest efficiency {:.4f}\n",
               direct_sim.steps_per_s, sim_bound_steps_per_s(), direct_sim.efficiency,
               direct_sim.slot_utilization, oldest_sim.efficiency);
  }

  // Goals: one {"min", "met"} each in the JSON; missing one does not fail the run.
  struct goal {
    const char* field;
    double min;
  };
  constexpr goal goal_list[] = {
      {"sim_direct_efficiency", 0.99},
      {"slot_utilization", 0.9},
      {"direct_steps_per_s", 300000.0},
  };
  servekit_bench::goals goals;
  servekit_bench::json_object goals_json;
  for (const auto& g : goal_list) {
    if (!figures.has(g.field)) {
      continue; // its section was left out
    }
    const double value = figures.get(g.field);
    const bool met =
        *goals.check(fmt::format("{} >= {:g} ({:.6g})", g.field, g.min, value), value >= g.min);
    goals_json.object(
        g.field, servekit_bench::json_object{}.number("min", g.min, "{:g}").boolean("met", met));
  }
  fmt::print("{} goal(s) missed; {} wrong or refused answers\n", goals.missed(), wrong);

  if (cfg.json) {
    figures.object("goals", goals_json);
    figures.integer("goals_missed", goals.missed());
    figures.integer("reps", cfg.reps);
    figures.put_run(cfg.quick, host, wrong);
    figures.print_json();
  }
  return wrong == 0 ? 0 : 1;
}
