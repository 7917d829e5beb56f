#pragma once
/// \file
/// ordered_completion: preserve_ordering's release of responses in the order batches formed.

#include <servekit/backend/batch.hpp>
#include <servekit/core/detail/linkage.hpp>
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
  SERVEKIT_DECL void complete(std::uint64_t sequence, batch_plan& plan, batch& b);

private:
  using finished_batch = std::vector<std::pair<pending_ptr, response>>;
  std::mutex mutex_;
  std::uint64_t next_ = 0;
  std::map<std::uint64_t, finished_batch> parked_;
};

} // namespace servekit::detail

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/runtime/impl/ordered_completion.ipp>
#endif
