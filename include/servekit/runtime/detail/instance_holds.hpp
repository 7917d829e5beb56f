#pragma once
/// \file
/// instance_holds: who may execute on each instance of a threaded shell right now (its own
/// thread, or a synchronous caller of submit_here), one batch at a time.

#include <servekit/runtime/detail/cpu_relax.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

namespace servekit::detail {

/// Whoever executes on an instance holds it: its own thread from the batch it forms until it
/// runs out of work, or a submit_here caller for one batch. Holding is a state per instance taken
/// with a compare-exchange (acquire) and given back with a release store, so an execute on one
/// thread happens before the next on another, and the backend still sees one batch at a time.
/// The shell's order is always "hold the instance, then take the core's lock"; nobody waits for
/// an instance while holding that lock.
///
/// A holder is `looking` while it takes the core's lock and asks for a batch, then `executing`.
/// An instance that is only looking is not busy: try_hold_free waits while one is looking (a
/// short, lock-bounded step), so that "an instance is free" means "no instance is executing",
/// whatever the instances' threads happen to be doing.
class instance_holds {
public:
  enum state : std::uint32_t { free_to_hold = 0, looking = 1, executing = 2 };

  explicit instance_holds(std::size_t instances)
      : slots_{std::make_unique<slot[]>(instances)}, count_{instances} {}

  /// Holds `index` if it is free (then looking); `seen` gets the state found.
  [[nodiscard]] bool try_hold(std::size_t index, std::uint32_t& seen) noexcept {
    std::atomic<std::uint32_t>& s = slots_[index].held;
    seen = s.load(std::memory_order_relaxed);
    return seen == free_to_hold &&
           s.compare_exchange_strong(seen, looking, std::memory_order_acquire,
                                     std::memory_order_relaxed);
  }

  /// The instance's own thread before it forms a batch: holds `index`, calling `held_by_other()`
  /// each time someone else holds it and then waiting for them to let go.
  template <class HeldByOther>
  void hold(std::size_t index, HeldByOther held_by_other) noexcept {
    std::uint32_t seen = free_to_hold;
    while (!try_hold(index, seen)) {
      held_by_other();
      if (seen != free_to_hold) {
        slots_[index].held.wait(seen, std::memory_order_acquire); // let_go notifies
      }
    }
  }

  /// A free instance, now held (looking) by this thread; none if every instance is executing.
  [[nodiscard]] std::optional<std::size_t> try_hold_free() noexcept {
    for (unsigned round = 1;; ++round) {
      bool all_executing = true;
      for (std::size_t i = 0; i < count_; ++i) {
        std::uint32_t seen = free_to_hold;
        if (try_hold(i, seen)) {
          return i;
        }
        // Free a moment ago, or looking: worth another look. Only executing is busy.
        all_executing = all_executing && seen == executing;
      }
      if (all_executing) {
        return std::nullopt;
      }
      if (round < 32) {
        cpu_relax();
      } else {
        std::this_thread::yield(); // the looker may need this CPU to finish
      }
    }
  }

  /// The holder of `index` says what it is doing (only the holder writes while it holds).
  void mark(std::size_t index, state s) noexcept {
    slots_[index].held.store(s, std::memory_order_relaxed);
  }

  void let_go(std::size_t index) noexcept {
    slots_[index].held.store(free_to_hold, std::memory_order_release);
    slots_[index].held.notify_one(); // the instance's thread, if it waits in hold()
  }

private:
  struct slot {
    alignas(64) std::atomic<std::uint32_t> held{free_to_hold};
  };
  std::unique_ptr<slot[]> slots_;
  std::size_t count_;
};

} // namespace servekit::detail
