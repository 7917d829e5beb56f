#pragma once
// A gate test threads wait at until it opens; a wait gives up after 10 s so that a broken test
// fails instead of hanging.

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace archetypes {

class gate {
public:
  void open() {
    {
      const std::lock_guard lock{mutex_};
      open_ = true;
    }
    cv_.notify_all();
  }
  [[nodiscard]] bool wait() {
    std::unique_lock lock{mutex_};
    return cv_.wait_for(lock, std::chrono::seconds{10}, [&] { return open_; });
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

} // namespace archetypes
