#pragma once
// Small backends and helpers for the repository tests: a batching adder whose executions can be
// held and whose destruction is observed, a non-batching one, one whose constructor throws, a
// stateful running sum (sequence batching with implicit state), and temporary repositories.

#include "accumulate/accumulate_backend.hpp" // examples/accumulate
#include "archetypes/gate.hpp"
#include "archetypes/temp_repository.hpp"

#include <servekit/backend/backend.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace repository_tests {

using servekit::data_type;
using servekit::shape;

/// Holds the first execution that starts after `arm()` until `release` opens.
struct execution_hold {
  archetypes::gate started;
  archetypes::gate release;
};

/// What the test backends report (instance threads write, tests read).
struct instruments {
  std::atomic<execution_hold*> hold{nullptr};
  std::atomic<int> live{0}; ///< add_backend instances alive
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::thread::id> destroyed_on; ///< add_backend destructors' threads; guarded by mutex

  void reset() {
    hold = nullptr;
    const std::lock_guard lock{mutex};
    destroyed_on.clear();
  }

  /// Waits (up to 10 s) until `n` add_backend instances were destroyed since reset().
  [[nodiscard]] bool wait_destroyed(std::size_t n) {
    std::unique_lock lock{mutex};
    return cv.wait_for(lock, std::chrono::seconds{10}, [&] { return destroyed_on.size() >= n; });
  }
};

/// Never destroyed: a reaper thread left running after its repository (see
/// AModelHeldPastTheRepositoryIsStillReaped) may still report while the process exits.
inline instruments& probe() {
  static auto* p = new instruments; // NOLINT(cppcoreguidelines-owning-memory)
  return *p;
}

inline float read_addend(const servekit::instance_context& context) {
  const auto value = context.parameter("addend");
  if (!value) {
    return 1.0F;
  }
  return std::stof(std::string{*value});
}

/// OUT = IN + addend (model parameter "addend", default 1), FP32 [4], batches up to 8.
struct add_backend {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUT", data_type::fp32, {4}}};

  explicit add_backend(const servekit::instance_context& context) : addend_{read_addend(context)} {
    ++probe().live;
  }
  add_backend(const add_backend&) = delete;
  add_backend& operator=(const add_backend&) = delete;
  ~add_backend() {
    --probe().live;
    const std::lock_guard lock{probe().mutex};
    probe().destroyed_on.push_back(std::this_thread::get_id());
    probe().cv.notify_all();
  }

  void execute(servekit::batch& b) {
    if (auto* h = probe().hold.exchange(nullptr)) {
      h->started.open();
      if (!h->release.wait()) {
        throw std::runtime_error("the test never released the held execution");
      }
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::tensor& in = *b.request(i).find_input("IN");
      auto& out = b.response(i).add_output("OUT", data_type::fp32, in.shape);
      std::transform(in.values<float>().begin(), in.values<float>().end(),
                     out.values<float>().begin(), [this](float x) { return x + addend_; });
    }
  }

private:
  float addend_;
};

/// The same arithmetic on a backend that must not be batched.
struct unbatched_backend {
  static constexpr bool batching = false;
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUT", data_type::fp32, {4}}};

  explicit unbatched_backend(const servekit::instance_context&) {}
  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::tensor& in = *b.request(i).find_input("IN");
      auto& out = b.response(i).add_output("OUT", data_type::fp32, in.shape);
      std::copy(in.values<float>().begin(), in.values<float>().end(), out.values<float>().begin());
    }
  }
};

/// A backend whose constructor fails, as one missing its device would.
struct failing_backend {
  explicit failing_backend(const servekit::instance_context&) {
    throw std::runtime_error("no device for this backend");
  }
  void execute(servekit::batch&) {}
};

/// OUTPUT = running sum of INPUT over a sequence, kept in implicit state (INPUT_STATE /
/// OUTPUT_STATE): examples/accumulate's backend.
using sum_backend = accumulate::backend;

/// A config.json for sum_backend with the given strategy ("direct" or "oldest").
inline std::string sum_config(std::string_view strategy) {
  return R"({"backend": "sum", "max_batch_size": 8,
  "input": [{"name": "INPUT", "data_type": "TYPE_INT32", "dims": [1]}],
  "output": [{"name": "OUTPUT", "data_type": "TYPE_INT32", "dims": [1]}],
  "sequence_batching": {")" +
         std::string{strategy} + R"(": {},
    "control_input": [{"name": "START",
      "control": [{"kind": "CONTROL_SEQUENCE_START", "int32_false_true": [0, 1]}]}],
    "state": [{"input_name": "INPUT_STATE", "output_name": "OUTPUT_STATE",
               "data_type": "TYPE_INT32", "dims": [1]}]}})";
}

/// A request of one FP32 [1, 4] tensor `IN` filled with `value`.
inline servekit::request add_request(float value, std::string id = "r") {
  servekit::request r;
  r.id = std::move(id);
  auto t = servekit::make_tensor("IN", data_type::fp32, shape{1, 4});
  std::fill(t.values<float>().begin(), t.values<float>().end(), value);
  r.inputs.push_back(std::move(t));
  return r;
}

/// A request of sequence `id` carrying INPUT = value.
inline servekit::request sum_request(std::uint64_t sequence, std::int32_t value, bool start,
                                     bool end) {
  servekit::request r;
  r.sequence_id = sequence;
  r.sequence_start = start;
  r.sequence_end = end;
  auto t = servekit::make_tensor("INPUT", data_type::int32, shape{1, 1});
  t.values<std::int32_t>()[0] = value;
  r.inputs.push_back(std::move(t));
  return r;
}

/// submit() as a future; a rejected request's future holds the failure.
inline std::future<servekit::response> infer(servekit::model_ref m, servekit::request&& r) {
  auto promise = std::make_shared<std::promise<servekit::response>>();
  auto future = promise->get_future();
  auto s = m.submit(std::move(r), [promise](servekit::response&& out) {
    if (out.final) {
      promise->set_value(std::move(out));
    }
  });
  if (!s.ok()) {
    promise->set_value(servekit::response::failure(std::move(s)));
  }
  return future;
}

/// The response, or a failure after 10 s (a broken test fails instead of hanging).
inline servekit::response get(std::future<servekit::response>& f) {
  if (f.wait_for(std::chrono::seconds{10}) != std::future_status::ready) {
    return servekit::response::failure(servekit::internal_error("no response within 10 s"));
  }
  return f.get();
}

using archetypes::temp_repository;

} // namespace repository_tests
