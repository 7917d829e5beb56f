#pragma once
/// \file
/// Definitions for servekit/runtime/detail/ordered_completion.hpp. Compiled once into
/// servekit::servekit, or included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/detail/ordered_completion.hpp>

namespace servekit::detail {

SERVEKIT_DECL void ordered_completion::complete(std::uint64_t sequence, batch_plan& plan,
                                                batch& b) {
  finished_batch done;
  for (std::size_t i = 0; i < plan.requests.size(); ++i) {
    done.push_back({std::move(plan.requests[i]), std::move(b.response(i))});
  }
  const std::lock_guard lock{mutex_};
  parked_.emplace(sequence, std::move(done));
  for (auto it = parked_.find(next_); it != parked_.end(); it = parked_.find(next_)) {
    for (auto& [p, r] : it->second) {
      deliver(*p, std::move(r));
    }
    parked_.erase(it);
    ++next_;
  }
}

} // namespace servekit::detail
