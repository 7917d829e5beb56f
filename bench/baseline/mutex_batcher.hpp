#pragma once
/// \file
/// The dynamic batcher a user would write first, as the baseline for bench_dynamic: one
/// std::mutex, one std::condition_variable and a std::deque of requests, with one instance
/// thread. Its batch rule is the one bench_dynamic configures servekit with (max_queue_delay 0):
/// when the instance is free, take everything queued, up to max_batch_size, and run it.
///
/// It runs the same backend type as servekit (through servekit::batch) and answers through the
/// same servekit::response_sink, so the two differ only in how requests get from submitters to
/// the instance. Like most first attempts it validates nothing and keeps no statistics beyond
/// two counters.

#include <servekit/backend/batch.hpp>
#include <servekit/backend/instance_context.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/status.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace servekit_bench {

template <class Backend>
class mutex_batcher {
public:
  explicit mutex_batcher(std::size_t max_batch_size)
      : max_batch_size_{max_batch_size}, context_{make_context(max_batch_size)}, backend_{
                                                                                     context_} {
    thread_ = std::thread{[this] { run(); }};
  }

  mutex_batcher(const mutex_batcher&) = delete;
  mutex_batcher& operator=(const mutex_batcher&) = delete;

  /// Executes everything queued, then stops the instance thread.
  ~mutex_batcher() {
    {
      const std::lock_guard lock{mutex_};
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  /// Queues `r`; `sink` gets its response on the instance thread.
  servekit::status submit(servekit::request&& r, servekit::response_sink sink) {
    {
      const std::lock_guard lock{mutex_};
      queue_.push_back(item{std::move(r), std::move(sink)});
    }
    cv_.notify_one();
    return {};
  }

  [[nodiscard]] std::uint64_t execution_count() const noexcept {
    return executions_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t inference_count() const noexcept {
    return inferences_.load(std::memory_order_relaxed);
  }

private:
  struct item {
    servekit::request request;
    servekit::response_sink sink;
  };

  static servekit::instance_context make_context(std::size_t max_batch_size) {
    servekit::instance_context c;
    c.model_name = "baseline";
    c.instance_name = "baseline_0";
    c.max_batch_size = static_cast<std::int32_t>(max_batch_size);
    return c;
  }

  void run() {
    std::vector<item> taken;
    taken.reserve(max_batch_size_);
    servekit::batch b;
    for (;;) {
      {
        std::unique_lock lock{mutex_};
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) {
          return; // stopping, and everything queued has run
        }
        while (!queue_.empty() && taken.size() < max_batch_size_) {
          taken.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      b.clear();
      b.bind(context_, false);
      for (auto& it : taken) {
        b.add(it.request, 1, it.sink);
      }
      backend_.execute(b);
      for (std::size_t i = 0; i < taken.size(); ++i) {
        taken[i].sink.complete(std::move(b.response(i)));
      }
      executions_.fetch_add(1, std::memory_order_relaxed);
      inferences_.fetch_add(taken.size(), std::memory_order_relaxed);
      b.clear();
      taken.clear();
    }
  }

  std::size_t max_batch_size_;
  servekit::instance_context context_;
  Backend backend_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<item> queue_; // guarded by mutex_
  bool stopping_ = false;  // guarded by mutex_

  std::atomic<std::uint64_t> executions_{0};
  std::atomic<std::uint64_t> inferences_{0};
  std::thread thread_;
};

} // namespace servekit_bench
