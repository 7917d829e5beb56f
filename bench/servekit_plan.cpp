/// servekit-plan: how many instances and replicas keep a model's p99 under a target at a load,
/// and with which dynamic batching settings (runtime/capacity_planner.hpp, docs/scale-out.md).
///
///     # the latency model from a running server's statistics, 400 req/s, p99 <= 50 ms:
///     curl -s localhost:8000/v2/models/my_model/stats > stats.json
///     servekit-plan --stats stats.json --rate 400 --p99-ms 50
///     # or given: 3 ms per execution plus 0.4 ms per request of the batch
///     servekit-plan --fixed-ms 3 --per-element-ms 0.4 --rate 400 --p99-ms 50
///     # one setting, not a search (what bench_cluster.py compares with a measurement):
///     servekit-plan --stats stats.json --rate 300 --evaluate 8,2000,1,1 --json
///
/// The load: --rate R for --seconds (evenly spaced, as servekit-loadgen --rate sends, or
/// --arrivals poisson), or --trace FILE (one arrival time in seconds per line). The last line
/// with --json is one JSON object.
#include "harness/command_line.hpp"

#include <servekit/runtime/capacity_planner.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// The batch statistics of Triton's stats JSON (`GET /v2/models/{m}/stats`): per batch size,
/// the mean of compute input + infer + output.
std::vector<servekit::batch_time> read_batch_stats(const std::string& path) {
  std::ifstream in{path};
  if (!in) {
    throw std::runtime_error("cannot read '" + path + "'");
  }
  const auto j = nlohmann::json::parse(in);
  std::vector<servekit::batch_time> rows;
  const auto& model = j.at("model_stats").at(0);
  for (const auto& b : model.at("batch_stats")) {
    servekit::batch_time row;
    row.batch_size = b.at("batch_size").get<std::int64_t>();
    const auto count = b.at("compute_infer").at("count").get<std::uint64_t>();
    double ns = 0;
    for (const char* part : {"compute_input", "compute_infer", "compute_output"}) {
      ns += b.at(part).at("ns").get<double>();
    }
    row.count = count;
    row.mean_us = count == 0 ? 0 : ns / static_cast<double>(count) / 1000.0;
    rows.push_back(row);
  }
  return rows;
}

std::vector<double> read_trace(const std::string& path) {
  std::ifstream in{path};
  if (!in) {
    throw std::runtime_error("cannot read '" + path + "'");
  }
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') {
      continue;
    }
    out.push_back(std::stod(line));
  }
  std::sort(out.begin(), out.end());
  if (!out.empty()) {
    const double first = out.front();
    for (auto& t : out) {
      t -= first;
    }
  }
  return out;
}

/// "8,2000,1,1": max batch size, queue delay (us), instances, replicas.
std::optional<servekit::plan_setting> parse_setting(const std::string& text) {
  std::vector<std::uint64_t> v;
  std::stringstream ss{text};
  for (std::string part; std::getline(ss, part, ',');) {
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
    if (ec != std::errc{} || end != part.data() + part.size()) {
      return std::nullopt;
    }
    v.push_back(n);
  }
  if (v.size() != 4 || v[0] == 0 || v[2] == 0 || v[3] == 0) {
    return std::nullopt;
  }
  servekit::plan_setting s;
  s.max_batch_size = static_cast<std::int32_t>(v[0]);
  s.max_queue_delay_microseconds = v[1];
  s.instances = v[2];
  s.replicas = v[3];
  return s;
}

std::string describe(const servekit::plan_setting& s) {
  std::string preferred = "[max]";
  if (!s.preferred_batch_size.empty()) {
    preferred = "[";
    for (std::size_t i = 0; i < s.preferred_batch_size.size(); ++i) {
      preferred += (i ? "," : "") + std::to_string(s.preferred_batch_size[i]);
    }
    preferred += "]";
  }
  return fmt::format("{} replica(s) x {} instance(s), max_batch_size {}, preferred {}, "
                     "max_queue_delay {} us",
                     s.replicas, s.instances, s.max_batch_size, preferred,
                     s.max_queue_delay_microseconds);
}

} // namespace

int main(int argc, char** argv) try {
  bool json = false;
  double rate = 0;
  double seconds = 60;
  double target_ms = 0;
  double fixed_ms = -1;
  double per_element_ms = 0;
  std::string stats_path;
  std::string trace_path;
  std::string arrivals = "uniform";
  std::string evaluate;
  servekit::plan_space space;
  std::int32_t max_batch = 32;
  servekit_bench::command_line cl{"servekit-plan"};
  cl.json(json)
      .number("--rate", rate, 1e-3, 1e7, "requests per second")
      .number("--seconds", seconds, 0.1, 86400, "seconds of load to replay (60)")
      .text("--arrivals", arrivals, {"uniform", "poisson"},
            "how --rate arrives: evenly spaced (servekit-loadgen --rate) or Poisson (uniform)")
      .text("--trace", trace_path, {}, "arrival times in seconds, one per line (instead of --rate)")
      .number("--p99-ms", target_ms, 1e-3, 1e7, "the p99 latency target")
      .text("--stats", stats_path, {},
            "a model's statistics JSON (GET /v2/models/{m}/stats): the latency model is fitted "
            "on its batch_stats")
      .number("--fixed-ms", fixed_ms, 0, 1e6, "the latency model given: ms per execution")
      .number("--per-element-ms", per_element_ms, 0, 1e6, "... plus ms per request of the batch")
      .integer("--max-batch-size", max_batch, 1, 4096, "largest max_batch_size tried (32)")
      .integer("--max-instances", space.max_instances, 1, 64, "instances per replica tried (4)")
      .integer("--max-replicas", space.max_replicas, 1, 256, "replicas tried (8)")
      .text("--evaluate", evaluate, {},
            "MAX_BATCH,DELAY_US,INSTANCES,REPLICAS: predict this one setting instead of searching");
  cl.parse(argc, argv);

  // The latency model.
  servekit::latency_model latency;
  double r2 = 1;
  if (!stats_path.empty()) {
    const auto fit = servekit::fit_latency(read_batch_stats(stats_path));
    if (!fit) {
      std::fprintf(stderr, "servekit-plan: %s has no executed batch to fit a latency model on\n",
                   stats_path.c_str());
      return 2;
    }
    latency = fit->model;
    fixed_ms = fit->fixed_us / 1000.0;
    per_element_ms = fit->per_element_us / 1000.0;
    r2 = fit->r2;
  } else if (fixed_ms >= 0) {
    latency.fixed = std::chrono::duration_cast<servekit::duration>(
        std::chrono::duration<double, std::milli>(fixed_ms));
    latency.per_element = std::chrono::duration_cast<servekit::duration>(
        std::chrono::duration<double, std::milli>(per_element_ms));
  } else {
    std::fprintf(stderr, "servekit-plan: give the latency model: --stats FILE, or --fixed-ms "
                         "(and --per-element-ms)\n");
    return 2;
  }
  // The load.
  std::vector<double> load;
  if (!trace_path.empty()) {
    load = read_trace(trace_path);
  } else if (rate > 0) {
    load = arrivals == "poisson" ? servekit::poisson_arrivals(rate, seconds)
                                 : servekit::uniform_arrivals(rate, seconds);
  } else {
    std::fprintf(stderr, "servekit-plan: give the load: --rate R or --trace FILE\n");
    return 2;
  }
  const double span = load.empty() ? 0 : load.back();
  std::printf("latency model: %.3f ms + %.3f ms per request of a batch%s\n", fixed_ms,
              per_element_ms,
              stats_path.empty() ? "" : fmt::format(" (fitted, R^2 {:.3f})", r2).c_str());
  std::printf("load: %zu requests over %.1f s (%.1f req/s)\n", load.size(), span,
              span > 0 ? static_cast<double>(load.size()) / span : 0.0);

  nlohmann::json out;
  out["fixed_ms"] = fixed_ms;
  out["per_element_ms"] = per_element_ms;
  out["fit_r2"] = r2;
  out["requests"] = load.size();
  const auto put = [&out](const char* key, const servekit::plan_outcome& o) {
    auto& j = out[key];
    j["max_batch_size"] = o.setting.max_batch_size;
    j["preferred_batch_size"] = o.setting.preferred_batch_size;
    j["max_queue_delay_microseconds"] = o.setting.max_queue_delay_microseconds;
    j["instances"] = o.setting.instances;
    j["replicas"] = o.setting.replicas;
    j["p50_ms"] = o.p50_ms;
    j["p99_ms"] = o.p99_ms;
    j["mean_batch"] = o.mean_batch;
    j["refused"] = o.refused;
  };

  if (!evaluate.empty()) {
    const auto setting = parse_setting(evaluate);
    if (!setting) {
      std::fprintf(stderr,
                   "servekit-plan: --evaluate: expected MAX_BATCH,DELAY_US,INSTANCES,"
                   "REPLICAS (positive but the delay), got '%s'\n",
                   evaluate.c_str());
      return 2;
    }
    const auto o = servekit::simulate_plan(*setting, latency, load);
    std::printf("%s: p50 %.2f ms, p99 %.2f ms, mean batch %.2f\n", describe(o.setting).c_str(),
                o.p50_ms, o.p99_ms, o.mean_batch);
    put("evaluated", o);
  } else {
    if (target_ms <= 0) {
      std::fprintf(stderr, "servekit-plan: give the target: --p99-ms T\n");
      return 2;
    }
    space.max_batch_sizes.clear();
    for (std::int32_t b = 1; b <= max_batch; b *= 2) {
      space.max_batch_sizes.push_back(b);
    }
    const auto answer = servekit::plan_capacity(space, latency, load, target_ms);
    std::printf("tried %zu settings\n", answer.tried.size());
    out["tried"] = answer.tried.size();
    out["target_p99_ms"] = target_ms;
    if (answer.best) {
      std::printf("answer: %s\n  p99 %.2f ms (target %.2f), p50 %.2f ms, mean batch %.2f\n",
                  describe(answer.best->setting).c_str(), answer.best->p99_ms, target_ms,
                  answer.best->p50_ms, answer.best->mean_batch);
      put("best", *answer.best);
    } else {
      std::printf("answer: no setting within %zu replicas x %zu instances keeps p99 under "
                  "%.2f ms\n",
                  space.max_replicas, space.max_instances, target_ms);
      out["best"] = nullptr;
    }
  }
  if (json) {
    std::printf("%s\n", out.dump().c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "servekit-plan: %s\n", e.what());
  return 2;
}
