#pragma once
/// \file
/// The sequence batcher's oldest strategy as a pure decision core: per instance, a dynamic
/// batcher over candidate sequences that holds at most one request of each.

#include <servekit/core/clock.hpp>
#include <servekit/schedule/batch_plan.hpp>
#include <servekit/schedule/detail/sequence_table.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>
#include <servekit/schedule/scheduler.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace servekit {

/// Triton's oldest strategy:
///
/// - Each instance has max_candidate_sequences candidate slots (0: max_batch_size), handed out
///   as the direct strategy hands out slots, with the same FIFO backlog.
/// - Each instance runs a dynamic batcher (oldest.preferred_batch_size,
///   max_queue_delay_microseconds) over its candidates. A candidate has at most one request in
///   that batcher: the next is released when the previous has executed. So two requests of
///   one sequence never share a batch, and a sequence's requests run in arrival order.
/// - A sequence leaves its slot when its END request has executed.
class oldest_sequence_core {
public:
  explicit oldest_sequence_core(const scheduler_settings& s)
      : table_{s.model_name, std::max<std::size_t>(s.instances, 1), candidates(s),
               microseconds(s.sequence_batching.idle_microseconds()),
               s.sequence_batching.corrid_data_type()},
        hold_{s.hold_until_queued, s.hold_until_backlogged, table_.idle()} {
    scheduler_settings per_instance;
    per_instance.model_name = s.model_name;
    per_instance.max_batch_size = s.max_batch_size;
    per_instance.compatibility = s.compatibility;
    const auto& oldest = s.sequence_batching.oldest;
    per_instance.dynamic_batching.preferred_batch_size = oldest.preferred_batch_size;
    per_instance.dynamic_batching.max_queue_delay_microseconds =
        oldest.max_queue_delay_microseconds;
    per_instance.dynamic_batching.preserve_ordering = oldest.preserve_ordering;
    batchers_.reserve(table_.instances());
    for (std::size_t i = 0; i < table_.instances(); ++i) {
      batchers_.push_back(std::make_unique<dynamic_batch_core<>>(per_instance));
    }
  }

  [[nodiscard]] routing enqueue(pending_ptr& p, time_point now) {
    const auto accepted = table_.enqueue(p, now);
    if (!accepted.result.ok()) {
      return {accepted.result};
    }
    routing out{};
    const auto& s = table_.record(accepted.record);
    if (s.bound() && !s.in_flight) {
      release_head(accepted.record);
      out.instance = s.instance;
    }
    release_promoted();
    if (hold_.arrived(now, size(), table_.backlogged_requests())) {
      // The hold is over: every instance may have work, not only this request's (if any).
      table_.wake_all();
      if (out.instance == routing::no_instance) {
        out.instance = 0;
      }
    }
    return out;
  }

  bool form_batch(std::size_t instance, time_point now, batch_plan& plan, early_exits& exits) {
    plan.clear();
    expire(now, exits);
    if (draining_) {
      table_.release_waiting_slots();
      after_table_change();
    }
    if (hold_.active()) {
      if (hold_.holding(now, size(), table_.backlogged_requests())) {
        table_.take_ended(instance, plan.ended);
        return false;
      }
      table_.wake_all(); // released here (satisfied, or starved): the others may have work
    }
    const std::size_t cancelled_before = exits.cancelled.size();
    const bool formed = batchers_[instance]->form_batch(now, plan, exits);
    settle_cancelled(cancelled_before, exits);
    table_.take_ended(instance, plan.ended); // after: the batcher clears the plan
    if (!formed) {
      return false;
    }
    for (const auto& p : plan.requests) {
      auto& s = table_.record(p->sequence);
      s.started = true;
      plan.sequence.push_back({p->request.sequence_start, p->request.sequence_end, true, s.slot});
    }
    return true;
  }

  void batch_done(std::size_t /*instance*/, time_point now, const batch_plan& plan) {
    table_.advance(now);
    for (const auto& p : plan.requests) {
      const std::uint32_t index = p->sequence;
      auto& s = table_.record(index);
      if (p->request.sequence_end) {
        s.in_flight = false;
        table_.end_sequence(index); // its slot goes to the backlog at once
        continue;
      }
      table_.done(index);
      if (s.in_use && s.bound() && s.head != nullptr) {
        release_head(index);
      }
    }
    release_promoted();
  }

  void expire(time_point now, early_exits& exits) {
    table_.expire(now, exits);
    release_promoted();
  }
  void collect_cancelled(early_exits& exits) {
    table_.collect_cancelled(exits);
    for (auto& b : batchers_) {
      const std::size_t before = exits.cancelled.size();
      b->collect_cancelled(exits);
      settle_cancelled(before, exits);
    }
    release_promoted();
  }
  void drain(early_exits& exits) {
    for (auto& b : batchers_) {
      const std::size_t before = exits.cancelled.size();
      b->drain(exits);
      for (std::size_t k = before; k < exits.cancelled.size(); ++k) {
        table_.record(exits.cancelled[k]->sequence).in_flight = false;
      }
    }
    table_.drain(exits);
    release_promoted();
  }
  void flush() noexcept {
    hold_.release();
    draining_ = true;
    for (auto& b : batchers_) {
      b->flush();
    }
  }
  void close_instance(std::size_t instance, std::vector<sequence_end>& ended) {
    table_.close_instance(instance, ended);
    table_.promoted().clear();
  }

  [[nodiscard]] time_point next_deadline(std::size_t instance) const noexcept {
    return std::min(
        {batchers_[instance]->next_deadline(), table_.next_timeout(), hold_.release_at()});
  }
  [[nodiscard]] time_point next_timeout() const noexcept { return table_.next_timeout(); }
  [[nodiscard]] std::size_t size() const noexcept {
    std::size_t n = table_.queued();
    for (const auto& b : batchers_) {
      n += b->size();
    }
    return n;
  }
  [[nodiscard]] const detail::sequence_table& table() const noexcept { return table_; }
  [[nodiscard]] std::size_t slots_per_instance() const noexcept { return table_.slots(); }
  /// Whether a backlogged sequence got a slot of `instance` since the last call.
  [[nodiscard]] bool take_woken(std::size_t instance) noexcept {
    return table_.take_woken(instance);
  }

private:
  [[nodiscard]] static std::size_t candidates(const scheduler_settings& s) noexcept {
    const auto configured = s.sequence_batching.oldest.max_candidate_sequences;
    return static_cast<std::size_t>(configured > 0 ? configured : std::max(s.max_batch_size, 1));
  }

  void after_table_change() { release_promoted(); }

  /// Moves the first queued request of a bound, idle candidate into its instance's batcher.
  void release_head(std::uint32_t index) {
    auto& s = table_.record(index);
    s.in_flight = true;
    batchers_[s.instance]->enqueue(table_.pop_head(index));
  }

  /// Sequences that just got a slot from the backlog put their first request forward.
  void release_promoted() {
    auto& promoted = table_.promoted();
    for (std::size_t k = 0; k < promoted.size(); ++k) { // release_head may promote no further
      const std::uint32_t index = promoted[k];
      const auto& s = table_.record(index);
      if (s.in_use && s.bound() && !s.in_flight && s.head != nullptr) {
        release_head(index);
      }
    }
    promoted.clear();
  }

  /// A request the batcher dropped as cancelled takes its whole sequence with it.
  void settle_cancelled(std::size_t from, early_exits& exits) {
    const std::size_t to = exits.cancelled.size();
    for (std::size_t k = from; k < to; ++k) {
      const std::uint32_t index = exits.cancelled[k]->sequence;
      table_.record(index).in_flight = false;
      table_.cancel_sequence(index, exits);
    }
    release_promoted();
  }

  detail::sequence_table table_;
  bool draining_ = false;
  std::vector<std::unique_ptr<dynamic_batch_core<>>> batchers_; // not movable: one each
  detail::sequence_hold hold_;
};

} // namespace servekit
