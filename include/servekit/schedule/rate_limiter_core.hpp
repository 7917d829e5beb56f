#pragma once
/// \file
/// The rate limiter's decisions as a pure core: which waiting instances may execute, given the
/// resources they hold and need. No locks, no clock: the caller passes the time.

#include <servekit/core/assert.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/config_error.hpp>

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
  [[nodiscard]] std::vector<instance_id> add(std::span<const rate_limited_instance> instances) {
    check_global_agreement(instances);
    std::vector<instance_id> ids;
    ids.reserve(instances.size());
    const auto start = lowest_rank();
    try {
      for (const auto& in : instances) {
        ids.push_back(insert(in, start));
      }
      recount(instances, ids);
    } catch (...) {
      for (const auto id : ids) {
        slots_[id] = {};
        free_.push_back(id);
      }
      recount({}, {});
      throw;
    }
    return ids;
  }

  /// Unregisters instances; a waiting or holding one gives up first. Returns the instances
  /// granted as a result (their reservations or resources are gone).
  std::span<const instance_id> remove(std::span<const instance_id> ids, time_point now) {
    for (const auto id : ids) {
      auto& s = slots_[id];
      if (s.current == phase::holding) {
        give_back(s);
      } else if (s.current == phase::waiting) {
        std::erase(waiting_, id);
      }
      s = {};
      free_.push_back(id);
    }
    recount({}, {});
    return scan(now);
  }

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

  static std::string resource_path(const rate_limited_instance& in, std::size_t k) {
    return in.path + "/resources/" + std::to_string(k);
  }

  // Triton refuses a name used both as a global and as a per-device resource, across models.
  void check_global_agreement(std::span<const rate_limited_instance> instances) const {
    for (const auto& in : instances) {
      for (std::size_t k = 0; k < in.resources.size(); ++k) {
        const auto& r = in.resources[k];
        const auto clash = [&](const std::string& name, bool global) {
          return name == r.name && global != r.global;
        };
        bool conflict = std::any_of(pools_.begin(), pools_.end(), [&](const pool& p) {
          return p.count > 0 && clash(p.name, p.global);
        });
        for (const auto& other : instances) {
          for (const auto& o : other.resources) {
            conflict = conflict || clash(o.name, o.global);
          }
        }
        if (conflict) {
          throw config_error(config_error_code::bad_value, resource_path(in, k) + "/global",
                             "Resource \"" + r.name +
                                 "\" is present as both global and device-specific resource in "
                                 "the model configuration.");
        }
      }
    }
  }

  std::size_t find_pool(const rate_limited_resource& r, int device) {
    for (std::size_t i = 0; i < pools_.size(); ++i) {
      const auto& p = pools_[i];
      if (p.name == r.name && p.global == r.global && (r.global || p.device == device)) {
        return i;
      }
    }
    pools_.push_back({r.name, r.global, r.global ? 0 : device, 0, 0});
    return pools_.size() - 1;
  }

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
  instance_id insert(const rate_limited_instance& in, std::uint64_t rank) {
    slot s;
    s.current = phase::idle;
    s.priority = std::max<std::uint64_t>(in.priority, 1);
    s.executions = rank / s.priority;
    for (const auto& r : in.resources) {
      const auto p = find_pool(r, in.device);
      // The same resource named twice adds up.
      auto it =
          std::find_if(s.needs.begin(), s.needs.end(), [&](const need& n) { return n.pool == p; });
      if (it == s.needs.end()) {
        s.needs.push_back({p, r.count});
      } else {
        it->count += r.count;
      }
    }
    if (!free_.empty()) {
      const auto id = free_.back();
      free_.pop_back();
      slots_[id] = s;
      return id;
    }
    slots_.push_back(s);
    return slots_.size() - 1;
  }

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
  void recount(std::span<const rate_limited_instance> added, std::span<const instance_id> ids) {
    std::vector<std::uint32_t> most(pools_.size(), 0);
    for (const auto& s : slots_) {
      if (s.current == phase::unused) {
        continue;
      }
      for (const auto& n : s.needs) {
        most[n.pool] = std::max(most[n.pool], n.count);
      }
    }
    for (std::size_t i = 0; i < added.size(); ++i) {
      for (std::size_t k = 0; k < added[i].resources.size(); ++k) {
        const auto& n = *std::find_if(
            slots_[ids[i]].needs.begin(), slots_[ids[i]].needs.end(),
            [&](const need& x) { return pools_[x.pool].name == added[i].resources[k].name; });
        const auto limit = explicit_count(pools_[n.pool]);
        if (limit && *limit < n.count) {
          throw config_error(config_error_code::bad_value, resource_path(added[i], k) + "/count",
                             "Resource count for \"" + pools_[n.pool].name + "\" is limited to " +
                                 std::to_string(*limit) +
                                 " which will prevent scheduling of one or more model "
                                 "instances, the minimum required count is " +
                                 std::to_string(n.count));
        }
      }
    }
    for (std::size_t p = 0; p < pools_.size(); ++p) {
      pools_[p].count = most[p] == 0 ? 0 : explicit_count(pools_[p]).value_or(most[p]);
    }
  }

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
  std::span<const instance_id> scan(time_point now) {
    granted_.clear();
    if (waiting_.empty()) {
      return granted_;
    }
    std::sort(waiting_.begin(), waiting_.end(), [&](instance_id a, instance_id b) {
      const auto& x = slots_[a];
      const auto& y = slots_[b];
      const auto rx = x.executions * x.priority;
      const auto ry = y.executions * y.priority;
      return rx != ry ? rx < ry : x.arrival < y.arrival;
    });
    reserved_.assign(pools_.size(), false);
    passed_.clear();
    std::size_t kept = 0;
    for (const auto id : waiting_) {
      auto& s = slots_[id];
      const bool blocked = std::any_of(s.needs.begin(), s.needs.end(),
                                       [&](const need& n) { return reserved_[n.pool]; });
      if (!blocked && fits(s)) {
        take(s);
        granted_.push_back(id);
        for (const auto p : passed_) {
          ++slots_[p].passes;
        }
        passed_.clear();
        continue;
      }
      if (reserving(s, now)) {
        for (const auto& n : s.needs) {
          reserved_[n.pool] = true;
        }
      }
      passed_.push_back(id);
      waiting_[kept++] = id;
    }
    waiting_.resize(kept);
    return granted_;
  }

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
