#pragma once
/// \file
/// The requests of a decoupled model that are still owed their final response: one shared state
/// per request (what a response_sender points to) and the model's table of them, whose watchdog
/// enforces final_response_timeout_microseconds.

#include <servekit/backend/detail/response_channel.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/status.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/queue/pending_request.hpp>
#include <servekit/runtime/detail/decoupled_deadlines.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace servekit::detail {

class decoupled_requests;

/// One request of a decoupled model from the start of its execution to its final response.
/// Every response goes through `send`, under one mutex per request, so a backend may send from
/// any thread; the first final response wins and everything after it is refused. Shared by the
/// model's table (until the final) and the backend's response_sender (while it holds one), which
/// sees it as backend/'s `response_channel`: one virtual call per response, next to the mutex.
class decoupled_request final : public response_channel {
public:
  decoupled_request(decoupled_requests& owner, std::uint64_t key, response_sink&& sink,
                    const request& r, time_point start)
      : owner_{owner}, key_{key}, sink_{std::move(sink)}, id_{r.id},
        requested_outputs_{r.requested_outputs}, start_{start} {}

  decoupled_request(const decoupled_request&) = delete;
  decoupled_request& operator=(const decoupled_request&) = delete;
  decoupled_request(decoupled_request&&) = delete;
  decoupled_request& operator=(decoupled_request&&) = delete;
  ~decoupled_request() override = default;

  /// Delivers `r`, as the final response when `final`. Not ok (and `r` dropped) when the
  /// request already has its final response: sent by the backend, or an error for a timeout,
  /// a cancelling shutdown or a released sender.
  status send(response&& r, bool final) override;

  /// Sends `s` as the final error unless the final response was sent already; true if it did.
  bool fail(status s) { return send(response::failure(std::move(s)), true).ok(); }

  /// A response_sender let go of the request: without a final response it gets an error one.
  void release() override;

  [[nodiscard]] bool finished() const override {
    const std::lock_guard lock{mutex_};
    return final_sent_;
  }
  [[nodiscard]] const std::string& id() const noexcept { return id_; }

private:
  decoupled_requests& owner_;
  const std::uint64_t key_;
  mutable std::mutex mutex_;
  response_sink sink_;
  std::string id_;
  std::vector<std::string> requested_outputs_;
  time_point start_;
  std::uint64_t sent_ = 0; // responses so far: the index of the next one
  bool final_sent_ = false;
  status why_final_; // what ended the request, for the refusal of a late send
};

/// A decoupled model's outstanding requests. `open` registers a request as its execution
/// starts; its final response unregisters it. With a final_response_timeout a watchdog thread
/// answers requests whose final is overdue with `deadline_exceeded`. Shutdown either waits for
/// them (drain) or answers them `cancelled`.
class decoupled_requests {
public:
  decoupled_requests(std::string model_name, model_statistics& stats,
                     std::uint64_t final_response_timeout_microseconds)
      : model_name_{std::move(model_name)}, stats_{stats},
        timeout_us_{final_response_timeout_microseconds} {
    if (timeout_us_ != 0) {
      watchdog_ = std::thread{[this] { run_watchdog(); }};
    }
  }
  decoupled_requests(const decoupled_requests&) = delete;
  decoupled_requests& operator=(const decoupled_requests&) = delete;
  ~decoupled_requests() { stop(); }

  /// Takes over `p`'s sink: from now on its responses go through the returned state.
  [[nodiscard]] std::shared_ptr<decoupled_request> open(pending_request& p, time_point start) {
    return open(std::move(p.sink), p.request, start);
  }

  /// The same for a request outside the queues (e.g. a warmup sample): responses go to `sink`.
  [[nodiscard]] std::shared_ptr<decoupled_request> open(response_sink&& sink, const request& r,
                                                        time_point start) {
    const std::lock_guard lock{mutex_};
    const std::uint64_t key = next_key_++;
    auto state = std::make_shared<decoupled_request>(*this, key, std::move(sink), r, start);
    const time_point deadline = timeout_us_ == 0 ? never : deadline_after(start, timeout_us_);
    deadlines_.add(key, deadline);
    live_.emplace(key, state);
    if (deadline < watchdog_target_) {
      changed_.notify_all();
    }
    return state;
  }

  /// Answers every outstanding request `cancelled` (a cancelling shutdown), or `unavailable`
  /// "server is shutting down" when `aborting` (shutdown_mode::abort).
  SERVEKIT_DECL void cancel_all(bool aborting = false);

  /// Blocks until no request is outstanding (a draining shutdown). With a timeout configured
  /// the watchdog bounds the wait.
  void wait_idle() {
    std::unique_lock lock{mutex_};
    changed_.wait(lock, [&] { return live_.empty(); });
  }

  /// Stops the watchdog thread. Idempotent.
  void stop() {
    {
      const std::lock_guard lock{mutex_};
      stop_ = true;
    }
    changed_.notify_all();
    if (watchdog_.joinable()) {
      watchdog_.join();
    }
  }

  [[nodiscard]] std::size_t outstanding() const {
    const std::lock_guard lock{mutex_};
    return live_.size();
  }

  [[nodiscard]] const std::string& model_name() const noexcept { return model_name_; }
  [[nodiscard]] model_statistics& stats() const noexcept { return stats_; }
  [[nodiscard]] std::uint64_t timeout_microseconds() const noexcept { return timeout_us_; }

private:
  friend class decoupled_request;

  /// Request `key` got its final response.
  SERVEKIT_DECL void finished(std::uint64_t key);

  /// Caller holds mutex_.
  SERVEKIT_DECL std::vector<std::shared_ptr<decoupled_request>>
  take(const std::vector<std::uint64_t>& keys);

  SERVEKIT_DECL void run_watchdog();

  const std::string model_name_;
  model_statistics& stats_;
  const std::uint64_t timeout_us_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  decoupled_deadlines deadlines_;
  std::unordered_map<std::uint64_t, std::shared_ptr<decoupled_request>> live_;
  std::uint64_t next_key_ = 0;
  time_point watchdog_target_ = time_point::min(); // while awake: notify on every open
  bool stop_ = false;
  std::thread watchdog_;
};

} // namespace servekit::detail

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/runtime/impl/decoupled_requests.ipp>
#endif
