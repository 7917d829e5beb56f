#pragma once
/// \file
/// The `execute_delay_ms` model parameter every bundled backend takes: a sleep per execution, so
/// that batching, queueing and timeouts can be watched from outside the server.

#include <servekit/backend/batch.hpp>
#include <servekit/backend/instance_context.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

namespace servekit_server {

/// The parameter's value: config `"parameters": {"execute_delay_ms": {"string_value": "100"}}`.
/// Absent: no delay. Throws (so the model fails to load, naming the parameter) when it is not a
/// non-negative integer.
[[nodiscard]] inline std::chrono::milliseconds
execute_delay(const servekit::instance_context& context) {
  const auto text = context.parameter("execute_delay_ms");
  if (!text) {
    return std::chrono::milliseconds{0};
  }
  std::int64_t ms = 0;
  const auto* const end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, ms);
  if (ec != std::errc{} || ptr != end || ms < 0) {
    throw std::invalid_argument("parameter 'execute_delay_ms' must be a non-negative integer "
                                "(milliseconds), got \"" +
                                std::string{*text} + "\"");
  }
  return std::chrono::milliseconds{ms};
}

/// Sleeps `delay` on the instance thread: the backend's simulated work. An instance thread is the
/// backend's to use, so blocking it is what a slow model does anyway.
inline void simulate_work(std::chrono::milliseconds delay) {
  if (delay.count() > 0) {
    std::this_thread::sleep_for(delay);
  }
}

/// Backend `B` (an example's, written without the parameter) taking `execute_delay_ms`: read when
/// an instance is built, so a bad value fails the load, and slept before each of B's executions.
template <class B>
class with_execute_delay : public B {
public:
  explicit with_execute_delay(const servekit::instance_context& context)
      : B{context}, delay_{execute_delay(context)} {}

  void execute(servekit::batch& b) {
    simulate_work(delay_);
    B::execute(b);
  }

private:
  std::chrono::milliseconds delay_;
};

} // namespace servekit_server
