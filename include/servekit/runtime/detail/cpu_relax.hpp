#pragma once
/// \file
/// cpu_relax, the pause hint, and spin_until, the spin-wait loop built on it (an instance
/// watching for work, a synchronous caller watching for its response).

#include <servekit/core/clock.hpp>

#include <thread>

namespace servekit::detail {

/// Tells the CPU this is a spin-wait iteration (x86 `pause`, Arm `yield`): it saves power and
/// frees the core's pipeline for its sibling hyper-thread. A no-op elsewhere.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#endif
}

/// Watches `done()` until it is true (returns true) or `until` has passed (returns false).
/// Pauses first; then yields, so that a thread sharing this CPU gets to run (on a machine with
/// fewer cores than threads it may be the one that makes `done()` true).
template <class Done>
[[nodiscard]] bool spin_until(time_point until, Done done) noexcept(noexcept(done())) {
  for (unsigned i = 1;; ++i) {
    if (done()) {
      return true;
    }
    if (i < 32) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
    if (i % 8 == 0 && clock::now() >= until) {
      return false;
    }
  }
}

} // namespace servekit::detail
