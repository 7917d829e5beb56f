#pragma once
/// \file
/// pending_request: a request and its sink while the model owns them, with the intrusive links
/// the intake and the queues use (so moving a request between them allocates nothing).

#include <servekit/core/clock.hpp>
#include <servekit/core/detail/block_pool.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response_sink.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

namespace servekit {

namespace detail {
/// The link of the lock-free intake (a node of an intrusive MPSC queue).
struct intake_link {
  std::atomic<intake_link*> intake_next{nullptr};
};
} // namespace detail

/// An accepted request on its way through a model. Decision cores move these between their
/// queues and hand them back to the shell in batches; the shell sends the final response and
/// frees the node.
struct pending_request : detail::intake_link {
  pending_request(servekit::request&& r, response_sink&& s) noexcept
      : request{std::move(r)}, sink{std::move(s)} {}

  servekit::request request;
  response_sink sink;
  std::int64_t batch_elements = 1; ///< what the request counts toward a batch
  std::uint64_t ticket = 0;        ///< arrival order, unique per model
  time_point deadline = never;     ///< queue timeout, set when queued
  std::uint32_t level = 0;         ///< priority level index (0-based)
  std::uint32_t sequence = 0;      ///< the sequence batcher's record of the request's sequence

  // -- owned by the queue holding the request ---------------------------------------------------
  pending_request* prev = nullptr;
  pending_request* next = nullptr;
  std::size_t heap_index = no_heap_index;
  bool delayed = false; ///< moved to its level's delayed list by a DELAY timeout

  static constexpr std::size_t no_heap_index = std::numeric_limits<std::size_t>::max();
};

/// Returns a pending request's memory to the block pool (nodes are created on submitting
/// threads and destroyed on instance threads).
struct pending_deleter {
  void operator()(pending_request* p) const noexcept { detail::pool_delete(p); }
};

/// Owning pointer to a pending request.
using pending_ptr = std::unique_ptr<pending_request, pending_deleter>;

/// A fresh pending request for `r`, answered through `sink`.
[[nodiscard]] inline pending_ptr make_pending(request&& r, response_sink&& sink) {
  return pending_ptr{detail::pool_new<pending_request>(std::move(r), std::move(sink))};
}

} // namespace servekit
