// examples/repeat: a decoupled model (Triton's repeat_int32). One request with N values gets N
// responses, in order, each DELAY[i] ms after the previous, then an empty final response WAIT
// ms later. Two requests run at once, so their responses interleave. Then the same backend with
// "send_final": "false" never sends the final flag, and the model's
// final_response_timeout_microseconds answers the request with DEADLINE_EXCEEDED instead.
// Last, it loads the bundled server model's config.json (examples/models/repeat_int32) and runs
// one request through it. Exits 1 if any response is missing, out of order or wrong.
//
//     repeat [path of repeat_int32/config.json]
#include "repeat_backend.hpp"

#include <servekit/config.hpp>
#include <servekit/core.hpp>
#include <servekit/runtime.hpp>

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#ifndef SERVEKIT_REPEAT_CONFIG
#define SERVEKIT_REPEAT_CONFIG "config.json"
#endif

namespace {

using repeat_model = servekit::model<repeat::backend>;

servekit::model_options options(std::uint64_t timeout_us, bool send_final) {
  servekit::model_options o;
  o.name = "repeat_int32";
  o.model_transaction_policy = servekit::model_transaction_policy_options{
      .decoupled = true, .final_response_timeout_microseconds = timeout_us};
  if (!send_final) {
    o.parameters["send_final"] = "false";
  }
  return o;
}

servekit::request make_request(std::string id, const std::vector<std::int32_t>& values,
                               const std::vector<std::uint32_t>& delays_ms, std::uint32_t wait_ms) {
  // INT32 from the int32s, UINT32 from the uint32s.
  return servekit::request_builder{std::move(id)}
      .input("IN", {static_cast<std::int64_t>(values.size())}, values)
      .input("DELAY", {static_cast<std::int64_t>(delays_ms.size())}, delays_ms)
      .input("WAIT", {1}, {wait_ms})
      .build();
}

/// Prints every response and remembers, per request, the OUT values and how it ended.
class stream_printer {
public:
  servekit::response_sink sink() {
    return [this](servekit::response&& r) {
      const std::lock_guard lock{mutex_};
      auto& seen = by_id_[r.id];
      if (!r.ok()) {
        fmt::print("  {}: {} {}\n", r.id, r.final ? "final error" : "error", r.status.message());
        seen.error = r.status.code();
      } else if (const auto* out = r.find_output("OUT")) {
        const auto idx = r.find_output("IDX")->values<std::uint32_t>()[0];
        fmt::print("  {}: OUT={} IDX={}{}\n", r.id, out->values<std::int32_t>()[0], idx,
                   r.final ? " (final)" : "");
        seen.values.push_back(out->values<std::int32_t>()[0]);
      } else {
        fmt::print("  {}: final (empty)\n", r.id);
      }
      if (r.final) {
        seen.finished = true;
        ++finals_;
        done_.notify_all();
      }
    };
  }

  bool wait_finals(int n) {
    std::unique_lock lock{mutex_};
    return done_.wait_for(lock, std::chrono::seconds{10}, [&] { return finals_ >= n; });
  }

  struct stream {
    std::vector<std::int32_t> values;
    servekit::status_code error = servekit::status_code::ok;
    bool finished = false;
  };
  stream of(const std::string& id) {
    const std::lock_guard lock{mutex_};
    return by_id_[id];
  }

private:
  std::mutex mutex_;
  std::condition_variable done_;
  std::map<std::string, stream> by_id_;
  int finals_ = 0;
};

bool check(bool ok, const char* what) {
  if (!ok) {
    fmt::print(stderr, "FAILED: {}\n", what);
  }
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  bool ok = true;
  {
    fmt::print("repeat_int32: two requests at once\n");
    repeat_model m{options(1'000'000, true)};
    stream_printer p;
    ok = check(m.submit(make_request("a", {4, 2, 0, 1}, {10, 20, 0, 5}, 30), p.sink()).ok(),
               "submit a") &&
         ok;
    ok = check(m.submit(make_request("b", {7, 8}, {15, 15}, 0), p.sink()).ok(), "submit b") && ok;
    ok = check(p.wait_finals(2), "both requests got their final response") && ok;
    const auto a = p.of("a");
    const auto b = p.of("b");
    ok = check(a.values == std::vector<std::int32_t>{4, 2, 0, 1} &&
                   a.error == servekit::status_code::ok,
               "a: four responses in order, then a final") &&
         ok;
    ok = check(b.values == std::vector<std::int32_t>{7, 8} && b.error == servekit::status_code::ok,
               "b: two responses in order, then a final") &&
         ok;
    const auto stats = m.statistics();
    fmt::print("response_stats: {} indices; first index: {} successes\n",
               stats.response_stats.size(),
               stats.response_stats.empty() ? 0 : stats.response_stats[0].success.count);
  }
  {
    fmt::print("repeat_int32 with send_final=false and a 50 ms final_response_timeout\n");
    repeat_model m{options(50'000, false)};
    stream_printer p;
    ok = check(m.submit(make_request("c", {5}, {1}, 0), p.sink()).ok(), "submit c") && ok;
    ok = check(p.wait_finals(1), "c got a final response") && ok;
    const auto c = p.of("c");
    ok = check(c.values == std::vector<std::int32_t>{5} &&
                   c.error == servekit::status_code::deadline_exceeded,
               "c: one response, then DEADLINE_EXCEEDED") &&
         ok;
  }
  try {
    const std::string path = argc > 1 ? argv[1] : SERVEKIT_REPEAT_CONFIG;
    fmt::print("repeat_int32 from {}\n", path);
    std::ifstream file{path};
    std::stringstream text;
    text << file.rdbuf();
    repeat_model m{servekit::load_model_config(text.str())};
    stream_printer p;
    ok = check(m.submit(make_request("d", {3, 1}, {0, 0}, 0), p.sink()).ok(), "submit d") && ok;
    ok = check(p.wait_finals(1), "d got a final response") && ok;
    ok = check(p.of("d").values == std::vector<std::int32_t>{3, 1}, "d: two responses") && ok;
  } catch (const std::exception& e) {
    ok = check(false, e.what());
  }
  fmt::print("{}\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
