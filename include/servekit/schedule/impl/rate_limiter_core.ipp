#pragma once
/// \file
/// Definitions for servekit/schedule/rate_limiter_core.hpp. Compiled once into servekit::servekit,
/// or included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/schedule/rate_limiter_core.hpp>

namespace servekit {

[[nodiscard]] SERVEKIT_DECL std::vector<rate_limiter_core::instance_id>
rate_limiter_core::add(std::span<const rate_limited_instance> instances) {
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

SERVEKIT_DECL std::span<const rate_limiter_core::instance_id>
rate_limiter_core::remove(std::span<const instance_id> ids, time_point now) {
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

SERVEKIT_DECL std::string rate_limiter_core::resource_path(const rate_limited_instance& in,
                                                           std::size_t k) {
  return in.path + "/resources/" + std::to_string(k);
}

SERVEKIT_DECL void
rate_limiter_core::check_global_agreement(std::span<const rate_limited_instance> instances) const {
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

SERVEKIT_DECL std::size_t rate_limiter_core::find_pool(const rate_limited_resource& r, int device) {
  for (std::size_t i = 0; i < pools_.size(); ++i) {
    const auto& p = pools_[i];
    if (p.name == r.name && p.global == r.global && (r.global || p.device == device)) {
      return i;
    }
  }
  pools_.push_back({r.name, r.global, r.global ? 0 : device, 0, 0});
  return pools_.size() - 1;
}

SERVEKIT_DECL rate_limiter_core::instance_id
rate_limiter_core::insert(const rate_limited_instance& in, std::uint64_t rank) {
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

SERVEKIT_DECL void rate_limiter_core::recount(std::span<const rate_limited_instance> added,
                                              std::span<const instance_id> ids) {
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

SERVEKIT_DECL std::span<const rate_limiter_core::instance_id>
rate_limiter_core::scan(time_point now) {
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

} // namespace servekit
