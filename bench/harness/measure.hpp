#pragma once
/// \file
/// The measurement loops the benchmarks share: order statistics, calls timed one at a time, the
/// condition_variable ping-pong (the floor for waking a sleeping thread), and closed-loop
/// clients that keep a window of requests in flight while a measured window passes.

#include "harness/machine.hpp"
#include "harness/report.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <thread>
#include <utility>
#include <vector>

namespace servekit_bench {

using bench_clock = std::chrono::steady_clock;

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

inline double seconds_between(bench_clock::time_point a, bench_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

inline double us_between(bench_clock::time_point a, bench_clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// -- calls one at a time --------------------------------------------------------------------------

/// Durations of calls made one after the other, in us, and how many answered wrong.
struct timed_calls {
  std::vector<double> us;
  std::uint64_t wrong = 0;
};

/// Makes `warmup + samples` calls `call(prepare(n))` (n counts from 0; `call` returns whether
/// the answer was right) and records the durations of the last `samples` calls; `prepare`'s
/// time is left out. With a `pause`, sleeps that long before each call, also left out.
template <class Prepare, class Call>
timed_calls time_prepared_calls(int warmup, int samples, Prepare&& prepare, Call&& call,
                                std::chrono::microseconds pause = {}) {
  timed_calls out;
  out.us.reserve(static_cast<std::size_t>(samples));
  for (int i = 0; i < warmup + samples; ++i) {
    if (pause != std::chrono::microseconds{}) {
      std::this_thread::sleep_for(pause);
    }
    auto argument = prepare(static_cast<std::uint64_t>(i));
    const auto t0 = bench_clock::now();
    const bool right = call(std::move(argument));
    const auto t1 = bench_clock::now();
    out.wrong += right ? 0U : 1U;
    if (i >= warmup) {
      out.us.push_back(us_between(t0, t1));
    }
  }
  return out;
}

/// time_prepared_calls with nothing to prepare: `call(n)`.
template <class Call>
timed_calls time_calls(int warmup, int samples, Call&& call, std::chrono::microseconds pause = {}) {
  return time_prepared_calls(
      warmup, samples, [](std::uint64_t n) { return n; }, call, pause);
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
      const auto t0 = bench_clock::now();
      {
        const std::lock_guard lock{m};
        turn = 1;
      }
      to_pong.notify_one();
      {
        std::unique_lock lock{m};
        to_ping.wait(lock, [&] { return turn == 0; });
      }
      const auto t1 = bench_clock::now();
      if (i >= warmup) {
        one_way.push_back(us_between(t0, t1) / 2.0);
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

/// Records the ping-pong figures and prints them: pingpong_us (wherever the kernel puts the two
/// threads), pingpong_pinned_us (both on CPU `first`) and, given a `second` CPU,
/// pingpong_cross_us (one thread on each).
inline void put_pingpong(report& figures, int rounds, std::size_t first,
                         std::optional<std::size_t> second = std::nullopt) {
  figures.put("pingpong_us", pingpong_us(rounds, std::nullopt));
  figures.put("pingpong_pinned_us", pingpong_us(rounds, std::pair{first, first}));
  if (second) {
    figures.put("pingpong_cross_us", pingpong_us(rounds, std::pair{first, *second}));
  }
  fmt::print("pingpong (condition_variable, one way, median): {:.1f} us; pinned to one CPU "
             "{:.1f} us{}\n",
             figures.get("pingpong_us"), figures.get("pingpong_pinned_us"),
             second
                 ? fmt::format("; pinned to two CPUs {:.1f} us", figures.get("pingpong_cross_us"))
                 : "");
}

// -- closed-loop clients --------------------------------------------------------------------------

/// A client thread's window of requests in flight: a semaphore of credits, taken before each
/// submit and given back by the response callback (what a client that bounds its requests in
/// flight writes with C++20). libstdc++'s release() enters the kernel only when the count was
/// 0, that is when the client may be asleep; a full window blocks the client in acquire().
struct window {
  explicit window(int depth) : credits{depth} {}

  /// From the response callback: counts the answer and gives back its credit.
  void answered(bool right) {
    if (!right) {
      wrong.fetch_add(1, std::memory_order_relaxed);
    }
    completed.fetch_add(1, std::memory_order_relaxed);
    credits.release();
  }

  std::counting_semaphore<> credits;
  alignas(64) std::atomic<std::uint64_t> completed{0}; // by the response callback
  std::atomic<std::uint64_t> wrong{0};
  alignas(64) std::atomic<std::uint64_t> rejected{0}; // written by the client
};

/// A model's batch counters at one moment (mean batch size = inferences / executions).
struct batch_counters {
  std::uint64_t inferences = 0;
  std::uint64_t executions = 0;
};

/// Reads `m`'s statistics (servekit::model, or anything with the same two counters).
template <class Model>
auto statistics_counters(const Model& m) {
  return [&m] {
    const auto s = m.statistics();
    return batch_counters{s.inference_count, s.execution_count};
  };
}

/// The measured window of a closed loop.
struct closed_loop_result {
  double rps = 0;
  double mean_batch = 0;
  double cpu_us_per_request = 0; ///< process CPU time (all threads) per completed request
  double switches_per_batch = 0; ///< context switches (all threads) per execution
  std::uint64_t wrong = 0;
  std::uint64_t rejected = 0;
};

/// Around the measured window, for figures of its own (see closed_loop).
struct no_window_hooks {
  void open() {}
  void close() {}
};

/// `clients` threads each keep `in_flight / clients` requests in flight: `submit(window&, n)`
/// submits a client's n-th request, whose response callback calls window::answered, and
/// returns whether it was accepted. After `warmup`, completions and `count()`'s batch counters
/// are measured over `length`; `hooks.open()` and `hooks.close()` run as the window opens and
/// closes.
template <class Submit, class Count, class Hooks = no_window_hooks>
closed_loop_result closed_loop(int clients, int in_flight, std::chrono::duration<double> warmup,
                               std::chrono::duration<double> length, Submit&& submit, Count&& count,
                               Hooks&& hooks = {}) {
  const int depth = in_flight / clients;
  std::vector<std::unique_ptr<window>> windows;
  for (int c = 0; c < clients; ++c) {
    windows.push_back(std::make_unique<window>(depth));
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, w = windows[static_cast<std::size_t>(c)].get()] {
      std::uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        w->credits.acquire();
        if (!submit(*w, n++).ok()) {
          w->credits.release();
          w->rejected.fetch_add(1, std::memory_order_relaxed);
        }
      }
      for (int i = 0; i < depth; ++i) {
        w->credits.acquire(); // every request answered
      }
    });
  }
  const auto completed = [&] {
    std::uint64_t total = 0;
    for (const auto& w : windows) {
      total += w->completed.load(std::memory_order_relaxed);
    }
    return total;
  };

  std::this_thread::sleep_for(warmup);
  hooks.open();
  const auto t0 = bench_clock::now();
  const std::uint64_t done0 = completed();
  const batch_counters c0 = count();
  const process_usage u0 = process_usage::now();
  std::this_thread::sleep_for(length);
  const auto t1 = bench_clock::now();
  const std::uint64_t done1 = completed();
  const batch_counters c1 = count();
  const process_usage u1 = process_usage::now();
  hooks.close();
  stop.store(true, std::memory_order_relaxed);
  for (auto& t : threads) {
    t.join();
  }

  closed_loop_result out;
  const auto requests = static_cast<double>(done1 - done0);
  const auto executions = static_cast<double>(c1.executions - c0.executions);
  out.rps = requests / seconds_between(t0, t1);
  out.mean_batch =
      executions == 0 ? 0.0 : static_cast<double>(c1.inferences - c0.inferences) / executions;
  out.cpu_us_per_request = requests == 0 ? 0.0 : (u1.cpu_s - u0.cpu_s) * 1e6 / requests;
  out.switches_per_batch = executions == 0 ? 0.0 : (u1.switches - u0.switches) / executions;
  for (const auto& w : windows) {
    out.wrong += w->wrong.load(std::memory_order_relaxed);
    out.rejected += w->rejected.load(std::memory_order_relaxed);
  }
  return out;
}

} // namespace servekit_bench
