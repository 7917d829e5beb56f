#pragma once
// The Azure LLM inference trace 2023 (conversation and code services; Patel et al.,
// "Splitwise: Efficient generative LLM inference using phase splitting", ISCA 2024; CC-BY 4.0)
// as the iteration benches replay it: arrivals and prompt and output lengths, or, where the
// files are absent (a user's machine), a synthetic workload with the trace's rate and length
// percentiles (log-normal lengths, Poisson arrivals), which says so.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace servekit_bench {

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
inline double seconds_of_day(const std::string& stamp) {
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
inline std::vector<trace_request> read_trace(const std::filesystem::path& file, double seconds) {
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
inline std::vector<trace_request> synthetic_trace(double seconds, double rate, double prompt_p50,
                                                  double prompt_p90, double prompt_max,
                                                  double out_p50, double out_p90, double out_max) {
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

inline workload load(const std::filesystem::path& folder, const std::string& which,
                     double seconds) {
  workload w;
  const bool conv = which == "conv";
  const std::filesystem::path file =
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

} // namespace servekit_bench
