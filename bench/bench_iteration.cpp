// bench_iteration: servekit's iteration scheduler core
// (servekit/schedule/iteration_scheduler_core.hpp) replayed on a production LLM trace in virtual
// time, every policy on the same arrivals, and the core's own decision time per step.
//
// Workload: the Azure LLM inference trace 2023 (conversation and code services; Patel et al.,
// "Splitwise: Efficient generative LLM inference using phase splitting", ISCA 2024; CC-BY 4.0),
// read from --trace (default ../shared/data/azure-llm-2023 beside the source tree). Where it is
// absent, a synthetic workload with the trace's rate and length percentiles (log-normal lengths,
// Poisson arrivals) stands in, and the output says so.
//
// Step time: t = a + b·(scheduled tokens) + c·(sequences) + d·(context tokens), the Vidur-style
// model of ../shared/reference/iteration-scheduling.md, with coefficients for an 8B model
// (Llama-3-8B, BF16) on one H100 SXM derived from published figures (roofline, memory and compute
// time added): a = 16.06 GB of weights / 3.35 TB/s = 4.8 ms; b = 2 × 8.03 G FLOPs per token /
// (989 TFLOPS dense BF16 × 50 % utilisation) = 32.5 µs; c = 20 µs per sequence (sampling and
// bookkeeping, assumed); d = 131,072 B of KV per context token (32 layers × 8 KV heads × 128 ×
// K and V × 2 B) / 3.35 TB/s = 0.039 µs. Sources: NVIDIA's H100 datasheet, Meta's Llama 3 model
// card. The LibTorch model's fitted coefficients come with the LibTorch transformer backend.
//
// Policies, all on the same core and arrivals: request-level batching (static_batch: a batch
// runs until its longest member finishes, which is what Triton's dynamic batcher gives a
// generative model), vLLM v1 (max_utilization, fcfs, 8192-token steps), TensorRT-LLM's default
// (guaranteed_no_evict), and servekit's SLO-aware setting (slo_aware order, steps sized to the
// TPOT target, Sarathi-Serve's rule).
//
// Goodput: completed requests per second that meet both a time-to-first-token and a
// time-per-output-token target (MLPerf's Llama-2-70B pairs: interactive 450 ms / 40 ms, server
// 2 s / 200 ms).

#include <servekit/schedule/iteration_scheduler_core.hpp>

#include "harness/command_line.hpp"
#include "harness/machine.hpp"
#include "harness/measure.hpp"
#include "harness/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

namespace fs = std::filesystem;
using servekit::iteration_batching_options;
using servekit::iteration_scheduler_core;
using servekit::kv_capacity_policy;

struct trace_request {
  double arrival_s = 0;
  std::uint32_t prompt = 0;
  std::uint32_t output = 0;
};

struct workload {
  std::vector<trace_request> requests;
  std::string source;
  bool synthetic = false;
};

/// "2023-11-16 18:15:46.6805900" as seconds since midnight.
double seconds_of_day(const std::string& stamp) {
  const auto space = stamp.find(' ');
  int h = 0;
  int m = 0;
  double s = 0;
  if (space == std::string::npos ||
      std::sscanf(stamp.c_str() + space + 1, "%d:%d:%lf", &h, &m, &s) != 3) {
    return -1;
  }
  return h * 3600.0 + m * 60.0 + s;
}

/// The first `seconds` of the trace file, arrivals from 0; empty when it cannot be read.
std::vector<trace_request> read_trace(const fs::path& file, double seconds) {
  std::vector<trace_request> out;
  std::ifstream in{file};
  std::string line;
  if (!in || !std::getline(in, line)) {
    return out;
  }
  double first = -1;
  while (std::getline(in, line)) {
    std::stringstream row{line};
    std::string stamp;
    std::string prompt;
    std::string output;
    if (!std::getline(row, stamp, ',') || !std::getline(row, prompt, ',') ||
        !std::getline(row, output, ',')) {
      continue;
    }
    const double t = seconds_of_day(stamp);
    if (t < 0) {
      continue;
    }
    if (first < 0) {
      first = t;
    }
    if (t - first > seconds) {
      break;
    }
    trace_request r;
    r.arrival_s = t - first;
    r.prompt = static_cast<std::uint32_t>(std::max(1L, std::stol(prompt)));
    r.output = static_cast<std::uint32_t>(std::max(1L, std::stol(output)));
    out.push_back(r);
  }
  return out;
}

/// The trace's shape without the trace: Poisson arrivals at `rate`, log-normal lengths with the
/// trace's p50 and p90, capped at its maximum.
std::vector<trace_request> synthetic_trace(double seconds, double rate, double prompt_p50,
                                           double prompt_p90, double prompt_max, double out_p50,
                                           double out_p90, double out_max) {
  std::mt19937_64 rng{2023};
  std::exponential_distribution<double> gap{rate};
  const double z90 = 1.2815515655446004;
  std::lognormal_distribution<double> prompt{std::log(prompt_p50),
                                             std::log(prompt_p90 / prompt_p50) / z90};
  std::lognormal_distribution<double> output{std::log(out_p50), std::log(out_p90 / out_p50) / z90};
  std::vector<trace_request> out;
  for (double t = gap(rng); t < seconds; t += gap(rng)) {
    trace_request r;
    r.arrival_s = t;
    r.prompt = static_cast<std::uint32_t>(std::clamp(prompt(rng), 1.0, prompt_max));
    r.output = static_cast<std::uint32_t>(std::clamp(output(rng), 1.0, out_max));
    out.push_back(r);
  }
  return out;
}

workload load(const fs::path& folder, const std::string& which, double seconds) {
  workload w;
  const bool conv = which == "conv";
  const fs::path file =
      folder / (conv ? "AzureLLMInferenceTrace_conv.csv" : "AzureLLMInferenceTrace_code.csv");
  w.requests = read_trace(file, seconds);
  if (!w.requests.empty()) {
    w.source = file.string();
    return w;
  }
  w.synthetic = true;
  w.source = "synthetic (" + file.string() + " not found): the trace's rate and length percentiles";
  w.requests = conv ? synthetic_trace(seconds, 5.5, 1020, 2735, 14050, 129, 424, 1000)
                    : synthetic_trace(seconds, 2.6, 1469, 5194, 7437, 13, 55, 1899);
  return w;
}

/// t = a + b·tokens + c·sequences + d·context tokens, in microseconds.
struct step_model {
  double a_us = 4800;
  double b_us = 32.5;
  double c_us = 20;
  double d_us = 0.039;

  [[nodiscard]] double step_us(const servekit::step_plan& plan) const {
    double context = 0;
    for (const auto& s : plan.sequences) {
      context += s.first_token + s.num_tokens;
    }
    return a_us + b_us * plan.scheduled_tokens + c_us * static_cast<double>(plan.sequences.size()) +
           d_us * context;
  }
};

struct slo {
  double ttft_s;
  double tpot_s;
};
constexpr slo interactive{0.450, 0.040};
constexpr slo server{2.0, 0.200};

struct run_result {
  std::vector<double> ttft_s;
  std::vector<double> tpot_s;
  std::uint64_t refused = 0;
  std::uint64_t preemptions = 0;
  double span_s = 0; // arrivals' span, scaled: goodput's denominator

  [[nodiscard]] double meeting(slo target) const {
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < ttft_s.size(); ++i) {
      n += ttft_s[i] <= target.ttft_s && tpot_s[i] <= target.tpot_s ? 1U : 0U;
    }
    return static_cast<double>(n);
  }
  [[nodiscard]] double goodput(slo target) const {
    return span_s > 0 ? meeting(target) / span_s : 0;
  }
  [[nodiscard]] double attainment(slo target, std::size_t offered) const {
    return offered == 0 ? 0 : meeting(target) / static_cast<double>(offered);
  }
};

/// Replays `requests` at `scale` × their rate through the core, in virtual time.
run_result replay(const std::vector<trace_request>& requests, double scale,
                  const iteration_batching_options& o, const step_model& model) {
  run_result out;
  iteration_scheduler_core core{o};
  struct live {
    double arrival = 0;
    double first = -1;
  };
  std::unordered_map<std::uint64_t, live> state;
  std::vector<servekit::step_output> sampled;
  std::vector<servekit::generation_event> events;
  std::size_t next = 0;
  double now = 0;
  auto at = [](double seconds) {
    return servekit::time_point{} +
           std::chrono::nanoseconds{static_cast<std::int64_t>(seconds * 1e9)};
  };
  while (next < requests.size() || !core.idle()) {
    while (next < requests.size() && requests[next].arrival_s / scale <= now) {
      const trace_request& r = requests[next];
      servekit::generation_request g;
      g.id = next;
      // Distinct token ids per request: the trace has lengths, not texts (no prefix hits).
      g.prompt.resize(r.prompt);
      for (std::uint32_t k = 0; k < r.prompt; ++k) {
        g.prompt[k] = static_cast<servekit::token_id>((next * 7919 + k) % 128000);
      }
      g.max_new_tokens = r.output;
      g.arrival = at(r.arrival_s / scale);
      if (core.add(std::move(g)).ok()) {
        state[next] = live{r.arrival_s / scale, -1};
      } else {
        ++out.refused;
      }
      ++next;
    }
    const servekit::step_plan& plan = core.schedule(at(now));
    if (plan.empty()) {
      if (next >= requests.size()) {
        break; // nothing can run (cannot happen: add() refuses what could never fit)
      }
      now = std::max(now, requests[next].arrival_s / scale);
      continue;
    }
    now += model.step_us(plan) * 1e-6;
    sampled.clear();
    for (const auto& s : plan.sequences) {
      if (s.samples) {
        sampled.push_back({s.id, 1, false});
      }
    }
    events.clear();
    (void)core.update(sampled, events);
    for (const auto& e : events) {
      live& l = state[e.id];
      if (l.first < 0) {
        l.first = now;
      }
      if (e.finished) {
        out.ttft_s.push_back(l.first - l.arrival);
        out.tpot_s.push_back(e.generated > 1 ? (now - l.first) / (e.generated - 1) : 0.0);
        state.erase(e.id);
      }
    }
  }
  out.preemptions = core.stats().preemptions;
  out.span_s = requests.empty() ? 0 : requests.back().arrival_s / scale;
  return out;
}

iteration_batching_options base_options() {
  iteration_batching_options o;
  o.max_num_seqs = 256;
  o.max_num_batched_tokens = 8192; // vLLM's serving default for this class of GPU
  o.block_size = 16;
  // (80 GB × 0.9 − 16 GB of weights) / 131,072 B of KV per token = 427k tokens.
  o.num_blocks = 26'000;
  o.max_model_len = 16'384;
  o.enable_prefix_caching = true;
  return o;
}

struct policy {
  const char* name;
  iteration_batching_options options;
};

std::vector<policy> policies(const step_model& model) {
  auto request_level = base_options();
  request_level.capacity = kv_capacity_policy::static_batch;
  auto vllm = base_options();
  auto no_evict = base_options();
  no_evict.capacity = kv_capacity_policy::guaranteed_no_evict;
  auto slo_aware = base_options();
  slo_aware.order = servekit::iteration_queue_order::slo_aware;
  slo_aware.ttft_target = std::chrono::milliseconds{450};
  // Sarathi-Serve: a step no longer than the TPOT target (40 ms), so a prompt chunk never
  // stalls the decodes beside it past it.
  slo_aware.max_num_batched_tokens = static_cast<std::uint32_t>(
      std::max(256.0, (interactive.tpot_s * 1e6 * 0.8 - model.a_us) / model.b_us));
  return {{"request_level", request_level},
          {"vllm_fcfs", vllm},
          {"no_evict", no_evict},
          {"slo_aware", slo_aware}};
}

/// The core's schedule() + update() with `running` sequences decoding, in µs per step (median).
double decision_us(std::uint32_t running, int steps) {
  auto o = base_options();
  o.max_num_seqs = running;
  o.num_blocks = running * static_cast<std::uint32_t>((64 + steps + 100) / 16 + 2); // no preemption
  iteration_scheduler_core core{o};
  for (std::uint32_t i = 0; i < running; ++i) {
    servekit::generation_request g;
    g.id = i;
    g.prompt.assign(64, static_cast<servekit::token_id>(i));
    g.max_new_tokens = static_cast<std::uint32_t>(steps) + 100; // decodes for the whole run
    (void)core.add(std::move(g));
  }
  std::vector<servekit::step_output> sampled;
  std::vector<servekit::generation_event> events;
  std::vector<double> us;
  for (int step = 0; step < steps; ++step) {
    const auto t0 = servekit_bench::bench_clock::now();
    const servekit::step_plan& plan = core.schedule(servekit::time_point{});
    sampled.clear();
    for (const auto& s : plan.sequences) {
      if (s.samples) {
        sampled.push_back({s.id, 7, false});
      }
    }
    events.clear();
    (void)core.update(sampled, events);
    const auto t1 = servekit_bench::bench_clock::now();
    if (step >= 10) { // the prefills are done by then
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  return servekit_bench::median(us);
}

} // namespace

int main(int argc, char** argv) {
  bool json = false;
  bool quick = false;
  std::string trace_dir =
      fs::path{SERVEKIT_SOURCE_DIR}.parent_path() / "shared" / "data" / "azure-llm-2023";
  double seconds = 1200;
  servekit_bench::command_line cl{"bench_iteration"};
  cl.json(json)
      .quick(quick, "120 s of the trace and fewer rates (the smoke test, a few seconds)")
      .text("--trace", trace_dir, {}, "folder of AzureLLMInferenceTrace_{conv,code}.csv")
      .number("--seconds", seconds, 10, 4000, "seconds of each trace replayed (1200)")
      .when_quick("--seconds", seconds, 120.0);
  cl.parse(argc, argv);

  const servekit_bench::machine host;
  std::printf("bench_iteration  cpu: %s  nproc: %u  load: %.2f%s\n", host.cpu.c_str(), host.nproc,
              host.load, quick ? "  (quick)" : "");
  const step_model model;
  std::printf("step model (8B BF16 on H100, roofline): t = %.0f us + %.1f us/token + %.0f us/seq "
              "+ %.3f us/context token\n",
              model.a_us, model.b_us, model.c_us, model.d_us);

  servekit_bench::report figures;
  std::uint64_t wrong = 0;
  const std::vector<double> scales =
      quick ? std::vector<double>{1, 2, 4}
            : std::vector<double>{1, 1.5, 2, 2.25, 2.5, 2.75, 3, 4, 6, 8};
  for (const char* which : {"conv", "code"}) {
    const workload w = load(trace_dir, which, seconds);
    std::printf("\n[%s] %zu requests over %.0f s from %s\n", which, w.requests.size(),
                w.requests.empty() ? 0.0 : w.requests.back().arrival_s, w.source.c_str());
    const auto all = policies(model);
    // Goodput curves: every policy at every rate scale (interactive pair).
    std::printf("  interactive goodput (req/s) [attainment] by rate scale:\n  %-14s", "scale");
    for (const double scale : scales) {
      std::printf(" %13.2f", scale);
    }
    std::printf("\n");
    double chosen = scales.front(); // vLLM-FCFS's last scale meeting 90 % of requests
    for (const auto& p : all) {
      std::printf("  %-14s", p.name);
      for (const double scale : scales) {
        const run_result r = replay(w.requests, scale, p.options, model);
        wrong += r.refused;
        const double att = r.attainment(interactive, w.requests.size());
        std::printf(" %6.2f [%4.2f]", r.goodput(interactive), att);
        figures.put(fmt::format("{}_{}_goodput_x{:g}", which, p.name, scale),
                    r.goodput(interactive));
        if (std::string{p.name} == "vllm_fcfs" && att >= 0.9) {
          chosen = scale;
        }
      }
      std::printf("\n");
    }
    std::printf("  at scale %g (vLLM-FCFS's last with >= 90 %% interactive attainment):\n", chosen);
    std::printf("  %-14s %10s %10s %10s %10s %10s %10s %8s\n", "policy", "attain_int", "goodput_i",
                "goodput_s", "ttft_p50", "ttft_p99", "tpot_p50", "preempt");
    for (const auto& p : all) {
      const run_result r = replay(w.requests, chosen, p.options, model);
      wrong += r.refused;
      std::printf("  %-14s %10.3f %10.2f %10.2f %10.3f %10.3f %10.4f %8llu\n", p.name,
                  r.attainment(interactive, w.requests.size()), r.goodput(interactive),
                  r.goodput(server), servekit_bench::percentile(r.ttft_s, 0.5),
                  servekit_bench::percentile(r.ttft_s, 0.99),
                  servekit_bench::percentile(r.tpot_s, 0.5),
                  static_cast<unsigned long long>(r.preemptions));
      const std::string prefix = std::string{which} + "_" + p.name;
      figures.put(prefix + "_goodput_interactive", r.goodput(interactive));
      figures.put(prefix + "_goodput_server", r.goodput(server));
      figures.put(prefix + "_ttft_p50_s", servekit_bench::percentile(r.ttft_s, 0.5));
      figures.put(prefix + "_ttft_p99_s", servekit_bench::percentile(r.ttft_s, 0.99));
      figures.put(prefix + "_tpot_p50_s", servekit_bench::percentile(r.tpot_s, 0.5));
      figures.put(prefix + "_tpot_p99_s", servekit_bench::percentile(r.tpot_s, 0.99));
      if (std::string{which} == "conv") {
        figures.put(std::string{"goodput_"} + p.name, r.goodput(interactive));
      }
    }
    figures.put(std::string{which} + "_rate_scale", chosen);
    figures.put(std::string{which} + "_synthetic", w.synthetic ? 1 : 0);
  }
  figures.ratio("iteration_vs_request", "goodput_vllm_fcfs", "goodput_request_level");
  figures.ratio("slo_aware_vs_vllm", "goodput_slo_aware", "goodput_vllm_fcfs");
  const double step_us = decision_us(256, quick ? 200 : 2000);
  std::printf("\n");
  figures.row("step_decision_us_256", step_us, "us, schedule() + update(), 256 decoding sequences");
  figures.row("iteration_vs_request_conv", figures.get("iteration_vs_request"),
              "vLLM-FCFS / request-level goodput (interactive, conversation)");
  figures.row("slo_aware_vs_vllm_conv", figures.get("slo_aware_vs_vllm"),
              "SLO-aware / vLLM-FCFS goodput (interactive, conversation)");

  servekit_bench::goals goals;
  goals.check("iteration-level goodput >= 3 x request-level (conversation, interactive)",
              figures.at_least("iteration_vs_request", 3.0));
  goals.check("SLO-aware goodput >= 1.2 x vLLM-FCFS (conversation, interactive)",
              figures.at_least("slo_aware_vs_vllm", 1.2));
  goals.check("step decision <= 20 us at 256 running sequences",
              figures.at_most("step_decision_us_256", 20.0));
  if (json) {
    figures.put_run(quick, host, wrong);
    figures.print_json();
  }
  return wrong == 0 ? 0 : 1;
}
