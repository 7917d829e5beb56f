#pragma once
/// \file
/// request_queue: the priority levels of a decision core, each with its queue policy, its FIFO
/// of waiting requests, its list of DELAY-expired requests, and exact timeout deadlines.

#include <servekit/core/assert.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/status.hpp>
#include <servekit/queue/pending_request.hpp>
#include <servekit/queue/queue_policy.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace servekit {

namespace detail {

/// A doubly linked FIFO threaded through pending_request::prev/next.
class request_list {
public:
  [[nodiscard]] pending_request* front() const noexcept { return head_; }
  [[nodiscard]] bool empty() const noexcept { return head_ == nullptr; }

  void push_back(pending_request* p) noexcept {
    p->next = nullptr;
    p->prev = tail_;
    if (tail_ != nullptr) {
      tail_->next = p;
    } else {
      head_ = p;
    }
    tail_ = p;
  }

  void erase(pending_request* p) noexcept {
    (p->prev != nullptr ? p->prev->next : head_) = p->next;
    (p->next != nullptr ? p->next->prev : tail_) = p->prev;
    p->prev = nullptr;
    p->next = nullptr;
  }

private:
  pending_request* head_ = nullptr;
  pending_request* tail_ = nullptr;
};

/// A binary min-heap of deadlines that knows each member's position (pending_request::
/// heap_index), so a request leaving the queue early is removed in O(log n).
class deadline_heap {
public:
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
  [[nodiscard]] pending_request* top() const noexcept { return items_.front(); }
  [[nodiscard]] time_point earliest() const noexcept {
    return items_.empty() ? never : items_.front()->deadline;
  }

  void push(pending_request* p) {
    p->heap_index = items_.size();
    items_.push_back(p);
    sift_up(p->heap_index);
  }

  void erase(pending_request* p) noexcept {
    const std::size_t i = p->heap_index;
    SERVEKIT_ASSERT(i < items_.size() && items_[i] == p, "request is not in the deadline heap");
    p->heap_index = pending_request::no_heap_index;
    pending_request* last = items_.back();
    items_.pop_back();
    if (last == p) {
      return;
    }
    items_[i] = last;
    last->heap_index = i;
    sift_up(i);
    sift_down(last->heap_index);
  }

private:
  static bool before(const pending_request* a, const pending_request* b) noexcept {
    return a->deadline != b->deadline ? a->deadline < b->deadline : a->ticket < b->ticket;
  }
  void place(std::size_t i, pending_request* p) noexcept {
    items_[i] = p;
    p->heap_index = i;
  }
  void sift_up(std::size_t i) noexcept {
    pending_request* p = items_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!before(p, items_[parent])) {
        break;
      }
      place(i, items_[parent]);
      i = parent;
    }
    place(i, p);
  }
  void sift_down(std::size_t i) noexcept {
    pending_request* p = items_[i];
    const std::size_t n = items_.size();
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= n) {
        break;
      }
      if (child + 1 < n && before(items_[child + 1], items_[child])) {
        ++child;
      }
      if (!before(items_[child], p)) {
        break;
      }
      place(i, items_[child]);
      i = child;
    }
    place(i, p);
  }

  std::vector<pending_request*> items_;
};

} // namespace detail

/// The waiting requests of one model, by priority level. Pure data structure: it never reads a
/// clock and never responds; callers pass the time and receive the requests that leave.
///
/// Order of service ("walk order"): level 1's queue, then level 1's delayed requests, then
/// level 2's queue, and so on; FIFO inside each list.
class request_queue {
public:
  request_queue() : request_queue(priority_options{}) {}
  explicit request_queue(const priority_options& options)
      : default_level_{options.priority_levels == 0
                           ? 0U
                           : static_cast<std::uint32_t>(options.default_priority_level - 1)} {
    const std::uint64_t count = options.priority_levels == 0 ? 1 : options.priority_levels;
    levels_.resize(static_cast<std::size_t>(count));
    for (std::size_t i = 0; i < levels_.size(); ++i) {
      const auto it = options.priority_queue_policy.find(i + 1);
      levels_[i].policy = options.priority_levels != 0 && it != options.priority_queue_policy.end()
                              ? it->second
                              : options.default_queue_policy;
    }
  }
  request_queue(const request_queue&) = delete;
  request_queue& operator=(const request_queue&) = delete;
  ~request_queue() {
    for (auto& level : levels_) {
      for (auto* list : {&level.waiting, &level.delayed}) {
        while (auto* p = list->front()) {
          list->erase(p);
          pending_deleter{}(p); // only if a shell broke its contract and never drained the queue
        }
      }
    }
  }

  [[nodiscard]] std::size_t level_count() const noexcept { return levels_.size(); }
  [[nodiscard]] const queue_policy& policy(std::uint32_t level) const noexcept {
    return levels_[level].policy;
  }

  /// Triton's mapping: priority 0 or above the number of levels goes to the default level.
  [[nodiscard]] std::uint32_t level_of(std::uint64_t priority) const noexcept {
    if (levels_.size() == 1) {
      return 0;
    }
    if (priority == 0 || priority > levels_.size()) {
      return default_level_;
    }
    return static_cast<std::uint32_t>(priority - 1);
  }

  /// The request's effective queue timeout under its level's policy (0: none). As in Triton's
  /// PolicyQueue, a request's own timeout only ever lowers a non-zero default: with no default
  /// timeout, request timeouts are ignored even when overriding is allowed.
  [[nodiscard]] std::uint64_t timeout_us(const request& r, std::uint32_t level) const noexcept {
    const queue_policy& p = levels_[level].policy;
    std::uint64_t timeout = p.default_timeout_microseconds;
    if (p.allow_timeout_override && r.timeout_us != 0 && r.timeout_us < timeout) {
      timeout = r.timeout_us;
    }
    return timeout;
  }

  /// Whether `level` can take one more request (its max_queue_size).
  [[nodiscard]] bool has_room(std::uint32_t level) const noexcept {
    const auto max = levels_[level].policy.max_queue_size;
    return max == 0 || levels_[level].count < max;
  }

  /// Queues `p` at the back of its level (which `p->level` must name) with its deadline
  /// computed from its arrival time. Takes ownership.
  void push(pending_ptr owned) {
    pending_request* p = owned.release();
    level_state& level = levels_[p->level];
    const std::uint64_t timeout = timeout_us(p->request, p->level);
    p->deadline = timeout == 0 ? never : deadline_after(p->request.arrival, timeout);
    p->delayed = false;
    level.waiting.push_back(p);
    ++level.count;
    ++size_;
    if (p->deadline != never) {
      deadlines_.push(p);
    }
  }

  /// Removes `p` (anywhere in the queue) and gives back ownership.
  [[nodiscard]] pending_ptr remove(pending_request* p) noexcept {
    level_state& level = levels_[p->level];
    (p->delayed ? level.delayed : level.waiting).erase(p);
    if (p->heap_index != pending_request::no_heap_index) {
      deadlines_.erase(p);
    }
    --level.count;
    --size_;
    return pending_ptr{p};
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::size_t size(std::uint32_t level) const noexcept {
    return levels_[level].count;
  }

  /// The earliest queue-timeout deadline, or `never`.
  [[nodiscard]] time_point next_timeout() const noexcept { return deadlines_.earliest(); }

  /// Applies every timeout that expired at or before `now`: a REJECT request is removed and
  /// passed to `on_reject(pending_ptr)`; a DELAY request moves behind its level's unexpired
  /// requests and keeps no deadline.
  template <class OnReject>
  void expire(time_point now, OnReject&& on_reject) {
    while (!deadlines_.empty() && deadlines_.top()->deadline <= now) {
      pending_request* p = deadlines_.top();
      level_state& level = levels_[p->level];
      if (level.policy.timeout_action == timeout_action::reject) {
        on_reject(remove(p));
      } else {
        deadlines_.erase(p);
        level.waiting.erase(p);
        p->delayed = true;
        p->deadline = never;
        level.delayed.push_back(p);
      }
    }
  }

  /// Removes every request whose cancellation token fired, appending them to `out`.
  void take_cancelled(std::vector<pending_ptr>& out) {
    for (pending_request* p = first(); p != nullptr;) {
      pending_request* next_in_walk = after(p);
      if (p->request.cancellation.cancelled()) {
        out.push_back(remove(p));
      }
      p = next_in_walk;
    }
  }

  /// Removes every request, in walk order, appending them to `out`.
  void take_all(std::vector<pending_ptr>& out) {
    while (pending_request* p = first()) {
      out.push_back(remove(p));
    }
  }

  /// The first request in walk order, or nullptr.
  [[nodiscard]] pending_request* first() const noexcept { return first_from(0, false); }

  /// The request after `p` in walk order, or nullptr.
  [[nodiscard]] pending_request* after(const pending_request* p) const noexcept {
    if (p->next != nullptr) {
      return p->next;
    }
    return p->delayed ? first_from(p->level + 1, false) : first_from(p->level, true);
  }

private:
  struct level_state {
    queue_policy policy;
    detail::request_list waiting;
    detail::request_list delayed;
    std::size_t count = 0;
  };

  [[nodiscard]] pending_request* first_from(std::size_t level, bool delayed_only) const noexcept {
    for (; level < levels_.size(); ++level) {
      if (!delayed_only && !levels_[level].waiting.empty()) {
        return levels_[level].waiting.front();
      }
      if (!levels_[level].delayed.empty()) {
        return levels_[level].delayed.front();
      }
      delayed_only = false;
    }
    return nullptr;
  }

  std::vector<level_state> levels_;
  std::uint32_t default_level_ = 0;
  std::size_t size_ = 0;
  detail::deadline_heap deadlines_;
};

} // namespace servekit
