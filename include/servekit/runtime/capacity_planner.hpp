#pragma once
/// \file
/// The capacity planner: how many instances and replicas keep a model's p99 latency under a
/// target at a given load, and with which dynamic batching settings. Each candidate is answered
/// by replaying the arrivals through the real dynamic batcher core in the simulated shell
/// (virtual time, a latency model per batch size), so a search over hundreds of settings takes
/// seconds where Triton's Model Analyzer runs the server for hours. servekit-plan
/// (bench/servekit_plan.cpp) is its command line; docs/scale-out.md shows it validated against
/// servekit-server under the same load.

#include <servekit/core/clock.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/runtime/simulated_shell.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace servekit {

/// One setting the planner tries: dynamic batching of one model, `instances` per replica,
/// `replicas` servers behind a proxy that deals stateless requests round-robin.
struct plan_setting {
  std::int32_t max_batch_size = 1;
  std::vector<std::int32_t> preferred_batch_size; ///< empty: [max_batch_size] (Triton's)
  std::uint64_t max_queue_delay_microseconds = 0;
  std::size_t instances = 1;
  std::size_t replicas = 1;

  [[nodiscard]] std::size_t total_instances() const noexcept { return instances * replicas; }
};

/// What one setting gave on the arrivals.
struct plan_outcome {
  plan_setting setting;
  double p50_ms = 0;
  double p99_ms = 0;
  double mean_batch = 0;
  std::size_t requests = 0;
  std::size_t refused = 0; ///< answered with an error (none, unless a queue policy refuses)
};

/// `p` in [0, 1] of `values` (nearest rank; 0 when empty). Sorts `values`.
[[nodiscard]] inline double plan_percentile(std::vector<double>& values, double p) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

/// Arrivals at `rate` per second for `seconds`, evenly spaced (what an open-loop load generator
/// such as servekit-loadgen --rate sends).
[[nodiscard]] inline std::vector<double> uniform_arrivals(double rate, double seconds) {
  std::vector<double> out;
  const auto n = static_cast<std::size_t>(rate * seconds);
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(static_cast<double>(i) / rate);
  }
  return out;
}

/// Poisson arrivals at `rate` per second for `seconds` (independent clients), seeded.
[[nodiscard]] inline std::vector<double> poisson_arrivals(double rate, double seconds,
                                                          std::uint64_t seed = 1) {
  std::vector<double> out;
  std::mt19937_64 rng{seed};
  std::exponential_distribution<double> gap{rate};
  for (double t = gap(rng); t < seconds; t += gap(rng)) {
    out.push_back(t);
  }
  return out;
}

/// Replays `arrivals_s` (seconds from 0, ascending) through `setting`: request i goes to
/// replica i mod replicas, each replica a dynamic batcher over `instances` instances whose
/// executions take `latency(batch size)`. Latency counts from arrival to response.
[[nodiscard]] inline plan_outcome simulate_plan(const plan_setting& setting,
                                                const latency_model& latency,
                                                const std::vector<double>& arrivals_s) {
  plan_outcome out;
  out.setting = setting;
  scheduler_settings s;
  s.model_name = "planned";
  s.max_batch_size = setting.max_batch_size;
  s.dynamic_batching.preferred_batch_size = setting.preferred_batch_size;
  s.dynamic_batching.max_queue_delay_microseconds = setting.max_queue_delay_microseconds;
  std::vector<double> latencies;
  latencies.reserve(arrivals_s.size());
  std::size_t batches = 0;
  std::size_t executed = 0;
  const std::size_t replicas = std::max<std::size_t>(1, setting.replicas);
  for (std::size_t replica = 0; replica < replicas; ++replica) {
    simulated_shell<dynamic_batcher<>> shell{s, std::max<std::size_t>(1, setting.instances),
                                             latency};
    for (std::size_t i = replica; i < arrivals_s.size(); i += replicas) {
      const time_point at{
          std::chrono::round<duration>(std::chrono::duration<double>(arrivals_s[i]))};
      shell.submit_at(at, request{}, [&, at](response&& r) {
        if (!r.final) {
          return;
        }
        if (!r.ok()) {
          ++out.refused;
          return;
        }
        latencies.push_back(std::chrono::duration<double, std::milli>(shell.now() - at).count());
      });
    }
    shell.run();
    batches += shell.batches().size();
    for (const auto& b : shell.batches()) {
      executed += static_cast<std::size_t>(b.elements);
    }
  }
  out.requests = arrivals_s.size();
  out.mean_batch = batches == 0 ? 0 : static_cast<double>(executed) / static_cast<double>(batches);
  out.p50_ms = plan_percentile(latencies, 0.50);
  out.p99_ms = plan_percentile(latencies, 0.99);
  return out;
}

/// The settings the planner searches.
struct plan_space {
  std::vector<std::int32_t> max_batch_sizes{1, 2, 4, 8, 16, 32};
  std::vector<std::uint64_t> queue_delays_us{0, 100, 500, 1000, 2000, 5000, 10000};
  bool try_preferred_powers_of_two = true; ///< also [1, 2, 4, ..., max] as preferred sizes
  std::size_t max_instances = 4;           ///< per replica
  std::size_t max_replicas = 8;
};

/// The planner's answer: the cheapest setting whose p99 is at most the target (fewest instances
/// in all, then fewest replicas, then the lowest p99), and every setting it tried.
struct plan_answer {
  std::optional<plan_outcome> best;
  std::vector<plan_outcome> tried;
};

/// Searches `space` in order of total instances (replicas × instances per replica), stopping
/// after the first total at which some setting meets `target_p99_ms` with no request refused.
[[nodiscard]] inline plan_answer plan_capacity(const plan_space& space,
                                               const latency_model& latency,
                                               const std::vector<double>& arrivals_s,
                                               double target_p99_ms) {
  plan_answer answer;
  const std::size_t most = space.max_instances * space.max_replicas;
  for (std::size_t total = 1; total <= most && !answer.best; ++total) {
    for (std::size_t replicas = 1; replicas <= space.max_replicas; ++replicas) {
      if (total % replicas != 0 || total / replicas > space.max_instances) {
        continue;
      }
      for (const std::int32_t max_batch : space.max_batch_sizes) {
        std::vector<std::vector<std::int32_t>> preferred{{}};
        if (space.try_preferred_powers_of_two && max_batch > 2) {
          std::vector<std::int32_t> powers;
          for (std::int32_t b = 1; b <= max_batch; b *= 2) {
            powers.push_back(b);
          }
          preferred.push_back(powers);
        }
        for (const auto& sizes : preferred) {
          for (const std::uint64_t delay : space.queue_delays_us) {
            if (max_batch == 1 && (delay > 0 || !sizes.empty())) {
              continue; // nothing to wait for
            }
            plan_setting s;
            s.max_batch_size = max_batch;
            s.preferred_batch_size = sizes;
            s.max_queue_delay_microseconds = delay;
            s.instances = total / replicas;
            s.replicas = replicas;
            plan_outcome o = simulate_plan(s, latency, arrivals_s);
            const bool meets = o.refused == 0 && o.p99_ms <= target_p99_ms;
            if (meets && (!answer.best || o.p99_ms < answer.best->p99_ms)) {
              answer.best = o;
            }
            answer.tried.push_back(std::move(o));
          }
        }
      }
    }
  }
  return answer;
}

/// One row of Triton's batch statistics (`batch_stats`): executions of `batch_size` requests,
/// `count` of them, their mean time from compute input start to compute output end.
struct batch_time {
  std::int64_t batch_size = 0;
  std::uint64_t count = 0;
  double mean_us = 0;
};

/// A latency model fitted on batch statistics.
struct fitted_latency {
  latency_model model;
  double fixed_us = 0;
  double per_element_us = 0;
  double r2 = 0; ///< 1 when one batch size was seen (nothing to explain)
};

/// Least squares of mean execution time on batch size, each size weighted by its count. With
/// one batch size seen, the model is that size's mean as a fixed cost. Nothing when no batch.
[[nodiscard]] inline std::optional<fitted_latency>
fit_latency(const std::vector<batch_time>& rows) {
  double n = 0;
  double sx = 0;
  double sy = 0;
  double sxx = 0;
  double sxy = 0;
  std::size_t sizes = 0;
  for (const auto& r : rows) {
    if (r.count == 0) {
      continue;
    }
    const auto w = static_cast<double>(r.count);
    const auto x = static_cast<double>(r.batch_size);
    n += w;
    sx += w * x;
    sy += w * r.mean_us;
    sxx += w * x * x;
    sxy += w * x * r.mean_us;
    ++sizes;
  }
  if (n == 0) {
    return std::nullopt;
  }
  fitted_latency f;
  const double var = sxx - sx * sx / n;
  if (sizes < 2 || var <= 0) {
    f.fixed_us = sy / n;
    f.r2 = 1;
  } else {
    f.per_element_us = std::max(0.0, (sxy - sx * sy / n) / var);
    f.fixed_us = std::max(0.0, (sy - f.per_element_us * sx) / n);
    double ss_res = 0;
    double ss_tot = 0;
    for (const auto& r : rows) {
      const auto w = static_cast<double>(r.count);
      const double fit = f.fixed_us + f.per_element_us * static_cast<double>(r.batch_size);
      ss_res += w * (r.mean_us - fit) * (r.mean_us - fit);
      ss_tot += w * (r.mean_us - sy / n) * (r.mean_us - sy / n);
    }
    f.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
  }
  f.model.fixed =
      std::chrono::duration_cast<duration>(std::chrono::duration<double, std::micro>(f.fixed_us));
  f.model.per_element = std::chrono::duration_cast<duration>(
      std::chrono::duration<double, std::micro>(f.per_element_us));
  return f;
}

} // namespace servekit
