#pragma once
/// \file
/// The sequence batcher's bookkeeping, shared by its direct and oldest cores: which sequences
/// are open, which slot each holds, the backlog, idle expiry and backlog timeouts.

#include <servekit/backend/sequence_controls.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>
#include <servekit/queue/pending_request.hpp>
#include <servekit/schedule/batch_plan.hpp>
#include <servekit/schedule/sequence_errors.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace servekit::detail {

struct correlation_id_hash {
  std::size_t operator()(const correlation_id& id) const noexcept {
    return id.is_string() ? std::hash<std::string_view>{}(id.as_string())
                          : std::hash<std::uint64_t>{}(id.as_uint());
  }
};

/// The sequence batcher's test hooks (Triton's TRITONSERVER_DELAY_SCHEDULER and
/// TRITONSERVER_BACKLOG_DELAY_SCHEDULER): hold every batch until enough requests are queued
/// (across all instances, backlogged ones included) and enough wait in the backlog, once.
///
/// The core checks it at every arrival too (arrived()): the request that satisfies the hold may
/// be routed to one instance, or to none (backlogged), while the others sleep; the core then
/// wakes every instance. A hold no arrival has fed for `idle` (the sequence idle timeout) is
/// released as well: its clients may be waiting for answers before they send more, so it could
/// never be satisfied.
class sequence_hold {
public:
  sequence_hold(std::size_t queued, std::size_t backlogged, duration idle) noexcept
      : queued_{queued}, backlogged_{backlogged}, idle_{idle} {}

  [[nodiscard]] bool active() const noexcept { return queued_ != 0 || backlogged_ != 0; }

  /// A request arrived at `now`: whether the hold was active and is satisfied (released now).
  [[nodiscard]] bool arrived(time_point now, std::size_t queued, std::size_t backlogged) noexcept {
    if (!active()) {
      return false;
    }
    last_arrival_ = now;
    if (queued < queued_ || backlogged < backlogged_) {
      return false;
    }
    release();
    return true;
  }

  /// Whether batches are still held at `now` (releasing a satisfied or starved hold).
  [[nodiscard]] bool holding(time_point now, std::size_t queued, std::size_t backlogged) noexcept {
    if (!active()) {
      return false;
    }
    if ((queued < queued_ || backlogged < backlogged_) && now < release_at()) {
      return true;
    }
    release();
    return false;
  }

  /// When a hold no arrival feeds gives up (`never` without an idle timeout).
  [[nodiscard]] time_point release_at() const noexcept {
    return active() && idle_ > duration::zero() ? later_by(last_arrival_, idle_) : never;
  }

  void release() noexcept {
    queued_ = 0;
    backlogged_ = 0;
  }

private:
  std::size_t queued_;
  std::size_t backlogged_;
  duration idle_;
  time_point last_arrival_{};
};

/// One sequence, from its first request until the batcher holds nothing of it.
struct sequence_record {
  static constexpr std::uint32_t unbound = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();

  correlation_id id;
  pending_request* head = nullptr; ///< queued requests, a FIFO linked through `next`
  pending_request* tail = nullptr;
  std::size_t queued = 0;
  time_point last_request{};           ///< when it last received a request (or got its slot)
  time_point backlog_deadline = never; ///< earliest request timeout while backlogged
  std::uint32_t instance = unbound;    ///< the slot it holds, if bound
  std::uint32_t slot = 0;
  std::uint32_t backlog_prev = none; ///< backlog FIFO links (record indices)
  std::uint32_t backlog_next = none;
  bool in_use = false;
  bool open = false; ///< its id maps here: START received, END not yet received
  bool backlogged = false;
  bool started = false;   ///< a request of it was batched: the backend has seen it
  bool in_flight = false; ///< a request of it is executing (oldest: or in the instance's batcher)
  bool leaving = false;   ///< closed without an END: leaves its slot once nothing is left of it
  sequence_end_reason leave_reason = sequence_end_reason::idle_timeout;

  [[nodiscard]] bool bound() const noexcept { return instance != unbound; }
};

/// Routing and slot bookkeeping for `instances` × `slots` sequence slots. Free slots are handed
/// out lowest slot index first (then lowest instance), as Triton's slot heap does, so two
/// sequences on a two-instance model land in slot 0 of each.
class sequence_table {
public:
  struct accepted {
    status result;
    std::uint32_t record = sequence_record::none;
  };

  sequence_table(std::string model_name, std::size_t instances, std::size_t slots, duration idle,
                 data_type corrid_type)
      : model_name_{std::move(model_name)}, instances_{instances}, slots_{slots}, idle_{idle},
        corrid_type_{corrid_type}, owners_(instances * slots, sequence_record::none),
        ended_(instances), woken_(instances, 0) {
    for (std::size_t s = 0; s < slots; ++s) {
      for (std::size_t i = 0; i < instances; ++i) {
        free_.emplace(static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(i));
      }
    }
  }

  sequence_table(const sequence_table&) = delete;
  sequence_table& operator=(const sequence_table&) = delete;

  /// Frees requests still queued (shells drain first; a core dropped by a test may not).
  ~sequence_table() {
    for (std::uint32_t i = 0; i < records_.size(); ++i) {
      while (record(i).head != nullptr) {
        pop_head(i);
      }
    }
  }

  [[nodiscard]] std::size_t instances() const noexcept { return instances_; }
  [[nodiscard]] std::size_t slots() const noexcept { return slots_; }
  [[nodiscard]] std::size_t queued() const noexcept { return queued_; }
  [[nodiscard]] std::size_t backlogged_requests() const noexcept { return backlogged_requests_; }
  [[nodiscard]] std::size_t open_sequences() const noexcept { return open_.size(); }

  [[nodiscard]] sequence_record& record(std::uint32_t index) noexcept { return *records_[index]; }
  [[nodiscard]] const sequence_record& record(std::uint32_t index) const noexcept {
    return *records_[index];
  }

  /// The record holding `slot` of `instance`, or none.
  [[nodiscard]] std::uint32_t owner(std::size_t instance, std::size_t slot) const noexcept {
    return owners_[instance * slots_ + slot];
  }

  /// Checks a request against Triton's sequence rules and queues it on its sequence (a slot or
  /// the backlog). Refused requests are left in `p`.
  accepted enqueue(pending_ptr& p, time_point now) {
    advance(now);
    const request& r = p->request;
    if (p->batch_elements > 1) {
      return {invalid_argument("inference request to model '" + model_name_ +
                               "' must specify batch-size 1 due to requirements of sequence "
                               "batcher")};
    }
    if (r.sequence_id.empty()) {
      return {invalid_argument("inference request to model '" + model_name_ +
                               "' must specify a non-zero or non-empty correlation ID")};
    }
    if (r.sequence_id.is_string() && corrid_type_ != data_type::invalid &&
        corrid_type_ != data_type::bytes) {
      return {invalid_argument("inference request to model '" + model_name_ +
                               "' has the string correlation ID '" + r.sequence_id.to_string() +
                               "' but its CORRID control is " +
                               std::string{to_config_string(corrid_type_)})};
    }
    auto found = open_.find(r.sequence_id);
    if (found == open_.end() && !r.sequence_start) {
      return {missing_start(r.sequence_id, model_name_)};
    }
    std::uint32_t index = 0;
    if (found != open_.end()) {
      // A START for an open id restarts that sequence where it is (Triton logs a conflict and
      // does the same); the backend sees START again and the state is re-initialised.
      index = found->second;
    } else {
      index = new_record(r.sequence_id);
      sequence_record& created = record(index);
      created.open = true;
      open_.emplace(r.sequence_id, index);
      created.last_request = now;
      if (!bind_free_slot(index)) {
        append_backlog(index);
      }
    }
    sequence_record& s = record(index);
    if (r.sequence_end) {
      s.open = false; // a later request of this id needs a new START
      open_.erase(r.sequence_id);
    }
    s.last_request = std::max(s.last_request, now);
    if (s.backlogged) {
      ++backlogged_requests_;
      if (r.timeout_us != 0) {
        s.backlog_deadline = std::min(s.backlog_deadline, deadline_after(r.arrival, r.timeout_us));
        next_backlog_deadline_ = std::min(next_backlog_deadline_, s.backlog_deadline);
      }
    }
    p->sequence = index;
    push(s, std::move(p));
    return {{}, index};
  }

  /// Tells the table the time (promotions start a sequence's idle clock at it).
  void advance(time_point now) noexcept { last_event_ = std::max(last_event_, now); }

  /// Removes the first queued request of a bound sequence.
  pending_ptr pop_head(std::uint32_t index) {
    sequence_record& s = record(index);
    pending_request* p = s.head;
    s.head = p->next;
    if (s.head == nullptr) {
      s.tail = nullptr;
    }
    p->next = nullptr;
    --s.queued;
    --queued_;
    return pending_ptr{p};
  }

  /// The sequence's END request was batched (direct) or executed (oldest): its slot goes to the
  /// oldest backlogged sequence at once.
  void end_sequence(std::uint32_t index) {
    release_slot(index);
    maybe_free(index);
  }

  /// After a batch: `index` is not executing any more. Leaves the slot if the sequence was
  /// closed without an END and nothing of it is left.
  void done(std::uint32_t index) {
    sequence_record& s = record(index);
    s.in_flight = false;
    if (s.leaving && s.head == nullptr && s.bound()) {
      leave_slot(index);
    }
    maybe_free(index);
  }

  /// Sequences promoted from the backlog into a slot since the last call (the oldest core
  /// releases their first request into its batcher).
  [[nodiscard]] std::vector<std::uint32_t>& promoted() noexcept { return promoted_; }

  /// Whether a backlogged sequence got a slot of `instance` since the last call.
  [[nodiscard]] bool take_woken(std::size_t instance) noexcept {
    return std::exchange(woken_[instance], std::uint8_t{0}) != 0;
  }

  /// Marks every instance woken (a hold was released: they may all have work).
  void wake_all() noexcept { std::fill(woken_.begin(), woken_.end(), std::uint8_t{1}); }

  /// The sequence idle timeout.
  [[nodiscard]] duration idle() const noexcept { return idle_; }

  /// Moves the instance's ended-sequence notices into `out`.
  void take_ended(std::size_t instance, std::vector<sequence_end>& out) {
    auto& mine = ended_[instance];
    out.insert(out.end(), std::make_move_iterator(mine.begin()),
               std::make_move_iterator(mine.end()));
    mine.clear();
  }

  /// Applies idle expiry and backlog timeouts due at `now`.
  void expire(time_point now, early_exits& exits) {
    advance(now);
    if (now >= next_idle_check_) {
      reap_idle(now);
    }
    if (now >= next_backlog_deadline_) {
      expire_backlog(now, exits);
    }
  }

  [[nodiscard]] time_point next_timeout() const noexcept {
    return std::min(next_idle_check_, next_backlog_deadline_);
  }

  /// Cancels every sequence with a cancelled request queued.
  void collect_cancelled(early_exits& exits) {
    for (std::uint32_t i = 0; i < records_.size(); ++i) {
      const sequence_record& s = record(i);
      if (!s.in_use) {
        continue;
      }
      for (const pending_request* p = s.head; p != nullptr; p = p->next) {
        if (p->request.cancellation.cancelled()) {
          cancel_sequence(i, exits);
          break;
        }
      }
    }
  }

  /// A request of the sequence was cancelled: the whole sequence is, since its later requests
  /// cannot run without it. Its queued requests go to `exits`, its id is forgotten.
  void cancel_sequence(std::uint32_t index, early_exits& exits) {
    close(index, sequence_end_reason::cancelled, exits.cancelled);
  }

  /// Cancels everything queued and closes every sequence (a cancelling shutdown).
  void drain(early_exits& exits) {
    for (std::uint32_t i = 0; i < records_.size(); ++i) {
      if (record(i).in_use) {
        close(i, sequence_end_reason::shutdown, exits.cancelled);
      }
    }
  }

  /// A draining shutdown: sequences holding a slot with nothing queued will get no more
  /// requests, so they give their slots to the backlog.
  void release_waiting_slots() {
    for (const std::uint32_t index : owners_) {
      if (index == sequence_record::none) {
        continue;
      }
      sequence_record& s = record(index);
      if (s.head == nullptr && !s.in_flight) {
        std::vector<pending_ptr> none_queued;
        close(index, sequence_end_reason::shutdown, none_queued);
      }
    }
  }

  /// Ends every sequence still holding a slot of `instance` (shutdown).
  void close_instance(std::size_t instance, std::vector<sequence_end>& out) {
    for (std::size_t slot = 0; slot < slots_; ++slot) {
      const std::uint32_t index = owner(instance, slot);
      if (index != sequence_record::none) {
        sequence_record& s = record(index);
        if (s.open) {
          open_.erase(s.id);
          s.open = false;
        }
        s.leaving = true;
        s.leave_reason = sequence_end_reason::shutdown;
        leave_slot(index);
        maybe_free(index);
      }
    }
    take_ended(instance, out);
  }

private:
  std::uint32_t new_record(const correlation_id& id) {
    std::uint32_t index = 0;
    if (!free_records_.empty()) {
      index = free_records_.back();
      free_records_.pop_back();
    } else {
      index = static_cast<std::uint32_t>(records_.size());
      records_.push_back(std::make_unique<sequence_record>());
    }
    sequence_record& s = record(index);
    s = sequence_record{};
    s.id = id;
    s.in_use = true;
    return index;
  }

  void maybe_free(std::uint32_t index) {
    sequence_record& s = record(index);
    if (s.in_use && !s.open && !s.bound() && !s.backlogged && !s.in_flight && s.head == nullptr) {
      s.in_use = false;
      s.id = correlation_id{};
      free_records_.push_back(index);
    }
  }

  void push(sequence_record& s, pending_ptr p) {
    pending_request* raw = p.release();
    raw->next = nullptr;
    if (s.tail == nullptr) {
      s.head = raw;
    } else {
      s.tail->next = raw;
    }
    s.tail = raw;
    ++s.queued;
    ++queued_;
  }

  bool bind_free_slot(std::uint32_t index) {
    if (free_.empty()) {
      return false;
    }
    const auto [slot, instance] = free_.top();
    free_.pop();
    bind(index, instance, slot);
    return true;
  }

  void bind(std::uint32_t index, std::uint32_t instance, std::uint32_t slot) {
    sequence_record& s = record(index);
    s.instance = instance;
    s.slot = slot;
    owners_[instance * slots_ + slot] = index;
    next_idle_check_ = std::min(next_idle_check_, later_by(s.last_request, idle_));
  }

  /// Frees the slot of `index` and gives it to the oldest backlogged sequence, if any.
  void release_slot(std::uint32_t index) {
    sequence_record& s = record(index);
    const std::uint32_t instance = s.instance;
    const std::uint32_t slot = s.slot;
    owners_[instance * slots_ + slot] = sequence_record::none;
    s.instance = sequence_record::unbound;
    if (backlog_head_ == sequence_record::none) {
      free_.emplace(slot, instance);
      return;
    }
    const std::uint32_t next = backlog_head_;
    remove_backlog(next);
    sequence_record& promoted = record(next);
    backlogged_requests_ -= promoted.queued;
    promoted.backlog_deadline = never;
    // Idle time starts when it gets the slot: its wait in the backlog was not its client's.
    promoted.last_request = std::max(promoted.last_request, last_event_);
    bind(next, instance, slot);
    promoted_.push_back(next);
    woken_[instance] = 1;
  }

  void leave_slot(std::uint32_t index) {
    sequence_record& s = record(index);
    if (s.started) {
      ended_[s.instance].push_back({s.id, s.slot, s.leave_reason});
    }
    release_slot(index);
  }

  /// Closes a sequence without its END: its queued requests go to `out`, its id is forgotten,
  /// and it leaves its slot as soon as nothing of it executes.
  void close(std::uint32_t index, sequence_end_reason reason, std::vector<pending_ptr>& out) {
    sequence_record& s = record(index);
    if (s.open) {
      open_.erase(s.id);
      s.open = false;
    }
    while (s.head != nullptr) {
      if (s.backlogged) {
        --backlogged_requests_;
      }
      out.push_back(pop_head(index));
    }
    if (s.backlogged) {
      remove_backlog(index);
    } else if (s.bound()) {
      s.leaving = true;
      s.leave_reason = reason;
      if (!s.in_flight) {
        leave_slot(index);
      }
    }
    maybe_free(index);
  }

  void reap_idle(time_point now) {
    next_idle_check_ = never; // a promotion below lowers it again for the sequence it binds
    time_point next = never;
    for (std::size_t k = 0; k < owners_.size(); ++k) {
      const std::uint32_t index = owners_[k];
      if (index == sequence_record::none) {
        continue;
      }
      sequence_record& s = record(index);
      if (!s.open) {
        continue; // its END is queued or it is already leaving
      }
      const time_point due = later_by(s.last_request, idle_);
      if (due > now) {
        next = std::min(next, due);
        continue;
      }
      // As Triton: the id is forgotten at once; requests it already queued still execute, and
      // the slot is released after them.
      open_.erase(s.id);
      s.open = false;
      s.leaving = true;
      s.leave_reason = sequence_end_reason::idle_timeout;
      if (!s.in_flight && s.head == nullptr) {
        leave_slot(index);
        maybe_free(index);
      }
    }
    next_idle_check_ = std::min(next_idle_check_, next);
  }

  void expire_backlog(time_point now, early_exits& exits) {
    time_point next = never;
    for (std::uint32_t index = backlog_head_; index != sequence_record::none;) {
      sequence_record& s = record(index);
      const std::uint32_t after = s.backlog_next;
      if (s.backlog_deadline <= now) {
        close(index, sequence_end_reason::cancelled, exits.sequence_timed_out);
      } else {
        next = std::min(next, s.backlog_deadline);
      }
      index = after;
    }
    next_backlog_deadline_ = next;
  }

  void append_backlog(std::uint32_t index) {
    sequence_record& s = record(index);
    s.backlogged = true;
    s.backlog_prev = backlog_tail_;
    s.backlog_next = sequence_record::none;
    if (backlog_tail_ == sequence_record::none) {
      backlog_head_ = index;
    } else {
      record(backlog_tail_).backlog_next = index;
    }
    backlog_tail_ = index;
  }

  void remove_backlog(std::uint32_t index) {
    sequence_record& s = record(index);
    if (s.backlog_prev == sequence_record::none) {
      backlog_head_ = s.backlog_next;
    } else {
      record(s.backlog_prev).backlog_next = s.backlog_next;
    }
    if (s.backlog_next == sequence_record::none) {
      backlog_tail_ = s.backlog_prev;
    } else {
      record(s.backlog_next).backlog_prev = s.backlog_prev;
    }
    s.backlogged = false;
    s.backlog_prev = sequence_record::none;
    s.backlog_next = sequence_record::none;
  }

  using free_slot = std::pair<std::uint32_t, std::uint32_t>; // (slot, instance)

  std::string model_name_;
  std::size_t instances_;
  std::size_t slots_;
  duration idle_;
  data_type corrid_type_;
  std::vector<std::unique_ptr<sequence_record>> records_;
  std::vector<std::uint32_t> free_records_;
  std::unordered_map<correlation_id, std::uint32_t, correlation_id_hash> open_;
  std::vector<std::uint32_t> owners_; ///< [instance * slots + slot] -> record
  std::priority_queue<free_slot, std::vector<free_slot>, std::greater<>> free_;
  std::uint32_t backlog_head_ = sequence_record::none;
  std::uint32_t backlog_tail_ = sequence_record::none;
  std::size_t queued_ = 0;
  std::size_t backlogged_requests_ = 0;
  time_point next_idle_check_ = never;       ///< no idle expiry can happen before this
  time_point next_backlog_deadline_ = never; ///< no backlog timeout can happen before this
  time_point last_event_{};                  ///< the latest time the table was told
  std::vector<std::vector<sequence_end>> ended_;
  std::vector<std::uint32_t> promoted_;
  std::vector<std::uint8_t> woken_; ///< per instance: a promotion gave it work
};

} // namespace servekit::detail
