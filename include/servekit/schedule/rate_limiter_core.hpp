#pragma once
/// \file
/// The rate limiter's decisions as a pure core: which waiting instances may execute, given the
/// resources they hold and need. No locks, no clock: the caller passes the time.

#include <servekit/core/assert.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit {

/// A server-wide count of a resource (Triton's `--rate-limit-resource name:count[:device]`).
/// Without a device it applies to every device's pool, and to the global pool of a resource
/// that models declare `global`; a device-specific count takes precedence on its device.
struct rate_limit_resource_count {
  std::string name;
  std::uint32_t count = 0;
  std::optional<int> device;
  friend bool operator==(const rate_limit_resource_count&,
                         const rate_limit_resource_count&) = default;
};

/// How long back-filling may pass over a waiting instance. servekit grants the best-ranked
/// waiting instance whose resources are free, so a small execution need not wait behind a large
/// one (Triton tries only the head of its queue). A waiter that has been passed over
/// `max_passes` times, or has waited `max_wait`, reserves its resources: nothing ranked behind
/// it that needs one of them is granted before it. `max_passes = 0` reserves at once, which is
/// Triton's head-of-line behaviour per resource.
struct rate_limiter_aging {
  std::uint32_t max_passes = 8;
  duration max_wait = std::chrono::milliseconds{100};
  friend bool operator==(const rate_limiter_aging&, const rate_limiter_aging&) = default;
};

/// One resource an instance holds while it executes (Triton's ModelRateLimiter.Resource).
struct rate_limited_resource {
  std::string name;
  bool global = false; ///< one pool for all devices, else one pool per device
  std::uint32_t count = 0;
  friend bool operator==(const rate_limited_resource&, const rate_limited_resource&) = default;
};

/// What the core needs to know of one instance.
struct rate_limited_instance {
  int device = 0; ///< the pool of its non-global resources (CPU instances: device 0, as Triton)
  std::vector<rate_limited_resource> resources;
  std::uint32_t priority = 1; ///< 0 counts as 1
  /// JSON pointer of the group's `rate_limiter` ("/instance_group/0/rate_limiter"), for errors.
  std::string path;
};

/// Triton's `--rate-limit execution_count`, with back-filling:
///
/// - Resources live in pools: one per (name, device), or one per name for `global` ones. A pool
///   holds the server-wide count given for it, else the most any registered instance needs.
/// - `request` asks for an execution; `release` ends it. Waiting instances are ranked by
///   executions so far × max(priority, 1), smallest first (ties: longest waiting first), so an
///   instance of priority 2 gets about half the executions of one of priority 1 when they
///   compete.
/// - On every release the waiters are tried in rank order and each one whose resources are all
///   free is granted (back-filling), except that a waiter passed over too often or too long
///   (rate_limiter_aging) reserves its resources against the waiters ranked behind it.
///
/// An instance executes once at a time: it may request only when it neither waits nor holds.
class rate_limiter_core {
public:
  using instance_id = std::size_t;

  explicit rate_limiter_core(std::vector<rate_limit_resource_count> counts = {},
                             rate_limiter_aging aging = {})
      : counts_{std::move(counts)}, aging_{aging} {}

  /// Registers the instances of one model, all or none. Throws config_error (path: the
  /// instance's `path` + "/resources/<k>[/count]") when a server-wide count is below what an
  /// instance needs, or a resource is both global and per device.
  [[nodiscard]] SERVEKIT_DECL std::vector<instance_id>
  add(std::span<const rate_limited_instance> instances);

  /// Unregisters instances; a waiting or holding one gives up first. Returns the instances
  /// granted as a result (their reservations or resources are gone).
  SERVEKIT_DECL std::span<const instance_id> remove(std::span<const instance_id> ids,
                                                    time_point now);

  /// Instance `id` wants to execute. True: granted now (its resources are taken). False: it
  /// waits until a later `release`, `withdraw` or `remove` returns it. A request can grant only
  /// `id`: nothing else became free.
  bool request(instance_id id, time_point now) {
    auto& s = slots_[id];
    SERVEKIT_ASSERT(s.current == phase::idle,
                    "rate_limiter_core::request: the instance already waits or executes");
    if (waiting_.empty() && fits(s)) { // nobody to rank against or reserving: take it
      take(s);
      return true;
    }
    s.current = phase::waiting;
    s.since = now;
    s.passes = 0;
    s.arrival = next_arrival_++;
    waiting_.push_back(id);
    const auto granted = scan(now);
    return std::find(granted.begin(), granted.end(), id) != granted.end();
  }

  /// Instance `id` finished executing: its resources return to their pools. Returns the waiting
  /// instances granted as a result, valid until the next call.
  std::span<const instance_id> release(instance_id id, time_point now) {
    SERVEKIT_ASSERT(slots_[id].current == phase::holding,
                    "rate_limiter_core::release: the instance does not execute");
    give_back(slots_[id]);
    slots_[id].current = phase::idle;
    return scan(now);
  }

  /// A waiting instance gives up (e.g. its model stops). Returns the instances granted as a
  /// result (its reservation is lifted).
  std::span<const instance_id> withdraw(instance_id id, time_point now) {
    auto& s = slots_[id];
    if (s.current == phase::waiting) {
      s.current = phase::idle;
      std::erase(waiting_, id);
    }
    return scan(now);
  }

  [[nodiscard]] bool waiting(instance_id id) const { return slots_[id].current == phase::waiting; }
  [[nodiscard]] bool holding(instance_id id) const { return slots_[id].current == phase::holding; }
  /// Executions granted to `id` since it was registered.
  [[nodiscard]] std::uint64_t executions(instance_id id) const { return slots_[id].granted; }

  /// The count of a pool (device: nullopt for the global pool of `name`); 0 when no registered
  /// instance uses it.
  [[nodiscard]] std::uint32_t pool_count(std::string_view name, std::optional<int> device) const {
    for (const auto& p : pools_) {
      if (p.name == name && p.global == !device && (!device || p.device == *device)) {
        return p.count;
      }
    }
    return 0;
  }

  /// Resources of a pool in use now (same addressing as pool_count).
  [[nodiscard]] std::uint32_t pool_in_use(std::string_view name, std::optional<int> device) const {
    for (const auto& p : pools_) {
      if (p.name == name && p.global == !device && (!device || p.device == *device)) {
        return p.in_use;
      }
    }
    return 0;
  }

private:
  enum class phase : std::uint8_t { unused, idle, waiting, holding };

  struct pool {
    std::string name;
    bool global = false;
    int device = 0;
    std::uint32_t count = 0;
    std::uint32_t in_use = 0;
  };
  struct need {
    std::size_t pool = 0;
    std::uint32_t count = 0;
  };
  struct slot {
    phase current = phase::unused;
    std::vector<need> needs;
    std::uint64_t priority = 1;
    std::uint64_t executions = 0; ///< for ranking: granted + where it started (lowest_rank)
    std::uint64_t granted = 0;
    std::uint64_t arrival = 0; ///< order of the current request, for ties
    std::uint32_t passes = 0;  ///< grants to waiters ranked behind it during the current wait
    time_point since{};        ///< start of the current wait
  };

  SERVEKIT_DECL static std::string resource_path(const rate_limited_instance& in, std::size_t k);

  // Triton refuses a name used both as a global and as a per-device resource, across models.
  SERVEKIT_DECL void check_global_agreement(std::span<const rate_limited_instance> instances) const;

  SERVEKIT_DECL std::size_t find_pool(const rate_limited_resource& r, int device);

  // The smallest rank (executions x priority) of the registered instances, 0 when none.
  [[nodiscard]] std::uint64_t lowest_rank() const {
    std::optional<std::uint64_t> lowest;
    for (const auto& s : slots_) {
      if (s.current != phase::unused) {
        lowest = std::min(lowest.value_or(s.executions * s.priority), s.executions * s.priority);
      }
    }
    return lowest.value_or(0);
  }

  // A new instance starts ranked with the lowest registered one (`rank`), not at 0 executions:
  // otherwise a model loaded into a busy server would win every contention until its count
  // caught up with models that have run for hours.
  SERVEKIT_DECL instance_id insert(const rate_limited_instance& in, std::uint64_t rank);

  // The server-wide count for a pool, if one was given.
  [[nodiscard]] std::optional<std::uint32_t> explicit_count(const pool& p) const {
    std::optional<std::uint32_t> any_device;
    for (const auto& c : counts_) {
      if (c.name != p.name) {
        continue;
      }
      if (!c.device) {
        any_device = c.count;
      } else if (!p.global && *c.device == p.device) {
        return c.count;
      } else if (p.global && !any_device) {
        any_device = c.count; // Triton ignores the device of a global resource's count
      }
    }
    return any_device;
  }

  // Sets every pool's count from the server-wide counts and the registered needs. `added`
  // (with their `ids`) are checked against the server-wide counts.
  SERVEKIT_DECL void recount(std::span<const rate_limited_instance> added,
                             std::span<const instance_id> ids);

  void take(slot& s) {
    for (const auto& n : s.needs) {
      pools_[n.pool].in_use += n.count;
    }
    s.current = phase::holding;
    ++s.executions;
    ++s.granted;
  }

  void give_back(slot& s) {
    for (const auto& n : s.needs) {
      pools_[n.pool].in_use -= n.count;
    }
  }

  [[nodiscard]] bool fits(const slot& s) const {
    return std::all_of(s.needs.begin(), s.needs.end(), [&](const need& n) {
      const auto& p = pools_[n.pool];
      return p.in_use + n.count <= p.count;
    });
  }

  [[nodiscard]] bool reserving(const slot& s, time_point now) const {
    return s.passes >= aging_.max_passes || now - s.since >= aging_.max_wait;
  }

  // Grants, in rank order, every waiter whose resources are free and not reserved by a waiter
  // ranked before it.
  SERVEKIT_DECL std::span<const instance_id> scan(time_point now);

  std::vector<rate_limit_resource_count> counts_;
  rate_limiter_aging aging_;
  std::vector<pool> pools_;
  std::vector<slot> slots_;
  std::vector<instance_id> free_;
  std::vector<instance_id> waiting_;
  std::uint64_t next_arrival_ = 0;
  // Scratch space of scan(), kept to avoid allocating per release.
  std::vector<instance_id> granted_;
  std::vector<bool> reserved_;
  std::vector<instance_id> passed_;
};

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/schedule/impl/rate_limiter_core.ipp>
#endif
