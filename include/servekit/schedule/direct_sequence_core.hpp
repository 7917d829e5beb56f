#pragma once
/// \file
/// The sequence batcher's direct strategy as a pure decision core: every sequence owns a batch
/// slot of one instance, and a batch has one entry per slot.

#include <servekit/backend/batch_compatibility.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/schedule/batch_plan.hpp>
#include <servekit/schedule/detail/sequence_table.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace servekit {

/// Triton's direct strategy, decided when instance `i` is free:
///
/// - Sequences get slots lowest index first; with none free a new sequence waits in a FIFO
///   backlog with all its later requests. When a sequence's END is batched its slot goes at
///   once to the oldest backlogged sequence.
/// - A batch covers slots 0..highest ready slot of the instance: each slot whose sequence has a
///   request queued contributes its oldest one; empty slots, and slots whose request's shape
///   differs from the first ready one (unless ragged), are padding entries with READY false.
/// - With minimum_slot_utilization > 0 and max_queue_delay_microseconds > 0, a batch waits
///   until that fraction of the slots is ready or its oldest request has waited the delay.
///
/// An instance executes one batch at a time, so a sequence's requests run one at a time, in
/// arrival order.
class direct_sequence_core {
public:
  explicit direct_sequence_core(const scheduler_settings& s)
      : table_{s.model_name, std::max<std::size_t>(s.instances, 1),
               static_cast<std::size_t>(std::max(s.max_batch_size, 1)),
               microseconds(s.sequence_batching.idle_microseconds()),
               s.sequence_batching.corrid_data_type()},
        compatibility_{s.compatibility},
        min_utilization_{s.sequence_batching.direct.minimum_slot_utilization},
        max_delay_{microseconds(s.sequence_batching.direct.max_queue_delay_microseconds)},
        hold_{s.hold_until_queued, s.hold_until_backlogged, table_.idle()},
        wait_until_(table_.instances(), never), ready_(table_.slots(), false) {}

  [[nodiscard]] routing enqueue(pending_ptr& p, time_point now) {
    const auto accepted = table_.enqueue(p, now);
    if (!accepted.result.ok()) {
      return {accepted.result};
    }
    const auto& s = table_.record(accepted.record);
    table_.promoted().clear();
    if (hold_.arrived(now, table_.queued(), table_.backlogged_requests())) {
      // The hold is over: every instance may have work, not only this request's (if any).
      table_.wake_all();
      return {{}, s.bound() ? s.instance : 0};
    }
    return {{}, s.bound() ? s.instance : routing::no_instance};
  }

  bool form_batch(std::size_t instance, time_point now, batch_plan& plan, early_exits& exits) {
    plan.clear();
    wait_until_[instance] = never;
    expire(now, exits);
    if (draining_) {
      table_.release_waiting_slots();
      after_table_change();
    }
    table_.take_ended(instance, plan.ended);
    if (hold_.active()) {
      if (hold_.holding(now, table_.queued(), table_.backlogged_requests())) {
        wait_until_[instance] = hold_.release_at();
        return false;
      }
      table_.wake_all(); // released here (satisfied, or starved): the others may have work
    }

    // Which slots are ready: a queued, uncancelled request whose shape fits the first one's.
    const request* first = nullptr;
    std::size_t ready = 0;
    std::size_t highest = 0;
    time_point oldest = never;
    for (std::size_t slot = 0; slot < table_.slots(); ++slot) {
      ready_[slot] = false;
      const std::uint32_t index = table_.owner(instance, slot);
      if (index == detail::sequence_record::none || table_.record(index).head == nullptr) {
        continue;
      }
      const pending_request& head = *table_.record(index).head;
      if (head.request.cancellation.cancelled()) {
        table_.cancel_sequence(index, exits);
        table_.promoted().clear();
        --slot; // a backlogged sequence may have taken the slot: look again
        continue;
      }
      if (first != nullptr && compatibility_.needs_check() &&
          !compatibility_.compatible(*first, head.request)) {
        continue;
      }
      if (first == nullptr) {
        first = &head.request;
      }
      ready_[slot] = true;
      ++ready;
      highest = slot;
      oldest = std::min(oldest, head.request.arrival);
    }
    if (ready == 0) {
      return false;
    }
    const auto slots = static_cast<double>(table_.slots());
    const bool full_enough = static_cast<double>(ready) >= min_utilization_ * slots;
    const bool delay_expired = now - oldest >= max_delay_;
    if (min_utilization_ > 0.0F && max_delay_ > duration::zero() && !full_enough &&
        !delay_expired) {
      wait_until_[instance] = later_by(oldest, max_delay_);
      return false;
    }

    for (std::size_t slot = 0; slot <= highest; ++slot) {
      const auto s32 = static_cast<std::uint32_t>(slot);
      if (!ready_[slot]) {
        plan.requests.emplace_back();
        plan.sequence.push_back({false, false, false, s32});
        continue;
      }
      const std::uint32_t index = table_.owner(instance, slot);
      pending_ptr p = table_.pop_head(index);
      auto& s = table_.record(index);
      s.started = true;
      s.in_flight = true;
      const bool end = p->request.sequence_end;
      plan.sequence.push_back({p->request.sequence_start, end, true, s32});
      plan.requests.push_back(std::move(p));
      if (end) {
        table_.end_sequence(index); // its slot goes to the backlog at once
      }
    }
    table_.promoted().clear();
    plan.elements = static_cast<std::int64_t>(highest + 1);
    if (ready == table_.slots()) {
      plan.reason = batch_close_reason::max_batch_size;
    } else if (min_utilization_ > 0.0F && max_delay_ > duration::zero() && !full_enough) {
      plan.reason = batch_close_reason::queue_delay_expired;
    } else if (plan.elements != static_cast<std::int64_t>(ready) && first != nullptr &&
               compatibility_.needs_check() && has_mismatch(instance)) {
      plan.reason = batch_close_reason::shape_mismatch;
    } else {
      plan.reason = batch_close_reason::queue_drained;
    }
    return true;
  }

  void batch_done(std::size_t /*instance*/, time_point now, const batch_plan& plan) {
    table_.advance(now);
    for (const auto& p : plan.requests) {
      if (p) {
        table_.done(p->sequence);
      }
    }
    table_.promoted().clear();
  }

  void expire(time_point now, early_exits& exits) {
    table_.expire(now, exits);
    table_.promoted().clear();
  }
  void collect_cancelled(early_exits& exits) {
    table_.collect_cancelled(exits);
    table_.promoted().clear();
  }
  void drain(early_exits& exits) {
    table_.drain(exits);
    table_.promoted().clear();
  }
  void flush() noexcept {
    max_delay_ = duration::zero();
    hold_.release();
    draining_ = true;
  }
  void close_instance(std::size_t instance, std::vector<sequence_end>& ended) {
    table_.close_instance(instance, ended);
    table_.promoted().clear();
  }

  [[nodiscard]] time_point next_deadline(std::size_t instance) const noexcept {
    return std::min(wait_until_[instance], table_.next_timeout());
  }
  [[nodiscard]] time_point next_timeout() const noexcept { return table_.next_timeout(); }
  [[nodiscard]] std::size_t size() const noexcept { return table_.queued(); }
  [[nodiscard]] const detail::sequence_table& table() const noexcept { return table_; }
  [[nodiscard]] std::size_t slots_per_instance() const noexcept { return table_.slots(); }
  /// Whether a backlogged sequence got a slot of `instance` since the last call.
  [[nodiscard]] bool take_woken(std::size_t instance) noexcept {
    return table_.take_woken(instance);
  }

private:
  void after_table_change() { table_.promoted().clear(); }

  /// Whether a slot of `instance` still holds a request (it was left out for its shape).
  [[nodiscard]] bool has_mismatch(std::size_t instance) const noexcept {
    for (std::size_t slot = 0; slot < table_.slots(); ++slot) {
      const std::uint32_t index = table_.owner(instance, slot);
      if (!ready_[slot] && index != detail::sequence_record::none &&
          table_.record(index).head != nullptr) {
        return true;
      }
    }
    return false;
  }

  detail::sequence_table table_;
  bool draining_ = false;
  batch_compatibility compatibility_;
  float min_utilization_;
  duration max_delay_;
  detail::sequence_hold hold_;
  std::vector<time_point> wait_until_;
  std::vector<bool> ready_;
};

} // namespace servekit
