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

#include "harness/azure_trace.hpp"
#include "harness/command_line.hpp"
#include "harness/iteration_replay.hpp"
#include "harness/machine.hpp"
#include "harness/measure.hpp"
#include "harness/report.hpp"
#include "harness/step_model.hpp"
#if defined(SERVEKIT_HAS_LIBTORCH)
#include "harness/libtorch_steps.hpp"
#endif

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
using servekit_bench::interactive;
using servekit_bench::load;
using servekit_bench::policies;
using servekit_bench::replay;
using servekit_bench::run_result;
using servekit_bench::server;
using servekit_bench::slo;
using servekit_bench::workload;

using servekit_bench::step_model;

/// The 8B BF16 model on one H100 SXM (roofline; see the file comment).
constexpr step_model h100_8b{4800, 32.5, 20, 0.039};

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

/// One step-time model's sweep: every policy at every rate scale of both traces (goodput at
/// `target`), then the figures at the scale where vLLM-FCFS last attains 90 %. Keys get
/// `prefix`; the conversation trace's goodputs at that scale are also put as
/// `<prefix>goodput_<policy>`.
void sweep(const std::string& prefix, const step_model& model,
           const iteration_batching_options& base, slo target, const char* target_name,
           const std::vector<double>& scales, const std::string& trace_dir, double seconds,
           servekit_bench::report& figures, std::uint64_t& wrong) {
  for (const char* which : {"conv", "code"}) {
    const workload w = load(trace_dir, which, seconds);
    std::printf("\n[%s%s] %zu requests over %.0f s from %s\n", prefix.c_str(), which,
                w.requests.size(), w.requests.empty() ? 0.0 : w.requests.back().arrival_s,
                w.source.c_str());
    const auto all = policies(model, base, target);
    std::printf("  %s goodput (req/s) [attainment] by rate scale:\n  %-14s", target_name, "scale");
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
        const double att = r.attainment(target, w.requests.size());
        std::printf(" %6.2f [%4.2f]", r.goodput(target), att);
        figures.put(fmt::format("{}{}_{}_goodput_x{:g}", prefix, which, p.name, scale),
                    r.goodput(target));
        if (std::string{p.name} == "vllm_fcfs" && att >= 0.9) {
          chosen = scale;
        }
      }
      std::printf("\n");
    }
    std::printf("  at scale %g (vLLM-FCFS's last with >= 90 %% %s attainment):\n", chosen,
                target_name);
    std::printf("  %-14s %10s %10s %10s %10s %10s %10s %8s\n", "policy", "attain", "goodput_i",
                "goodput_s", "ttft_p50", "ttft_p99", "tpot_p50", "preempt");
    for (const auto& p : all) {
      const run_result r = replay(w.requests, chosen, p.options, model);
      wrong += r.refused;
      std::printf("  %-14s %10.3f %10.2f %10.2f %10.3f %10.3f %10.4f %8llu\n", p.name,
                  r.attainment(target, w.requests.size()), r.goodput(interactive),
                  r.goodput(server), servekit_bench::percentile(r.ttft_s, 0.5),
                  servekit_bench::percentile(r.ttft_s, 0.99),
                  servekit_bench::percentile(r.tpot_s, 0.5),
                  static_cast<unsigned long long>(r.preemptions));
      const std::string key = prefix + which + "_" + p.name;
      figures.put(key + "_goodput_interactive", r.goodput(interactive));
      figures.put(key + "_goodput_server", r.goodput(server));
      figures.put(key + "_ttft_p50_s", servekit_bench::percentile(r.ttft_s, 0.5));
      figures.put(key + "_ttft_p99_s", servekit_bench::percentile(r.ttft_s, 0.99));
      figures.put(key + "_tpot_p50_s", servekit_bench::percentile(r.tpot_s, 0.5));
      figures.put(key + "_tpot_p99_s", servekit_bench::percentile(r.tpot_s, 0.99));
      if (std::string{which} == "conv") {
        figures.put(prefix + "goodput_" + p.name, r.goodput(target));
      }
    }
    figures.put(prefix + which + "_rate_scale", chosen);
    figures.put(prefix + which + "_synthetic", w.synthetic ? 1 : 0);
  }
  figures.ratio(prefix + "iteration_vs_request", prefix + "goodput_vllm_fcfs",
                prefix + "goodput_request_level");
  figures.ratio(prefix + "slo_aware_vs_vllm", prefix + "goodput_slo_aware",
                prefix + "goodput_vllm_fcfs");
}

/// Parses "a,b,c,d" (microseconds) into `out`.
bool parse_step_model(const std::string& text, step_model& out) {
  double v[4] = {};
  std::istringstream in{text};
  for (int i = 0; i < 4; ++i) {
    char comma = ',';
    if (!(in >> v[i]) || (i < 3 && (!(in >> comma) || comma != ','))) {
      return false;
    }
  }
  out = {v[0], v[1], v[2], v[3]};
  return true;
}

} // namespace

int main(int argc, char** argv) {
  bool json = false;
  bool quick = false;
  std::string trace_dir =
      fs::path{SERVEKIT_SOURCE_DIR}.parent_path() / "shared" / "data" / "azure-llm-2023";
  double seconds = 1200;
  std::string fitted_text;
  servekit_bench::command_line cl{"bench_iteration"};
  cl.json(json)
      .quick(quick, "120 s of the trace and fewer rates (the smoke test, a few seconds)")
      .text("--trace", trace_dir, {}, "folder of AzureLLMInferenceTrace_{conv,code}.csv")
      .number("--seconds", seconds, 10, 4000, "seconds of each trace replayed (1200)")
      .text("--step-model", fitted_text, {},
            "a,b,c,d: the LibTorch model's fitted coefficients in us (calibrate_step_model); "
            "default: fitted here when built with LibTorch")
      .when_quick("--seconds", seconds, 120.0);
  cl.parse(argc, argv);

  const servekit_bench::machine host;
  std::printf("bench_iteration  cpu: %s  nproc: %u  load: %.2f%s\n", host.cpu.c_str(), host.nproc,
              host.load, quick ? "  (quick)" : "");
  std::printf("step model (b), 8B BF16 on H100, roofline: t = %.0f us + %.1f us/token + %.0f "
              "us/seq + %.3f us/context token\n",
              h100_8b.a_us, h100_8b.b_us, h100_8b.c_us, h100_8b.d_us);

  servekit_bench::report figures;
  std::uint64_t wrong = 0;
  const std::vector<double> scales =
      quick ? std::vector<double>{1, 2, 4}
            : std::vector<double>{1, 1.5, 2, 2.25, 2.5, 2.75, 3, 4, 6, 8};
  sweep("", h100_8b, base_options(), interactive, "interactive", scales, trace_dir, seconds,
        figures, wrong);

  // (a) The step-time model fitted on the LibTorch transformer (tiny_lm on one CPU thread): a
  // far slower "GPU", so the same trace runs at a fraction of its rate, judged at the server
  // pair (its decodes alone take longer than the interactive TPOT target at any load).
  step_model fitted;
  bool have_fitted = !fitted_text.empty() && parse_step_model(fitted_text, fitted);
  if (!fitted_text.empty() && !have_fitted) {
    std::fprintf(stderr, "bench_iteration: --step-model wants a,b,c,d, got '%s'\n",
                 fitted_text.c_str());
    return 2;
  }
#if defined(SERVEKIT_HAS_LIBTORCH)
  if (!have_fitted) {
    const auto samples = servekit_bench::time_tiny_lm_steps(
        fs::path{SERVEKIT_SOURCE_DIR} / "examples" / "models" / "tiny_lm" / "1",
        quick ? 200 : 1500);
    const auto fit = servekit_bench::fit_step_model(samples);
    fitted = fit.model;
    have_fitted = fit.samples > 0;
    figures.put("libtorch_fit_r2", fit.r2);
    figures.put("libtorch_fit_median_abs_error_pct", fit.median_abs_error_pct);
    std::printf(
        "\nstep model (a), fitted on tiny_lm (LibTorch, 1 thread) over %zu timed steps: R^2 "
        "%.3f, median |error| %.1f %%\n",
        fit.samples, fit.r2, fit.median_abs_error_pct);
  }
#endif
  if (have_fitted) {
    std::printf("step model (a): t = %.0f us + %.2f us/token + %.1f us/seq + %.4f us/context "
                "token\n",
                fitted.a_us, fitted.b_us, fitted.c_us, fitted.d_us);
    figures.put("libtorch_a_us", fitted.a_us);
    figures.put("libtorch_b_us", fitted.b_us);
    figures.put("libtorch_c_us", fitted.c_us);
    figures.put("libtorch_d_us", fitted.d_us);
    auto cpu = base_options(); // tiny_lm's bundled config
    cpu.max_num_seqs = 64;
    cpu.max_num_batched_tokens = 512;
    cpu.num_blocks = 4096;
    const std::vector<double> cpu_scales =
        quick ? std::vector<double>{0.5, 1, 1.5}
              : std::vector<double>{0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3};
    sweep("libtorch_", fitted, cpu, server, "server", cpu_scales, trace_dir, seconds, figures,
          wrong);
  } else {
    std::printf("\nstep model (a): not fitted (a build without LibTorch; pass --step-model)\n");
  }

  const double step_us = decision_us(256, quick ? 200 : 2000);
  std::printf("\n");
  figures.row("step_decision_us_256", step_us, "us, schedule() + update(), 256 decoding sequences");
  figures.row("iteration_vs_request_conv", figures.get("iteration_vs_request"),
              "vLLM-FCFS / request-level goodput (interactive, conversation, 8B on H100)");
  figures.row("slo_aware_vs_vllm_conv", figures.get("slo_aware_vs_vllm"),
              "SLO-aware / vLLM-FCFS goodput (interactive, conversation, 8B on H100)");
  if (have_fitted) {
    figures.row("libtorch_iteration_vs_request_conv", figures.get("libtorch_iteration_vs_request"),
                "vLLM-FCFS / request-level goodput (server pair, conversation, tiny_lm fit)");
    figures.row("libtorch_slo_aware_vs_vllm_conv", figures.get("libtorch_slo_aware_vs_vllm"),
                "SLO-aware / vLLM-FCFS goodput (server pair, conversation, tiny_lm fit)");
  }

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
