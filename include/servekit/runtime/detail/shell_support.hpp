#pragma once
/// \file
/// Pieces both threaded shells share: counting submits in flight for shutdown, and the brief
/// spin an instance does before it sleeps.

#include <servekit/core/clock.hpp>
#include <servekit/runtime/detail/cpu_relax.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>

namespace servekit::detail {

/// Counts submits in progress so that shutdown can wait for them to finish their push.
class submit_guard {
public:
  explicit submit_guard(std::atomic<int>& n) noexcept : count_{n} {
    count_.fetch_add(1, std::memory_order_seq_cst);
  }
  ~submit_guard() { count_.fetch_sub(1, std::memory_order_release); }
  submit_guard(const submit_guard&) = delete;
  submit_guard& operator=(const submit_guard&) = delete;

private:
  std::atomic<int>& count_;
};

/// How long an instance that ran out of work watches for more before it sleeps.
inline constexpr duration spin_before_sleep = std::chrono::microseconds{20};

/// Before sleeping, watches `has_work()` for spin_before_sleep (or until `deadline`). Under load
/// the next request usually arrives within that window, and an instance that has not gone to
/// sleep costs its submitter no futex wake (a system call) and itself no context switch. True
/// when work showed up.
template <class HasWork>
[[nodiscard]] bool spin_for_work(time_point deadline, HasWork has_work) noexcept {
  return spin_until(std::min(clock::now() + spin_before_sleep, deadline), has_work);
}

/// `s` for a model of `instances` instances (cores that pin requests to instances need it).
[[nodiscard]] inline scheduler_settings with_instances(scheduler_settings s,
                                                       std::size_t instances) {
  s.instances = instances;
  return s;
}

} // namespace servekit::detail
