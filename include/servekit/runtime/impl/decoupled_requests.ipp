#pragma once
/// \file
/// Definitions for servekit/runtime/detail/decoupled_requests.hpp. Compiled once into
/// servekit::servekit, or included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/detail/decoupled_requests.hpp>
#include <servekit/runtime/shutdown_mode.hpp>

namespace servekit::detail {

SERVEKIT_DECL void decoupled_requests::cancel_all(bool aborting) {
  std::vector<std::uint64_t> keys;
  std::vector<std::shared_ptr<decoupled_request>> states;
  {
    const std::lock_guard lock{mutex_};
    deadlines_.take_all(keys);
    states = take(keys);
  }
  for (auto& s : states) {
    s->fail(aborting
                ? unavailable(std::string{shutting_down_message})
                : cancelled("Request cancelled: model '" + model_name_ + "' is shutting down"));
  }
}

SERVEKIT_DECL void decoupled_requests::finished(std::uint64_t key) {
  // Notified under the lock: a drain waiting in wait_idle() may destroy this table as soon as
  // it sees the table empty.
  const std::lock_guard lock{mutex_};
  deadlines_.remove(key);
  live_.erase(key);
  if (live_.empty()) {
    changed_.notify_all();
  }
}

SERVEKIT_DECL std::vector<std::shared_ptr<decoupled_request>>
decoupled_requests::take(const std::vector<std::uint64_t>& keys) {
  std::vector<std::shared_ptr<decoupled_request>> out;
  out.reserve(keys.size());
  for (const auto key : keys) {
    if (auto it = live_.find(key); it != live_.end()) {
      out.push_back(it->second); // live_ keeps it until its final response calls finished()
    }
  }
  return out;
}

SERVEKIT_DECL void decoupled_requests::run_watchdog() {
  std::vector<std::uint64_t> expired;
  std::unique_lock lock{mutex_};
  while (!stop_) {
    deadlines_.tick(clock::now(), expired);
    if (!expired.empty()) {
      auto states = take(expired);
      expired.clear();
      lock.unlock();
      for (auto& s : states) {
        s->fail(deadline_exceeded(
            "model '" + model_name_ + "' sent no final response for request '" + s->id() +
            "' within final_response_timeout_microseconds=" + std::to_string(timeout_us_)));
      }
      lock.lock();
      continue;
    }
    watchdog_target_ = deadlines_.next_deadline();
    if (watchdog_target_ == never) {
      changed_.wait(lock);
    } else {
      changed_.wait_until(lock, watchdog_target_);
    }
    watchdog_target_ = time_point::min();
  }
}

SERVEKIT_DECL status decoupled_request::send(response&& r, bool final) {
  // Nothing may be sent after the final response, so the sink (and what it holds: an HTTP
  // session, say) is let go with it, not when the last response_sender goes: a backend that
  // keeps a finished sender must not keep its client's connection, or a server's exit, waiting.
  // Destroyed last, outside the lock.
  response_sink spent;
  {
    const std::lock_guard lock{mutex_};
    if (final_sent_) {
      return unavailable(
          "request '" + id_ + "' of model '" + owner_.model_name() +
          "' already has its final response (" +
          (why_final_.ok() ? std::string{"sent by the backend"} : why_final_.message()) +
          "); the response was dropped");
    }
    r.final = final;
    if (r.id.empty()) {
      r.id = id_;
    }
    if (!requested_outputs_.empty()) {
      std::erase_if(r.outputs, [&](const tensor& t) {
        return std::find(requested_outputs_.begin(), requested_outputs_.end(), t.name) ==
               requested_outputs_.end();
      });
    }
    const response_outcome outcome = !r.ok()                      ? response_outcome::fail
                                     : final && r.outputs.empty() ? response_outcome::empty
                                                                  : response_outcome::success;
    owner_.stats().record_response(sent_++, outcome, elapsed_ns(start_, clock::now()));
    if (final) {
      final_sent_ = true;
      why_final_ = r.ok() ? status{} : r.status;
    }
    try {
      sink_.send(std::move(r));
    } catch (...) { // NOLINT(bugprone-empty-catch): sinks must not throw (see deliver())
    }
    if (final) {
      spent = std::move(sink_);
    }
  }
  if (final) {
    owner_.finished(key_);
  }
  return {};
}

SERVEKIT_DECL void decoupled_request::release() {
  if (!finished()) {
    fail(internal_error("backend of model '" + owner_.model_name() + "' released request '" + id_ +
                        "' without a final response"));
  }
}

} // namespace servekit::detail
