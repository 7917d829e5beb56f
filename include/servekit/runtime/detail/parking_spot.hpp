#pragma once
/// \file
/// parking_spot: sleep in the kernel until woken or until a deadline, without a mutex.

#include <servekit/core/clock.hpp>

#include <atomic>
#include <cstdint>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#else
#include <condition_variable>
#include <mutex>
#endif

namespace servekit::detail {

/// An epoch counter threads sleep on. A sleeper reads `epoch()`, re-checks its condition, then
/// calls `wait(seen, deadline)`, which returns at once if a waker bumped the epoch in between:
/// no wake-up is lost and no lock is taken on the waking side. On Linux this is a futex
/// (FUTEX_WAIT_BITSET with an absolute CLOCK_MONOTONIC deadline, which is steady_clock's clock);
/// elsewhere a mutex and condition variable stand in.
class parking_spot {
public:
  [[nodiscard]] std::uint32_t epoch() const noexcept {
    return word_.load(std::memory_order_seq_cst);
  }

  /// Sleeps while the epoch is still `seen`, until `deadline` at the latest (never: no limit).
  /// May return early (spuriously); callers re-check.
  void wait(std::uint32_t seen, time_point deadline) noexcept {
#if defined(__linux__)
    if (deadline == never) {
      futex(FUTEX_WAIT_BITSET_PRIVATE, seen, nullptr);
      return;
    }
    const auto since_epoch = deadline.time_since_epoch();
    if (since_epoch.count() <= 0) {
      return;
    }
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(secs.count());
    ts.tv_nsec = static_cast<long>((since_epoch - secs).count());
    futex(FUTEX_WAIT_BITSET_PRIVATE, seen, &ts);
#else
    std::unique_lock lock{mutex_};
    const auto changed = [&] { return word_.load(std::memory_order_seq_cst) != seen; };
    if (deadline == never) {
      cv_.wait(lock, changed);
    } else {
      cv_.wait_until(lock, deadline, changed);
    }
#endif
  }

  /// Bumps the epoch and wakes one sleeper.
  void wake_one() noexcept {
    word_.fetch_add(1, std::memory_order_seq_cst);
#if defined(__linux__)
    futex(FUTEX_WAKE_PRIVATE, 1, nullptr);
#else
    { std::lock_guard lock{mutex_}; }
    cv_.notify_one();
#endif
  }

  /// Bumps the epoch and wakes every sleeper.
  void wake_all() noexcept {
    word_.fetch_add(1, std::memory_order_seq_cst);
#if defined(__linux__)
    futex(FUTEX_WAKE_PRIVATE, 0x7fffffff, nullptr);
#else
    { std::lock_guard lock{mutex_}; }
    cv_.notify_all();
#endif
  }

private:
#if defined(__linux__)
  long futex(int op, std::uint32_t value, const timespec* abs_time) noexcept {
    const int saved = errno;
    const long rc = ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word_), op, value,
                              abs_time, nullptr, FUTEX_BITSET_MATCH_ANY);
    errno = saved;
    return rc;
  }
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
#else
  std::mutex mutex_;
  std::condition_variable cv_;
#endif
  std::atomic<std::uint32_t> word_{0};
};

} // namespace servekit::detail
