#pragma once
/// \file
/// The machine a benchmark runs on: its description (the figures are only comparable with
/// it), the CPUs a thread may use, and the process's CPU time.

#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include <array>
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace servekit_bench {

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

/// What a run's figures depend on, read once when it starts.
struct machine {
  unsigned nproc = std::thread::hardware_concurrency();
  std::string cpu = cpu_model();
  double load = load_average();
};

/// The CPUs this process may run on (CPU 0 if the query fails).
inline std::vector<std::size_t> allowed_cpus() {
  std::vector<std::size_t> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (std::size_t cpu = 0; cpu < std::size_t{CPU_SETSIZE}; ++cpu) {
      if (CPU_ISSET(cpu, &set)) {
        cpus.push_back(cpu);
      }
    }
  }
  if (cpus.empty()) {
    cpus.push_back(0);
  }
  return cpus;
}

/// Restricts `thread` to one CPU. Threads it creates afterwards inherit the restriction, which
/// is how a benchmark places a model's instance thread (created by the model's constructor).
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

/// For a backend that models a kernel's duration by sleeping, which wants its sleeps exact:
/// Linux rounds a thread's timed sleeps up by its timer slack (50 us by default). execute
/// always runs on the instance's own thread, so calling this there once per thread is enough.
inline void precise_sleeps() {
#if defined(__linux__)
  thread_local const bool set = ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
  static_cast<void>(set);
#endif
}

/// CPU time and context switches of the whole process (every thread) so far.
struct process_usage {
  double cpu_s = 0;
  double switches = 0; ///< voluntary (went to sleep) + involuntary (preempted)

  static process_usage now() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    const auto tv = [](const timeval& t) {
      return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
    };
    return {tv(u.ru_utime) + tv(u.ru_stime), static_cast<double>(u.ru_nvcsw + u.ru_nivcsw)};
  }
};

} // namespace servekit_bench
