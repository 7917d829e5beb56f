#pragma once
/// \file
/// decoupled_deadlines: which decoupled requests are still owed a final response, and by when.
/// A pure decision core driven by a clock argument (tested in virtual time).

#include <servekit/core/clock.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace servekit::detail {

/// Outstanding decoupled requests, keyed by a number unique per model, each with the time its
/// final response is due (`never` when the model has no final_response_timeout). `tick(now)`
/// hands back the ones whose deadline passed; the caller answers them. Not thread-safe: the
/// owner locks.
class decoupled_deadlines {
public:
  /// Request `key` is outstanding until `deadline`.
  void add(std::uint64_t key, time_point deadline) {
    by_key_.emplace(key, deadline);
    if (deadline != never) {
      by_deadline_.emplace(std::pair{deadline, key}, key);
    }
  }

  /// Request `key` got its final response. False when it was not outstanding (already expired).
  bool remove(std::uint64_t key) {
    const auto it = by_key_.find(key);
    if (it == by_key_.end()) {
      return false;
    }
    if (it->second != never) {
      by_deadline_.erase(std::pair{it->second, key});
    }
    by_key_.erase(it);
    return true;
  }

  /// Removes and appends to `expired` every request whose deadline is at or before `now`.
  void tick(time_point now, std::vector<std::uint64_t>& expired) {
    while (!by_deadline_.empty() && by_deadline_.begin()->first.first <= now) {
      const std::uint64_t key = by_deadline_.begin()->second;
      by_deadline_.erase(by_deadline_.begin());
      by_key_.erase(key);
      expired.push_back(key);
    }
  }

  /// Removes every outstanding request (a cancelling shutdown answers them all).
  void take_all(std::vector<std::uint64_t>& out) {
    for (const auto& [key, deadline] : by_key_) {
      out.push_back(key);
    }
    by_key_.clear();
    by_deadline_.clear();
  }

  /// The earliest deadline, or `never`.
  [[nodiscard]] time_point next_deadline() const noexcept {
    return by_deadline_.empty() ? never : by_deadline_.begin()->first.first;
  }

  [[nodiscard]] std::size_t size() const noexcept { return by_key_.size(); }
  [[nodiscard]] bool empty() const noexcept { return by_key_.empty(); }

private:
  std::map<std::uint64_t, time_point> by_key_;
  std::map<std::pair<time_point, std::uint64_t>, std::uint64_t> by_deadline_;
};

} // namespace servekit::detail
