#pragma once
/// \file
/// intake: the lock-free hand-off from submitting threads to the thread that owns a decision core.

#include <servekit/queue/pending_request.hpp>

#include <atomic>

namespace servekit {

/// An intrusive multi-producer, single-consumer queue (D. Vyukov's design). `push` is wait-free:
/// one atomic exchange and one store, no lock, no allocation (the node is the request itself).
/// `pop` must be called by one consumer at a time (the shell serialises its consumers).
class intake {
public:
  intake() noexcept = default;
  intake(const intake&) = delete;
  intake& operator=(const intake&) = delete;
  ~intake() {
    while (pop() != nullptr) {
    }
  }

  /// Hands `p` to the consumer. Any thread. Sequentially consistent, so that a producer that
  /// pushes and then reads the consumer's "idle" flag cannot miss a consumer going to sleep.
  void push(pending_ptr p) noexcept { push_link(p.release()); }

  /// The oldest pushed request, or nullptr when none is ready. A push still in progress on
  /// another thread may make this return nullptr while `maybe_nonempty()` is true; call again.
  [[nodiscard]] pending_ptr pop() noexcept {
    detail::intake_link* tail = tail_;
    detail::intake_link* next = tail->intake_next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) {
        return nullptr;
      }
      tail_ = next;
      tail = next;
      next = next->intake_next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      tail_ = next;
      return take(tail);
    }
    if (tail != head_.load(std::memory_order_seq_cst)) {
      return nullptr; // a producer is between its exchange and its link
    }
    push_link(&stub_);
    next = tail->intake_next.load(std::memory_order_acquire);
    if (next != nullptr) {
      tail_ = next;
      return take(tail);
    }
    return nullptr;
  }

  /// False only when nothing was pushed that the consumer has not popped. Consumer side.
  /// (`tail_` is the next request to pop unless it is the stub; the queue is empty only when
  /// the stub is both the tail and the head.)
  [[nodiscard]] bool maybe_nonempty() const noexcept {
    return tail_ != &stub_ || head_.load(std::memory_order_seq_cst) != &stub_;
  }

private:
  static pending_ptr take(detail::intake_link* link) noexcept {
    return pending_ptr{static_cast<pending_request*>(link)};
  }

  void push_link(detail::intake_link* link) noexcept {
    link->intake_next.store(nullptr, std::memory_order_relaxed);
    detail::intake_link* prev = head_.exchange(link, std::memory_order_seq_cst);
    prev->intake_next.store(link, std::memory_order_release);
  }

  alignas(64) std::atomic<detail::intake_link*> head_{&stub_};
  alignas(64) detail::intake_link* tail_ = &stub_;
  detail::intake_link stub_;
};

} // namespace servekit
