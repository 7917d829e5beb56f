// examples/accumulate: a stateful backend that keeps no state.
//
// OUTPUT is the running sum of INPUT over the requests of a sequence. The sum lives in
// servekit's implicit state (config `sequence_batching.state`): each request gets the previous
// sum as input INPUT_STATE and hands the next one back as output OUTPUT_STATE. So the backend
// holds nothing per sequence, and any instance slot can serve any sequence.
#pragma once

#include <servekit/backend.hpp>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace accumulate {

/// How many sequences ended, per servekit::sequence_end_reason (the hook runs on instance
/// threads, hence atomics).
inline std::array<std::atomic<int>, 4> ended_by_reason{};

struct backend {
  explicit backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      // Direct strategy: a slot with nothing ready is a padding entry (READY false). Its
      // request is a stand-in and its response is thrown away: skip it.
      if (!b.sequence(i).ready) {
        continue;
      }
      const servekit::request& r = b.request(i);
      // INPUT, INPUT_STATE and the outputs are [1, 1]: the batch dimension, then dims [1].
      const std::int32_t value = r.find_input("INPUT")->values<std::int32_t>()[0];
      // START is a control input the sequence batcher adds, shape [1]: int32 1 on a sequence's
      // first request, 0 otherwise (config `int32_false_true: [0, 1]`). The typed accessor gives
      // the same flag without declaring the tensor: `const bool start = b.sequence(i).start;`
      const bool start = r.find_input("START")->values<std::int32_t>()[0] == 1;
      // On START, Triton hands the model uninitialised state (servekit zero-fills it), so a
      // portable model ignores INPUT_STATE there.
      const std::int32_t previous =
          start ? 0 : r.find_input("INPUT_STATE")->values<std::int32_t>()[0];
      const std::int32_t sum = previous + value;

      servekit::response& out = b.response(i);
      out.add_output("OUTPUT", servekit::data_type::int32, {1, 1}).values<std::int32_t>()[0] = sum;
      // The next request of this sequence receives this as INPUT_STATE. OUTPUT_STATE is not in
      // the config's `output`, so servekit takes it out of the response: clients never see it.
      out.add_output("OUTPUT_STATE", servekit::data_type::int32, {1, 1}).values<std::int32_t>()[0] =
          sum;
    }
  }

  // Optional hook: a sequence left its slot (its END executed, it idled out, was cancelled, or
  // the model shut down). A backend that keeps per-sequence resources frees them here.
  void sequence_ended(const servekit::sequence_end& e) {
    ended_by_reason[static_cast<std::size_t>(e.reason)].fetch_add(1);
    if (e.reason != servekit::sequence_end_reason::end) {
      fmt::print("  sequence {} left slot {}: {}\n", e.id.to_string(), e.slot,
                 servekit::to_string(e.reason));
    }
  }
};

} // namespace accumulate
