#pragma once
// A backend that holds its instance at a gate the test opens, counting what it executes: the
// network cancellation tests (tests/http, tests/grpc) keep the model's only instance busy with
// it, so that a second request waits in the queue for as long as the test needs, without timing.
// It copies INPUT0 to OUTPUT0 (gated_config below).

#include "archetypes/gate.hpp"

#include <servekit/backend/backend.hpp>

#include <atomic>
#include <cstddef>
#include <string_view>
#include <utility>

namespace archetypes {

/// What the gated backend's instances share with the test.
struct gated_state {
  gate open;
  std::atomic<int> executions{0};
  std::atomic<int> requests_executed{0};
};

/// The state the instances use: set by the test before the model loads, cleared after.
inline gated_state* gated = nullptr;

/// Copies INPUT0 to OUTPUT0 once the test opens the gate, counting what it executes.
class gated_backend {
public:
  explicit gated_backend(const servekit::instance_context&) {}
  void execute(servekit::batch& b) {
    gated->executions.fetch_add(1);
    gated->requests_executed.fetch_add(static_cast<int>(b.size()));
    (void)gated->open.wait();
    for (std::size_t i = 0; i < b.size(); ++i) {
      servekit::tensor moved = std::move(b.request(i).input("INPUT0"));
      moved.name = "OUTPUT0";
      b.response(i).outputs.push_back(std::move(moved));
    }
  }
};

/// The model's config.json: one instance, no batching, FP32 [1] in and out.
inline constexpr std::string_view gated_config = R"({
  "name": "gated", "backend": "gated", "max_batch_size": 0,
  "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [1]}],
  "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [1]}],
  "dynamic_batching": {},
  "instance_group": [{"count": 1, "kind": "KIND_CPU"}]
})";

} // namespace archetypes
