#pragma once
/// \file
/// Request cancellation: a source the client keeps and a token the request carries.

#include <atomic>
#include <memory>

namespace servekit {

/// Read side of a cancellation flag; an empty token is never cancelled and costs nothing.
class cancellation_token {
public:
  cancellation_token() noexcept = default;
  [[nodiscard]] bool cancelled() const noexcept {
    return flag_ != nullptr && flag_->load(std::memory_order_acquire);
  }
  [[nodiscard]] bool can_be_cancelled() const noexcept { return flag_ != nullptr; }

private:
  friend class cancellation_source;
  explicit cancellation_token(std::shared_ptr<const std::atomic<bool>> flag) noexcept
      : flag_{std::move(flag)} {}
  std::shared_ptr<const std::atomic<bool>> flag_;
};

/// Write side: `cancel()` marks every token made from this source. Only requests that opted in
/// pay for the shared flag. Pass the model's `cancel` to have a queued request answered at once.
class cancellation_source {
public:
  cancellation_source() : flag_{std::make_shared<std::atomic<bool>>(false)} {}
  [[nodiscard]] cancellation_token token() const noexcept { return cancellation_token{flag_}; }
  void cancel() noexcept { flag_->store(true, std::memory_order_release); }
  [[nodiscard]] bool cancelled() const noexcept { return flag_->load(std::memory_order_acquire); }

private:
  std::shared_ptr<std::atomic<bool>> flag_;
};

} // namespace servekit
