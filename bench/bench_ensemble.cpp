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
#include "harness/command_line.hpp"
#include "harness/machine.hpp"
#include "harness/measure.hpp"
#include "harness/model.hpp"
#include "harness/report.hpp"

#include <servekit/servekit.hpp>

#include <fmt/format.h>

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
using servekit::in;
using servekit::out;
using servekit::step;
using servekit_bench::answers;
using servekit_bench::call;
using servekit_bench::one_response;
using servekit_bench::seed_of;

constexpr std::size_t elements_per_request = 4;
constexpr std::int32_t batched_max_batch = 8;
constexpr auto branch_latency = 1000us;
constexpr auto batch_latency = 200us;

// -- the backends -----------------------------------------------------------------------------

constexpr servekit::tensor_declaration tiny_input[] = {
    {"INPUT0", servekit::data_type::fp32, {static_cast<std::int64_t>(elements_per_request)}},
};
constexpr servekit::tensor_declaration tiny_output[] = {
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

/// Does nothing but copy its tiny input to its output.
struct null_backend {
  static constexpr std::int32_t max_batch_size = batched_max_batch;
  static constexpr std::span<const servekit::tensor_declaration> inputs{tiny_input};
  static constexpr std::span<const servekit::tensor_declaration> outputs{tiny_output};

  explicit null_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) { copy_through(b); }
};

/// Sleeps `Latency` per execution (whatever the batch size), then copies its input.
template <std::int64_t LatencyUs>
struct sleeping_backend {
  static constexpr std::int32_t max_batch_size = batched_max_batch;
  static constexpr std::span<const servekit::tensor_declaration> inputs{tiny_input};
  static constexpr std::span<const servekit::tensor_declaration> outputs{tiny_output};

  explicit sleeping_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    servekit_bench::precise_sleeps();
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
  return servekit_bench::batching_options(std::move(name), batched_max_batch);
}

// -- requests and waiting for one response ------------------------------------------------------

/// One FP32 [1, 4] tensor named `name`, filled with seed, seed + 1, ...
servekit::request make_request(const char* name, float seed) {
  return servekit_bench::seeded_request<elements_per_request>(name, seed);
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
  std::uint64_t seed = 0;
  const auto run_block = [&](std::size_t which, int count, bool record) {
    std::size_t k = 0;
    const auto one = [&](auto& way) {
      if (k++ != which) {
        return;
      }
      const servekit_bench::timed_calls calls =
          servekit_bench::time_calls(record ? 0 : count, record ? count : 0,
                                     [&](std::uint64_t) { return way(seed_of(seed++)); });
      out.wrong += calls.wrong;
      out.us[which].insert(out.us[which].end(), calls.us.begin(), calls.us.end());
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
  out.ensemble_p50_us = servekit_bench::median(m.us[0]);
  out.ensemble_p99_us = servekit_bench::percentile(m.us[0], 0.99);
  out.by_hand_p50_us = servekit_bench::median(m.us[1]);
  out.by_hand_p99_us = servekit_bench::percentile(m.us[1], 0.99);
  out.callbacks_p50_us = servekit_bench::median(m.us[2]);
  out.single_p50_us = servekit_bench::median(m.us[3]);
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
  return {servekit_bench::median(m.us[0]), servekit_bench::median(m.us[1]), m.wrong};
}

// -- batched: 64 in flight through a batching step ----------------------------------------------

struct batched_result {
  double mean_batch = 0;
  double rps = 0;
  std::uint64_t wrong = 0;
};

/// One client thread keeps `depth` requests in flight through `e` (the ensemble, or the model
/// itself). Batch sizes are `m`'s, counted over the window.
template <class Target>
batched_result measure_batched(Target& e, const batch_model& m, const char* input,
                               std::string_view output, int depth,
                               std::chrono::duration<double> warmup,
                               std::chrono::duration<double> length) {
  const servekit_bench::closed_loop_result r = servekit_bench::closed_loop(
      1, depth, warmup, length,
      [&](servekit_bench::window& w, std::uint64_t n) {
        const float seed = seed_of(n);
        return e.submit(make_request(input, seed),
                        [slots = &w, output, seed](servekit::response&& a) {
                          slots->answered(answers(a, output, seed));
                        });
      },
      servekit_bench::statistics_counters(m));
  return {r.mean_batch, r.rps, r.wrong + r.rejected};
}

// -- command line and report --------------------------------------------------------------------

struct settings {
  bool json = false;
  bool quick = false;
  servekit_bench::section_filter only;
};

settings parse(int argc, char** argv) {
  settings s;
  servekit_bench::command_line{"bench_ensemble"}
      .json(s.json)
      .quick(s.quick, "fewer samples and a shorter window (CI smoke)")
      .only(s.only, "pingpong, overhead, parallel, batched")
      .parse(argc, argv);
  return s;
}

} // namespace

int main(int argc, char** argv) {
  const settings cfg = parse(argc, argv);
  const int pingpong_rounds = cfg.quick ? 2000 : 20000;
  const int overhead_samples = cfg.quick ? 2000 : 20000;
  const int parallel_samples = cfg.quick ? 200 : 1500;
  const std::chrono::duration<double> batched_warmup{cfg.quick ? 0.3 : 0.5};
  const std::chrono::duration<double> batched_length{cfg.quick ? 1.0 : 5.0};

  servekit_bench::report figures;
  std::uint64_t wrong = 0;

  const servekit_bench::machine host;
  fmt::print("bench_ensemble: {} CPUs ({}), load average {:.2f}{}\n", host.nproc, host.cpu,
             host.load, cfg.quick ? ", quick" : "");

  if (cfg.only.runs("pingpong")) {
    servekit_bench::put_pingpong(figures, pingpong_rounds, servekit_bench::allowed_cpus().front());
  }

  if (cfg.only.runs("overhead")) {
    const overhead_result r = measure_overhead(overhead_samples);
    wrong += r.wrong;
    figures.put("ensemble_p50_us", r.ensemble_p50_us);
    figures.put("ensemble_p99_us", r.ensemble_p99_us);
    figures.put("by_hand_p50_us", r.by_hand_p50_us);
    figures.put("by_hand_p99_us", r.by_hand_p99_us);
    figures.put("callback_chain_p50_us", r.callbacks_p50_us);
    figures.put("single_model_p50_us", r.single_p50_us);
    figures.put("step_overhead_us", (r.ensemble_p50_us - r.by_hand_p50_us) / chain_steps);
    figures.put("step_overhead_vs_callbacks_us",
                (r.ensemble_p50_us - r.callbacks_p50_us) / chain_steps);
    fmt::print("4-step chain of null models, 1 in flight: ensemble p50 {:.1f} us (p99 {:.1f}), "
               "by hand p50 {:.1f} us (p99 {:.1f}), by hand through response callbacks p50 "
               "{:.1f} us; one model alone p50 {:.1f} us\n"
               "  step overhead (ensemble - by hand) / 4: {:.2f} us; (ensemble - callbacks) / 4: "
               "{:.2f} us\n",
               r.ensemble_p50_us, r.ensemble_p99_us, r.by_hand_p50_us, r.by_hand_p99_us,
               r.callbacks_p50_us, r.single_p50_us, figures.get("step_overhead_us"),
               figures.get("step_overhead_vs_callbacks_us"));
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

  if (cfg.only.runs("parallel")) {
    const parallel_result r = measure_parallel(parallel_samples);
    wrong += r.wrong;
    figures.put("parallel_sequential_p50_us", r.sequential_p50_us);
    figures.put("parallel_ensemble_p50_us", r.ensemble_p50_us);
    figures.put("parallel_speedup",
                servekit_bench::ratio_of(r.sequential_p50_us, r.ensemble_p50_us));
    fmt::print("two 1 ms branches, 1 in flight: one after the other by hand p50 {:.1f} us, "
               "ensemble p50 {:.1f} us: speedup {:.3f}\n",
               r.sequential_p50_us, r.ensemble_p50_us, figures.get("parallel_speedup"));
  }

  if (cfg.only.runs("batched")) {
    batch_model m{batching_options("batched")};
    batch_ensemble e{{.name = "batched_pipeline"}, m};
    const batched_result r = measure_batched(e, m, "IN", "OUT", 64, batched_warmup, batched_length);
    // The same load on the model itself: what the ensemble costs a batching step.
    const batched_result d =
        measure_batched(m, m, "INPUT0", "OUTPUT0", 64, batched_warmup, batched_length);
    wrong += d.wrong;
    figures.put("batched_model_mean_batch", d.mean_batch);
    figures.put("batched_model_rps", d.rps);
    wrong += r.wrong;
    figures.put("batched_mean_batch", r.mean_batch);
    figures.put("batched_fraction", r.mean_batch / batched_max_batch);
    figures.put("batched_rps", r.rps);
    fmt::print("64 in flight through a one-step ensemble (max batch {}, {} us per batch): mean "
               "batch {:.2f}, batched fraction {:.3f}, {:.0f} requests/s (at most {:.0f})\n",
               batched_max_batch, batch_latency.count(), r.mean_batch,
               r.mean_batch / batched_max_batch, r.rps,
               batched_max_batch / std::chrono::duration<double>(batch_latency).count());
    fmt::print("  the same load on the model itself: mean batch {:.2f}, {:.0f} requests/s\n",
               d.mean_batch, d.rps);
  }

  // Goals: a boolean each in the JSON; missing one does not fail the run.
  if (figures.has("pingpong_us")) {
    figures.put("step_overhead_goal_us", 2.0 * figures.get("pingpong_us"));
  }
  servekit_bench::goals goals;
  const std::optional<bool> overhead_met =
      goals.check("step_overhead_us <= 2 x pingpong_us",
                  figures.has("step_overhead_goal_us")
                      ? figures.at_most("step_overhead_us", figures.get("step_overhead_goal_us"))
                      : std::nullopt);
  const std::optional<bool> parallel_met =
      goals.check("parallel_speedup >= 1.9", figures.at_least("parallel_speedup", 1.9));
  const std::optional<bool> batched_met =
      goals.check("batched_fraction >= 0.8", figures.at_least("batched_fraction", 0.8));
  fmt::print("{} goal(s) missed; {} wrong or refused answers\n", goals.missed(), wrong);

  if (cfg.json) {
    for (const auto& [flag, met] : {std::pair{"step_overhead_ok", overhead_met},
                                    std::pair{"parallel_speedup_ok", parallel_met},
                                    std::pair{"batched_fraction_ok", batched_met}}) {
      if (met) {
        figures.boolean(flag, *met);
      }
    }
    figures.integer("goals_missed", goals.missed());
    figures.string("cpu_model", host.cpu);
    figures.put_run(cfg.quick, host, wrong);
    figures.print_json();
  }
  return wrong == 0 ? 0 : 1;
}
