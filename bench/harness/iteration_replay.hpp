#pragma once
// Replaying a trace through iteration_scheduler_core in virtual time, each step lasting what a
// step_model says: the simulated shell of the iteration benches. Goodput counts the requests
// that meet both a time-to-first-token and a time-per-output-token target.
#include "harness/azure_trace.hpp"
#include "harness/step_model.hpp"

#include <servekit/schedule/iteration_scheduler_core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace servekit_bench {

struct slo {
  double ttft_s;
  double tpot_s;
};
inline constexpr slo interactive{0.450, 0.040};
inline constexpr slo server{2.0, 0.200};

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
inline run_result replay(const std::vector<trace_request>& requests, double scale,
                         const servekit::iteration_batching_options& o, const step_model& model) {
  run_result out;
  servekit::iteration_scheduler_core core{o};
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

/// A policy the benches compare, by name.
struct policy {
  const char* name;
  servekit::iteration_batching_options options;
};

/// The four policies over `base`, the SLO-aware one tuned for `target`.
inline std::vector<policy> policies(const step_model& model,
                                    const servekit::iteration_batching_options& base, slo target) {
  auto request_level = base;
  request_level.capacity = servekit::kv_capacity_policy::static_batch;
  auto vllm = base;
  auto no_evict = base;
  no_evict.capacity = servekit::kv_capacity_policy::guaranteed_no_evict;
  auto slo_aware = base;
  slo_aware.order = servekit::iteration_queue_order::slo_aware;
  slo_aware.ttft_target = std::chrono::microseconds{static_cast<std::int64_t>(target.ttft_s * 1e6)};
  // Sarathi-Serve: a step no longer than the TPOT target, so a prompt chunk never stalls the
  // decodes beside it past it.
  slo_aware.max_num_batched_tokens = static_cast<std::uint32_t>(
      std::max(static_cast<double>(std::min(base.max_num_batched_tokens, 256U)),
               (target.tpot_s * 1e6 * 0.8 - model.a_us) / std::max(model.b_us, 1e-9)));
  slo_aware.max_num_batched_tokens =
      std::max(slo_aware.max_num_batched_tokens, slo_aware.max_num_seqs);
  return {{"request_level", request_level},
          {"vllm_fcfs", vllm},
          {"no_evict", no_evict},
          {"slo_aware", slo_aware}};
}

} // namespace servekit_bench
