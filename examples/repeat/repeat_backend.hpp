#pragma once
/// \file
/// Backend `repeat` (Triton's repeat_int32): a decoupled model. A request with N values in IN
/// gets N responses, response i carrying OUT = IN[i] and IDX = i, sent DELAY[i] milliseconds
/// after the previous one, then an empty final response WAIT milliseconds after the last.
///
/// execute() only hands each request to the instance's worker thread and returns at once; the
/// worker sends every response through the request's response_sender when it is due, so the
/// responses of several requests interleave. Model parameter "send_final": "false" makes it
/// never send the final flag (to show final_response_timeout_microseconds catching it). A
/// request whose client left (request.cancellation) gets no further responses: at its next due
/// response it is ended with a final `cancelled` error.

#include <servekit/backend/backend.hpp>
#include <servekit/backend/batch.hpp>
#include <servekit/backend/response_sender.hpp>
#include <servekit/core/cancellation.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace repeat {

class backend {
public:
  static constexpr bool decoupled = true;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"IN", servekit::data_type::int32, {-1}},
      {"DELAY", servekit::data_type::uint32, {-1}},
      {"WAIT", servekit::data_type::uint32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::int32, {1}}, {"IDX", servekit::data_type::uint32, {1}}};

  explicit backend(const servekit::instance_context& context)
      : send_final_{context.parameter("send_final").value_or("true") != "false"}, worker_{[this] {
          run();
        }} {}

  backend(const backend&) = delete;
  backend& operator=(const backend&) = delete;

  /// Stops the worker. Requests it still holds lose their sender: each gets an error final
  /// (unless the model already answered it, e.g. on its final_response_timeout).
  ~backend() {
    {
      const std::lock_guard lock{mutex_};
      stop_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  void execute(servekit::batch& b) {
    const auto now = clock::now();
    for (std::size_t i = 0; i < b.size(); ++i) {
      servekit::request& r = b.request(i);
      job j;
      const auto in = r.input("IN").values<std::int32_t>();
      j.values.assign(in.begin(), in.end());
      if (const auto* delay = r.find_input("DELAY")) {
        const auto d = delay->values<std::uint32_t>();
        j.delays_ms.assign(d.begin(), d.end());
      }
      if (j.delays_ms.size() != j.values.size()) {
        b.response(i) = servekit::response::failure(servekit::invalid_argument(
            "repeat: DELAY must have one value per IN value (" + std::to_string(j.values.size()) +
            "), got " + std::to_string(j.delays_ms.size())));
        continue;
      }
      if (const auto* wait = r.find_input("WAIT")) {
        j.wait_ms = wait->values<std::uint32_t>()[0];
      }
      j.due = now + (j.values.empty() ? ms(j.wait_ms) : ms(j.delays_ms[0]));
      j.cancellation = r.cancellation;
      j.sender = b.take_sender(i);
      {
        const std::lock_guard lock{mutex_};
        jobs_.push_back(std::move(j));
      }
    }
    wake_.notify_all();
  }

private:
  using clock = std::chrono::steady_clock;

  /// One request being answered: the next response is `next`, due at `due`.
  struct job {
    servekit::response_sender sender;
    servekit::cancellation_token cancellation; ///< set when the client leaves
    std::vector<std::int32_t> values;
    std::vector<std::uint32_t> delays_ms;
    std::uint32_t wait_ms = 0;
    std::size_t next = 0;
    clock::time_point due;
  };

  static clock::duration ms(std::uint32_t n) { return std::chrono::milliseconds{n}; }

  void run() {
    std::unique_lock lock{mutex_};
    while (!stop_) {
      auto soonest = std::min_element(jobs_.begin(), jobs_.end(),
                                      [](const job& a, const job& b) { return a.due < b.due; });
      if (soonest == jobs_.end()) {
        wake_.wait(lock);
        continue;
      }
      if (clock::now() < soonest->due) {
        wake_.wait_until(lock, soonest->due);
        continue;
      }
      job& j = *soonest;
      if (j.cancellation.cancelled()) {
        // The client left (or cancelled): stop here, as Triton's backends do when
        // TRITONBACKEND_RequestIsCancelled says so, with a final `cancelled` error.
        (void)j.sender.send_final(servekit::response::failure(
            servekit::cancelled("repeat: cancelled after " + std::to_string(j.next) + " of " +
                                std::to_string(j.values.size()) + " responses")));
        jobs_.erase(soonest);
        continue;
      }
      if (j.next < j.values.size()) {
        servekit::response r;
        r.add_output("OUT", servekit::data_type::int32, {1}).values<std::int32_t>()[0] =
            j.values[j.next];
        r.add_output("IDX", servekit::data_type::uint32, {1}).values<std::uint32_t>()[0] =
            static_cast<std::uint32_t>(j.next);
        ++j.next;
        j.due += j.next < j.values.size() ? ms(j.delays_ms[j.next]) : ms(j.wait_ms);
        (void)j.sender.send(std::move(r)); // refused once the request timed out: fine
        continue;
      }
      if (send_final_) {
        (void)j.sender.finish();
      } else {
        abandoned_.push_back(std::move(j.sender)); // held until the backend is destroyed
      }
      jobs_.erase(soonest);
    }
  }

  const bool send_final_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::list<job> jobs_;
  std::vector<servekit::response_sender> abandoned_;
  bool stop_ = false;
  std::thread worker_; // last: starts after everything it uses
};

} // namespace repeat
