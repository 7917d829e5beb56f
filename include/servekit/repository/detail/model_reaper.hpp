#pragma once
/// \file
/// model_reaper: the thread that shuts down and destroys retired models, for model_repository.
///
/// A published model is shared (`std::shared_ptr<const loaded_model>`) by the repository's
/// table, by requests in flight and by the ensembles built over it, so the last reference may be
/// dropped anywhere: on an HTTP I/O thread, or inside a response sink on the model's own
/// instance thread. Destroying a model joins its instance threads, which on its own instance
/// thread would deadlock and on an I/O thread would stall every connection it serves. So the
/// last reference only hands the object to this thread, which drains and destroys it.

#include <servekit/runtime/shutdown_mode.hpp>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>

namespace servekit::detail {

/// A queue of retired objects and the loop that destroys them. `T` needs a public member
/// `T* next_retired_` (an intrusive link, so that retiring never allocates and cannot fail) and
/// `void shutdown(shutdown_mode)`.
///
/// Shared (`std::shared_ptr<model_reaper>`) by the owner, by every live object's deleter and by
/// its own thread, so it outlives the owner while objects remain.
template <class T>
class model_reaper {
public:
  /// Counts one more live object; call before handing it to a `retire` deleter.
  void track() {
    const std::lock_guard lock{mutex_};
    ++live_;
  }

  /// Hands `object` (a tracked one, whose last reference is gone) to the reaper thread. Any
  /// thread, including the reaper's own (an ensemble dropping its composing models).
  void retire(T* object) noexcept {
    {
      const std::lock_guard lock{mutex_};
      object->next_retired_ = nullptr;
      if (tail_ == nullptr) {
        head_ = object;
      } else {
        tail_->next_retired_ = object;
      }
      tail_ = object;
    }
    work_.notify_one();
  }

  /// The reaper thread's body: destroys retired objects in order until `close()` was called
  /// and no tracked object remains.
  void run() {
    std::unique_lock lock{mutex_};
    for (;;) {
      work_.wait(lock, [&] { return head_ != nullptr || (closed_ && live_ == 0); });
      if (head_ == nullptr) {
        return;
      }
      T* object = head_;
      head_ = object->next_retired_;
      if (head_ == nullptr) {
        tail_ = nullptr;
      }
      busy_ = true;
      lock.unlock();
      destroy(object);
      lock.lock();
      busy_ = false;
      --live_;
      if (head_ == nullptr) {
        idle_.notify_all();
      }
    }
  }

  /// Blocks until every object retired so far (and whatever destroying them retires) is
  /// destroyed.
  void wait_idle() {
    std::unique_lock lock{mutex_};
    idle_.wait(lock, [&] { return head_ == nullptr && !busy_; });
  }

  /// wait_idle(), then lets the thread end once no tracked object remains. Returns whether none
  /// remains now (the thread is ending and may be joined) or some are still referenced
  /// elsewhere (the thread goes on until they are retired: detach it).
  [[nodiscard]] bool close() {
    bool done = false;
    {
      std::unique_lock lock{mutex_};
      idle_.wait(lock, [&] { return head_ == nullptr && !busy_; });
      closed_ = true;
      done = live_ == 0;
    }
    work_.notify_all();
    return done;
  }

  /// Starts the thread that runs `run()` on `self`; it keeps `self` alive while it runs.
  [[nodiscard]] static std::thread start(std::shared_ptr<model_reaper> self) {
    return std::thread{[self = std::move(self)] { self->run(); }};
  }

private:
  static void destroy(T* object) noexcept {
    try {
      object->shutdown(shutdown_mode::drain);
    } catch (...) { // NOLINT(bugprone-empty-catch): destroying it below still drains it
    }
    delete object; // NOLINT(cppcoreguidelines-owning-memory): the reaper owns retired objects
  }

  std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable idle_;
  T* head_ = nullptr;
  T* tail_ = nullptr;
  std::size_t live_ = 0;
  bool busy_ = false;
  bool closed_ = false;
};

} // namespace servekit::detail
