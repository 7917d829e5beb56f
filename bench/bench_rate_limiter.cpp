// bench_rate_limiter: what the rate limiter costs per execution, against a hand-written
// std::mutex + std::condition_variable counting semaphore of count 1 (the baseline) run in the
// same process.
//
//     bench_rate_limiter [--json] [--quick]
//
// - core_ns_per_decision: rate_limiter_core alone (virtual time, one thread): one release and
//   one request among 8 instances on one resource of count 1, so every release re-ranks the
//   7 waiters and grants one. No baseline (nothing hand-written ranks waiters).
// - uncontended_ns: servekit::rate_limiter acquire + release on one thread, the resource free
//   (a mutex and a scan; the cost every limited execution pays).
//   baseline_uncontended_ns: the same on the baseline semaphore: lock, check the count,
//   decrement, unlock; then lock, increment, notify, unlock.
//   uncontended_ratio = uncontended_ns / baseline_uncontended_ns (the median of the ratios of
//   runs taken in turn; above 1: the limiter costs more).
// - contended_executions_per_s: 4 threads of two models share a resource of count 1 and run
//   empty executions back to back. baseline_contended_executions_per_s: the same 4 threads on
//   the baseline semaphore. contended_ratio = contended_executions_per_s /
//   baseline_contended_executions_per_s (the median of the ratios of windows taken in turn).
//   Executions are not all hand-overs: a thread that finds nobody waiting takes the resource
//   again, and the baseline's releasing thread may take it back before the waiter it woke
//   runs, so these figures follow how the kernel schedules the threads (they swing by 10x or
//   more between runs on a loaded machine).
// - *_handovers_per_s: the executions whose thread differs from the previous execution's.
//   handoff_*: a third semaphore (fifo_semaphore) whose release hands the unit to the longest
//   waiter, as the limiter does. contended_handoff_ratio = contended_handovers_per_s /
//   handoff_contended_handovers_per_s: the like-for-like cost of passing the resource on.
// - overlaps: executions that found another one running (must be 0; exit status 1 otherwise).
//
// Prints human-readable lines; --json prints every figure as one JSON object on the last line.
// --quick: fewer rounds and shorter windows (the smoke test, about 2 s; a full run takes about
// 25 s). See docs/benchmarks.md, "Rate limiter".
#include "harness/command_line.hpp"
#include "harness/machine.hpp"
#include "harness/measure.hpp"
#include "harness/report.hpp"

#include <servekit/runtime/rate_limiter.hpp>
#include <servekit/schedule/rate_limiter_core.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using servekit_bench::bench_clock;

double seconds_since(bench_clock::time_point start) {
  return servekit_bench::seconds_between(start, bench_clock::now());
}

servekit::instance_group_options limited_group(std::int32_t count) {
  servekit::instance_group_options g;
  g.kind = servekit::instance_group_kind::kind_cpu;
  g.count = count;
  g.rate_limiter = servekit::rate_limiter_options{{{"R", false, 1}}, 1};
  return g;
}

/// The baseline: the counting semaphore a user writes first with std::mutex and
/// std::condition_variable. No ranking, no statistics, no clock.
class mutex_semaphore {
public:
  explicit mutex_semaphore(int count) : count_{count} {}

  void acquire() {
    std::unique_lock lock{mutex_};
    wake_.wait(lock, [&] { return count_ > 0; });
    --count_;
  }

  void release() {
    const std::lock_guard lock{mutex_};
    ++count_;
    wake_.notify_one();
  }

private:
  std::mutex mutex_;
  std::condition_variable wake_;
  int count_;
};

/// A second baseline for the contended case: the same semaphore, but release hands the unit to
/// the longest waiter (a FIFO of per-thread condition variables) instead of letting the
/// releasing thread take it back. What the limiter does, without ranking, clock or statistics.
class fifo_semaphore {
public:
  fifo_semaphore(int count, std::size_t threads) : waiters_(threads), count_{count} {}

  void acquire(std::size_t t) {
    std::unique_lock lock{mutex_};
    if (count_ > 0 && queue_.empty()) {
      --count_;
      return;
    }
    waiter& w = waiters_[t];
    w.granted = false;
    queue_.push_back(t);
    w.wake.wait(lock, [&] { return w.granted; });
  }

  void release() {
    const std::lock_guard lock{mutex_};
    if (queue_.empty()) {
      ++count_;
      return;
    }
    waiter& w = waiters_[queue_.front()];
    queue_.pop_front();
    w.granted = true;
    w.wake.notify_one();
  }

private:
  struct waiter {
    std::condition_variable wake;
    bool granted = false;
  };
  std::mutex mutex_;
  std::vector<waiter> waiters_;
  std::deque<std::size_t> queue_;
  int count_;
};

double core_ns_per_decision(std::uint64_t rounds) {
  servekit::rate_limiter_core core;
  const std::vector<servekit::rate_limited_instance> eight(
      8,
      servekit::rate_limited_instance{0, {{"R", false, 1}}, 1, "/instance_group/0/rate_limiter"});
  const auto ids = core.add(eight);
  servekit::time_point t{};
  std::size_t holder = ids[0];
  for (const auto id : ids) {
    if (core.request(id, t)) {
      holder = id;
    }
  }
  const auto start = bench_clock::now();
  for (std::uint64_t i = 0; i < rounds; ++i) {
    t += std::chrono::microseconds{1};
    const auto done = holder;
    const auto granted = core.release(done, t);
    holder = granted.empty() ? done : granted[0];
    if (core.request(done, t)) {
      holder = done;
    }
  }
  return seconds_since(start) * 1e9 / static_cast<double>(rounds);
}

/// servekit::rate_limiter with one model of `instances` instances, each holding R = 1 of 1.
struct limiter_setup {
  explicit limiter_setup(std::int32_t instances)
      : groups{servekit::resolve_instance_groups("m", {limited_group(instances)}, 1)},
        placements{servekit::expand_instance_groups(groups)} {}
  std::vector<servekit::instance_group_options> groups;
  std::vector<servekit::instance_placement> placements;
};

double uncontended_ns(std::uint64_t rounds) {
  servekit::rate_limiter limiter;
  const limiter_setup setup{1};
  const auto reg = limiter.register_model("m", setup.groups, setup.placements);
  const auto id = *reg.id(0);
  const auto start = bench_clock::now();
  for (std::uint64_t i = 0; i < rounds; ++i) {
    (void)limiter.acquire(id);
    limiter.release(id);
  }
  return seconds_since(start) * 1e9 / static_cast<double>(rounds);
}

double baseline_uncontended_ns(std::uint64_t rounds) {
  mutex_semaphore sem{1};
  const auto start = bench_clock::now();
  for (std::uint64_t i = 0; i < rounds; ++i) {
    sem.acquire();
    sem.release();
  }
  return seconds_since(start) * 1e9 / static_cast<double>(rounds);
}

struct contended_result {
  double executions_per_s = 0;
  double handovers_per_s = 0;
  std::uint64_t overlaps = 0;
};

/// Runs `threads` threads, thread t looping acquire(t); empty execution; release(t), for
/// `duration_s` seconds.
template <class Acquire, class Release>
contended_result contended(std::size_t threads, double duration_s, Acquire acquire,
                           Release release) {
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<int> inside{0};
  std::atomic<std::uint64_t> executions{0};
  std::atomic<std::uint64_t> handovers{0};
  std::atomic<std::uint64_t> overlaps{0};
  std::size_t holder = threads; // the thread of the last execution; guarded by the resource
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      while (!go.load(std::memory_order_acquire)) {
        std::this_thread::yield();
      }
      std::uint64_t mine = 0;
      std::uint64_t passed = 0;
      std::uint64_t overlapped = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        acquire(t);
        if (inside.fetch_add(1, std::memory_order_relaxed) != 0) {
          ++overlapped;
        }
        ++mine;
        if (holder != t) {
          holder = t;
          ++passed;
        }
        inside.fetch_sub(1, std::memory_order_relaxed);
        release(t);
      }
      executions += mine;
      handovers += passed;
      overlaps += overlapped;
    });
  }
  const auto start = bench_clock::now();
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(duration_s));
  stop = true;
  for (auto& w : workers) {
    w.join();
  }
  const double elapsed = seconds_since(start);
  return {static_cast<double>(executions.load()) / elapsed,
          static_cast<double>(handovers.load()) / elapsed, overlaps.load()};
}

/// 4 threads: two models of two instances each, one resource R of count 1.
contended_result contended_limiter(double duration_s) {
  servekit::rate_limiter limiter;
  const limiter_setup setup{2};
  const auto a = limiter.register_model("a", setup.groups, setup.placements);
  const auto b = limiter.register_model("b", setup.groups, setup.placements);
  const std::vector<servekit::rate_limiter::instance_id> ids{*a.id(0), *a.id(1), *b.id(0),
                                                             *b.id(1)};
  return contended(
      ids.size(), duration_s, [&](std::size_t t) { (void)limiter.acquire(ids[t]); },
      [&](std::size_t t) { limiter.release(ids[t]); });
}

contended_result contended_baseline(double duration_s) {
  mutex_semaphore sem{1};
  return contended(
      4, duration_s, [&](std::size_t) { sem.acquire(); }, [&](std::size_t) { sem.release(); });
}

contended_result contended_fifo(double duration_s) {
  fifo_semaphore sem{1, 4};
  return contended(
      4, duration_s, [&](std::size_t t) { sem.acquire(t); }, [&](std::size_t) { sem.release(); });
}

} // namespace

int main(int argc, char** argv) {
  bool json = false;
  bool quick = false;
  servekit_bench::command_line{"bench_rate_limiter"}
      .json(json)
      .quick(quick, "fewer rounds and shorter windows (the smoke test, about 2 s)")
      .parse(argc, argv);
  // Each comparison runs servekit and the baseline in turn, `runs` times, so that both see
  // the same machine; the figures are medians, the ratios the medians of each turn's ratio.
  const int runs = quick ? 3 : 7;
  const std::uint64_t core_rounds = quick ? 200'000 : 2'000'000;
  const std::uint64_t rounds = quick ? 100'000 : 1'000'000;
  const double window_s = quick ? 0.2 : 1.0;

  const servekit_bench::machine host;
  std::printf("bench_rate_limiter  cpu: %s  nproc: %u  load: %.2f%s\n", host.cpu.c_str(),
              host.nproc, host.load, quick ? "  (quick)" : "");

  const double core_ns = core_ns_per_decision(core_rounds);

  std::vector<double> free_ns;
  std::vector<double> base_free_ns;
  std::vector<double> free_ratio;
  (void)uncontended_ns(rounds / 10); // warm up: page in, settle the frequency
  (void)baseline_uncontended_ns(rounds / 10);
  for (int r = 0; r < runs; ++r) {
    free_ns.push_back(uncontended_ns(rounds));
    base_free_ns.push_back(baseline_uncontended_ns(rounds));
    free_ratio.push_back(servekit_bench::ratio_of(free_ns.back(), base_free_ns.back()));
  }

  std::vector<double> exec;
  std::vector<double> base_exec;
  std::vector<double> fifo_exec;
  std::vector<double> hand;
  std::vector<double> base_hand;
  std::vector<double> fifo_hand;
  std::vector<double> exec_ratio;
  std::vector<double> fifo_ratio;
  std::uint64_t overlaps = 0;
  for (int r = 0; r < runs; ++r) {
    const contended_result s = contended_limiter(window_s);
    const contended_result b = contended_baseline(window_s);
    const contended_result f = contended_fifo(window_s);
    exec.push_back(s.executions_per_s);
    base_exec.push_back(b.executions_per_s);
    fifo_exec.push_back(f.executions_per_s);
    hand.push_back(s.handovers_per_s);
    base_hand.push_back(b.handovers_per_s);
    fifo_hand.push_back(f.handovers_per_s);
    exec_ratio.push_back(servekit_bench::ratio_of(s.executions_per_s, b.executions_per_s));
    fifo_ratio.push_back(servekit_bench::ratio_of(s.handovers_per_s, f.handovers_per_s));
    overlaps += s.overlaps + b.overlaps + f.overlaps;
  }

  using servekit_bench::median;
  servekit_bench::report figures;
  const struct {
    const char* name;
    double value;
    const char* what;
  } rows[] = {
      {"core_ns_per_decision", core_ns, "ns, core: release + request, 8 instances, 1 unit"},
      {"uncontended_ns", median(free_ns), "ns, rate_limiter acquire + release, resource free"},
      {"baseline_uncontended_ns", median(base_free_ns), "ns, mutex semaphore, the same"},
      {"uncontended_ratio", median(free_ratio), "rate_limiter / baseline, ns (above 1: slower)"},
      {"contended_executions_per_s", median(exec), "rate_limiter, 4 threads, 2 models, 1 unit"},
      {"baseline_contended_executions_per_s", median(base_exec), "mutex semaphore, 4 threads"},
      {"contended_ratio", median(exec_ratio), "rate_limiter / baseline, executions/s"},
      {"contended_handovers_per_s", median(hand), "rate_limiter, executions on a new thread"},
      {"baseline_contended_handovers_per_s", median(base_hand), "mutex semaphore, the same"},
      {"handoff_contended_executions_per_s", median(fifo_exec), "hand-off semaphore, 4 threads"},
      {"handoff_contended_handovers_per_s", median(fifo_hand), "hand-off semaphore, new thread"},
      {"contended_handoff_ratio", median(fifo_ratio), "rate_limiter / hand-off, hand-overs/s"},
      {"overlaps", static_cast<double>(overlaps), "executions that overlapped (must be 0)"},
  };
  for (const auto& r : rows) {
    figures.row(r.name, r.value, r.what);
  }
  if (json) {
    figures.integer("runs", runs);
    figures.number("load_average", servekit_bench::load_average(), "{:.2f}");
    figures.boolean("quick", quick);
    figures.print_json();
  }
  return overlaps == 0 ? 0 : 1;
}
