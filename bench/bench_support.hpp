#pragma once
// What servekit's load generators share: order statistics, the machine's description and
// command-line lists.

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
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

/// Restricts `thread` to one CPU. Threads it creates afterwards inherit the restriction, which
/// is how the runs below place a model's instance thread (created by the model's constructor).
inline bool pin(pthread_t thread, std::size_t cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(thread, sizeof(set), &set) != 0) {
    std::fprintf(stderr, "bench: pthread_setaffinity_np(%zu) failed\n", cpu);
    return false;
  }
  return true;
}

/// Median one-way hand-off between two threads that sleep in the kernel until woken (mutex +
/// condition_variable, no spinning): where the kernel puts them, both on CPU `a` (a == b), or on
/// CPUs `a` and `b`.
inline double pingpong_us(int rounds, std::optional<std::pair<std::size_t, std::size_t>> cpus) {
  std::mutex m;
  std::condition_variable to_pong;
  std::condition_variable to_ping;
  int turn = 0; // 0: ping's move, 1: pong's move; guarded by m
  bool stop = false;
  std::vector<double> one_way;
  one_way.reserve(static_cast<std::size_t>(rounds));
  std::atomic<bool> go{false};

  std::thread pong{[&] {
    while (!go.load(std::memory_order_acquire)) {
      std::this_thread::yield();
    }
    std::unique_lock lock{m};
    for (;;) {
      to_pong.wait(lock, [&] { return turn == 1 || stop; });
      if (stop) {
        return;
      }
      turn = 0;
      lock.unlock();
      to_ping.notify_one();
      lock.lock();
    }
  }};
  std::thread ping{[&] {
    while (!go.load(std::memory_order_acquire)) {
      std::this_thread::yield();
    }
    const int warmup = rounds / 10;
    for (int i = 0; i < warmup + rounds; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      {
        const std::lock_guard lock{m};
        turn = 1;
      }
      to_pong.notify_one();
      {
        std::unique_lock lock{m};
        to_ping.wait(lock, [&] { return turn == 0; });
      }
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= warmup) {
        one_way.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 2.0);
      }
    }
    {
      const std::lock_guard lock{m};
      stop = true;
    }
    to_pong.notify_one();
  }};
  if (cpus) {
    pin(ping.native_handle(), cpus->first);
    pin(pong.native_handle(), cpus->second);
  }
  go.store(true, std::memory_order_release);
  ping.join();
  pong.join();
  return percentile(one_way, 0.5);
}

} // namespace bench_support
