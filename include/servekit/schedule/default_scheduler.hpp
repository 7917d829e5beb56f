#pragma once
/// \file
/// The default scheduler: no batching across requests (Triton's default when a model config
/// names no scheduler). Each request runs alone, in arrival order, on the next free instance.

#include <servekit/queue/request_queue.hpp>
#include <servekit/schedule/batch_plan.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace servekit {

/// FIFO decision core: one request per batch. A request may still carry its own batch
/// dimension (up to max_batch_size); it is never combined with another. Like Triton's default
/// scheduler it has a single queue without timeouts; cancellation and the hold hook apply.
class default_scheduler_core {
public:
  explicit default_scheduler_core(const scheduler_settings& s) : hold_until_{s.hold_until_queued} {}

  [[nodiscard]] std::uint32_t level_of(const request&) const noexcept { return 0; }
  [[nodiscard]] std::uint32_t max_queue_size(std::uint32_t) const noexcept { return 0; }
  [[nodiscard]] time_point deadline_of(const request&) const noexcept { return never; }
  [[nodiscard]] bool has_room(std::uint32_t) const noexcept { return true; }
  [[nodiscard]] std::size_t size() const noexcept { return queue_.size(); }

  void enqueue(pending_ptr p) {
    p->level = 0;
    queue_.push(std::move(p));
  }
  void expire(time_point, early_exits&) noexcept {}
  void collect_cancelled(early_exits& exits) { queue_.take_cancelled(exits.cancelled); }
  void drain(early_exits& exits) { queue_.take_all(exits.cancelled); }
  void flush() noexcept { hold_until_ = 0; }
  [[nodiscard]] time_point next_timeout() const noexcept { return never; }
  [[nodiscard]] time_point next_deadline() const noexcept { return never; }

  bool form_batch(time_point, batch_plan& plan, early_exits& exits) {
    plan.clear();
    if (hold_until_ != 0) {
      if (queue_.size() < hold_until_) {
        return false;
      }
      hold_until_ = 0;
    }
    while (pending_request* p = queue_.first()) {
      pending_ptr owned = queue_.remove(p);
      if (owned->request.cancellation.cancelled()) {
        exits.cancelled.push_back(std::move(owned));
        continue;
      }
      plan.elements = owned->batch_elements;
      plan.reason = batch_close_reason::no_batching;
      plan.requests.push_back(std::move(owned));
      return true;
    }
    return false;
  }

private:
  request_queue queue_;
  std::size_t hold_until_;
};

/// Policy: no batching across requests (the default when a model names no scheduler).
struct default_scheduler {
  using policy_role = scheduler_role;
  using core_type = default_scheduler_core;
  static constexpr bool batches_requests = false;
};

static_assert(scheduler_core<default_scheduler_core>);

} // namespace servekit
