#pragma once
/// \file
/// ordered_completion: preserve_ordering's release of responses in the order batches formed.

#include <servekit/backend/batch.hpp>
#include <servekit/queue/pending_request.hpp>
#include <servekit/runtime/detail/finish.hpp>
#include <servekit/schedule/batch_plan.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace servekit::detail {

/// Batches are numbered as they leave the scheduler; a batch's responses are delivered only
/// after every earlier batch's, so responses leave in request order even when instances finish
/// out of order. Off the fast path: only models with preserve_ordering use it.
class ordered_completion {
public:
  /// Delivers batch `sequence` now if it is next, else parks it; then delivers what it unblocks.
  void complete(std::uint64_t sequence, batch_plan& plan, batch& b) {
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

private:
  using finished_batch = std::vector<std::pair<pending_ptr, response>>;
  std::mutex mutex_;
  std::uint64_t next_ = 0;
  std::map<std::uint64_t, finished_batch> parked_;
};

} // namespace servekit::detail
