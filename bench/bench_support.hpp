#pragma once
// What servekit's load generators share: order statistics, the machine's description and
// command-line lists.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace bench_support {

/// The value below which a fraction `p` of `v` lies (nearest rank); 0 for no values.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0.0;
  }
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

/// The median (the mean of the two middle values for an even count); 0 for no values.
inline double median(std::vector<double> v) {
  if (v.empty()) {
    return 0.0;
  }
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/// The 1-minute load average: how busy the (shared) machine was when the run started.
inline double load_average() {
  double load = -1.0;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) {
      load = -1.0;
    }
    std::fclose(f);
  }
  return load;
}

/// The CPU's model name from /proc/cpuinfo, or "unknown".
inline std::string cpu_model() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) {
    return "unknown";
  }
  std::array<char, 512> line{};
  std::string out = "unknown";
  while (std::fgets(line.data(), static_cast<int>(line.size()), f) != nullptr) {
    const std::string_view l{line.data()};
    if (l.starts_with("model name")) {
      const auto colon = l.find(':');
      out = std::string{l.substr(colon + 2)};
      while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) {
        out.pop_back();
      }
      break;
    }
  }
  std::fclose(f);
  return out;
}

/// Adds the names of a comma-separated list ("direct,oldest") to the set `out`.
template <class Set>
void add_names(const std::string& list, Set& out) {
  std::size_t from = 0;
  while (from <= list.size()) {
    const std::size_t comma = std::min(list.find(',', from), list.size());
    out.insert(list.substr(from, comma - from));
    from = comma + 1;
  }
}

} // namespace bench_support
