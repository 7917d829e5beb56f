#pragma once
/// \file
/// request_queue: the priority levels of a decision core, each with its queue policy, its FIFO
/// of waiting requests, its list of DELAY-expired requests, and exact timeout deadlines.

#include <servekit/core/assert.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/status.hpp>
#include <servekit/queue/pending_request.hpp>
#include <servekit/queue/queue_policy.hpp>

#include <algorithm>
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

/// The number of admission classes (level indices) a request_queue built from `options` uses:
/// the shells size their lock-free per-level admission counters with it.
///
/// Up to `request_queue::dense_level_limit` priority levels, each level is its own class
/// (index = level - 1). Above it (Triton accepts any uint64 and keeps only the levels in use),
/// the classes are the levels named by the configuration (the default level and every level
/// with its own policy), each its own class, and the gaps around them, one class per gap: so
/// their number follows the configuration's size, never the priority_levels value.
[[nodiscard]] inline std::size_t priority_class_count(const priority_options& options);

/// The waiting requests of one model, by priority level. Pure data structure: it never reads a
/// clock and never responds; callers pass the time and receive the requests that leave.
///
/// Order of service ("walk order"): level 1's queue, then level 1's delayed requests, then
/// level 2's queue, and so on; FIFO inside each list.
///
/// Storage is proportional to the levels in use: up to dense_level_limit levels every level is
/// created up front (the fast path: a request's level is its index); above it a level exists
/// only while it holds requests, in a vector sorted by level. A request's `level` is then its
/// admission class (see priority_class_count), which carries the policy and max_queue_size; a
/// gap's unnamed levels share the default policy and, unlike Triton's per-level bound, one
/// max_queue_size between them.
class request_queue {
public:
  /// The most priority levels stored densely.
  static constexpr std::uint64_t dense_level_limit = 64;

  request_queue() : request_queue(priority_options{}) {}
  explicit request_queue(const priority_options& options)
      : priority_levels_{options.priority_levels},
        default_key_{options.priority_levels == 0 ? 1 : options.default_priority_level},
        dense_{options.priority_levels <= dense_level_limit} {
    const auto policy_of = [&](std::uint64_t key) {
      const auto it = options.priority_queue_policy.find(key);
      return options.priority_levels != 0 && it != options.priority_queue_policy.end()
                 ? it->second
                 : options.default_queue_policy;
    };
    if (dense_) {
      const std::uint64_t count = options.priority_levels == 0 ? 1 : options.priority_levels;
      levels_.resize(static_cast<std::size_t>(count));
      classes_.resize(static_cast<std::size_t>(count));
      for (std::size_t i = 0; i < levels_.size(); ++i) {
        levels_[i].key = i + 1;
        classes_[i].policy = policy_of(i + 1);
      }
      default_class_ = static_cast<std::uint32_t>(default_key_ - 1);
      return;
    }
    // Sparse: named levels sorted; class 2i is the gap below named_[i], 2i+1 is named_[i], and
    // the last class is the gap above the last named level.
    for (const auto& entry : options.priority_queue_policy) {
      named_.push_back(entry.first);
    }
    named_.insert(std::lower_bound(named_.begin(), named_.end(), default_key_), default_key_);
    named_.erase(std::unique(named_.begin(), named_.end()), named_.end());
    classes_.resize(2 * named_.size() + 1);
    for (auto& c : classes_) {
      c.policy = options.default_queue_policy;
    }
    for (std::size_t i = 0; i < named_.size(); ++i) {
      classes_[2 * i + 1].policy = policy_of(named_[i]);
    }
    default_class_ = class_of_key(default_key_);
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

  /// The number of admission classes (priority levels when they are stored densely).
  [[nodiscard]] std::size_t level_count() const noexcept { return classes_.size(); }
  /// The number of levels that exist now (every level when dense; the levels holding requests
  /// when sparse).
  [[nodiscard]] std::size_t levels_in_use() const noexcept { return levels_.size(); }
  [[nodiscard]] const queue_policy& policy(std::uint32_t level) const noexcept {
    return classes_[level].policy;
  }

  /// Triton's mapping: priority 0 or above the number of levels goes to the default level.
  /// Returns the level's index (its admission class when levels are sparse).
  [[nodiscard]] std::uint32_t level_of(std::uint64_t priority) const noexcept {
    if (dense_) {
      if (levels_.size() == 1) {
        return 0;
      }
      if (priority == 0 || priority > levels_.size()) {
        return default_class_;
      }
      return static_cast<std::uint32_t>(priority - 1);
    }
    if (priority == 0 || priority > priority_levels_) {
      return default_class_;
    }
    return class_of_key(priority);
  }

  /// The request's effective queue timeout under its level's policy (0: none). As in Triton's
  /// PolicyQueue, a request's own timeout only ever lowers a non-zero default: with no default
  /// timeout, request timeouts are ignored even when overriding is allowed.
  [[nodiscard]] std::uint64_t timeout_us(const request& r, std::uint32_t level) const noexcept {
    const queue_policy& p = classes_[level].policy;
    std::uint64_t timeout = p.default_timeout_microseconds;
    if (p.allow_timeout_override && r.timeout_us != 0 && r.timeout_us < timeout) {
      timeout = r.timeout_us;
    }
    return timeout;
  }

  /// Whether `level` can take one more request (its max_queue_size).
  [[nodiscard]] bool has_room(std::uint32_t level) const noexcept {
    const auto max = classes_[level].policy.max_queue_size;
    return max == 0 || classes_[level].count < max;
  }

  /// Queues `p` at the back of its level (which `p->level` must name) with its deadline
  /// computed from its arrival time. Takes ownership.
  void push(pending_ptr owned) {
    pending_request* p = owned.get();
    level_state& level = levels_[dense_ ? p->level : sparse_index_for_push(key_of(*p))];
    owned.release();
    const std::uint64_t timeout = timeout_us(p->request, p->level);
    p->deadline = timeout == 0 ? never : deadline_after(p->request.arrival, timeout);
    p->delayed = false;
    level.waiting.push_back(p);
    ++level.count;
    ++classes_[p->level].count;
    ++size_;
    if (p->deadline != never) {
      deadlines_.push(p);
    }
  }

  /// Removes `p` (anywhere in the queue) and gives back ownership.
  [[nodiscard]] pending_ptr remove(pending_request* p) noexcept {
    const std::size_t index = index_of(*p);
    level_state& level = levels_[index];
    (p->delayed ? level.delayed : level.waiting).erase(p);
    if (p->heap_index != pending_request::no_heap_index) {
      deadlines_.erase(p);
    }
    --level.count;
    --classes_[p->level].count;
    --size_;
    if (!dense_ && level.count == 0) {
      levels_.erase(levels_.begin() + static_cast<std::ptrdiff_t>(index));
    }
    return pending_ptr{p};
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// Requests queued in `level` (its admission class when levels are sparse).
  [[nodiscard]] std::size_t size(std::uint32_t level) const noexcept {
    return classes_[level].count;
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
      if (classes_[p->level].policy.timeout_action == timeout_action::reject) {
        on_reject(remove(p));
      } else {
        level_state& level = levels_[index_of(*p)];
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
    const std::size_t index = index_of(*p);
    return p->delayed ? first_from(index + 1, false) : first_from(index, true);
  }

private:
  struct level_state {
    std::uint64_t key = 0; ///< the priority level (1-based)
    detail::request_list waiting;
    detail::request_list delayed;
    std::size_t count = 0;
  };
  struct class_state {
    queue_policy policy;
    std::size_t count = 0;
  };

  /// The level a queued request belongs to (Triton's mapping of its priority).
  [[nodiscard]] std::uint64_t key_of(const pending_request& p) const noexcept {
    const std::uint64_t priority = p.request.priority;
    return priority == 0 || priority > priority_levels_ ? default_key_ : priority;
  }

  [[nodiscard]] std::uint32_t class_of_key(std::uint64_t key) const noexcept {
    const auto it = std::lower_bound(named_.begin(), named_.end(), key);
    const auto i = static_cast<std::uint32_t>(it - named_.begin());
    return it != named_.end() && *it == key ? 2 * i + 1 : 2 * i;
  }

  /// The index in levels_ of a queued request's level.
  [[nodiscard]] std::size_t index_of(const pending_request& p) const noexcept {
    if (dense_) {
      return p.level;
    }
    const std::uint64_t key = key_of(p);
    const auto it =
        std::lower_bound(levels_.begin(), levels_.end(), key,
                         [](const level_state& l, std::uint64_t k) { return l.key < k; });
    SERVEKIT_ASSERT(it != levels_.end() && it->key == key, "request's level is not in the queue");
    return static_cast<std::size_t>(it - levels_.begin());
  }

  /// The index of level `key`, created (empty) if it holds no requests yet.
  std::size_t sparse_index_for_push(std::uint64_t key) {
    const auto it =
        std::lower_bound(levels_.begin(), levels_.end(), key,
                         [](const level_state& l, std::uint64_t k) { return l.key < k; });
    const auto index = static_cast<std::size_t>(it - levels_.begin());
    if (it == levels_.end() || it->key != key) {
      level_state fresh;
      fresh.key = key;
      levels_.insert(it, fresh);
    }
    return index;
  }

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
  std::vector<class_state> classes_;
  std::vector<std::uint64_t> named_; ///< sparse only: the levels the configuration names, sorted
  std::uint64_t priority_levels_ = 0;
  std::uint64_t default_key_ = 1;
  std::uint32_t default_class_ = 0;
  bool dense_ = true;
  std::size_t size_ = 0;
  detail::deadline_heap deadlines_;
};

inline std::size_t priority_class_count(const priority_options& options) {
  if (options.priority_levels <= request_queue::dense_level_limit) {
    return options.priority_levels == 0 ? 1 : static_cast<std::size_t>(options.priority_levels);
  }
  std::vector<std::uint64_t> named;
  for (const auto& entry : options.priority_queue_policy) {
    named.push_back(entry.first);
  }
  named.push_back(options.default_priority_level);
  std::sort(named.begin(), named.end());
  named.erase(std::unique(named.begin(), named.end()), named.end());
  return 2 * named.size() + 1;
}

} // namespace servekit
