#pragma once
/// \file
/// examples/accumulate: a stateful backend that keeps no state.
///
/// INPUT INT32 [1] -> OUTPUT INT32 [1], the running sum of INPUT over the requests of a sequence
/// (a START request's output is its input). The sum lives in servekit's implicit state (config
/// `sequence_batching.state`): each request gets the previous sum as input INPUT_STATE and hands
/// the next one back as output OUTPUT_STATE. So the backend holds nothing per sequence, and any
/// instance slot can serve any sequence. Run it under `sequence_batching` (direct or oldest).
///
/// The example server bundles it as backend `accumulate` (examples/server/backends), and the
/// repository tests as `sum`.

#include <servekit/backend.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace accumulate {

struct backend {
  // The batch size is left to the config (max_batch_size undeclared: 0).
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT", servekit::data_type::int32, {1}},
  };
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUTPUT", servekit::data_type::int32, {1}},
  };

  explicit backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      servekit::response& out = b.response(i);
      if (!b.has_sequences()) {
        out.status = servekit::invalid_argument(
            "model '" + std::string{b.instance().model_name} +
            "': the accumulate backend needs sequence_batching with implicit state");
        continue;
      }
      // The control flags, whatever the config names its control inputs (and whether it declares
      // READY, END or CORRID at all). A config's START control (`int32_false_true: [0, 1]`) is
      // also an input tensor: `r.find_input("START")` holds 1 on a sequence's first request.
      const servekit::sequence_controls& controls = b.sequence(i);
      // Direct strategy: a slot with nothing ready is a padding entry (READY false). Its request
      // is a stand-in and its response is thrown away: skip it.
      if (!controls.ready) {
        continue;
      }
      const servekit::request& r = b.request(i);
      const servekit::tensor& in = r.input("INPUT"); // declared: validation guarantees it
      const servekit::tensor* state = r.find_input("INPUT_STATE");
      if (state == nullptr || state->type != servekit::data_type::int32 ||
          state->element_count() != 1) {
        out.status = servekit::invalid_argument(
            "model '" + std::string{b.instance().model_name} +
            "': the accumulate backend needs the implicit state INPUT_STATE/OUTPUT_STATE, "
            "TYPE_INT32 dims [1], in sequence_batching.state");
        continue;
      }
      if (in.element_count() != 1) {
        out.status =
            servekit::invalid_argument("model '" + std::string{b.instance().model_name} +
                                       "': a sequence request carries one INPUT value, got shape " +
                                       servekit::to_string(in.shape));
        continue;
      }
      // On START, Triton hands the model uninitialised state (servekit zero-fills it), so a
      // portable model ignores INPUT_STATE there.
      const std::int32_t previous = controls.start ? 0 : state->values<std::int32_t>()[0];
      // Wraps like the int32 it is rather than overflowing into undefined behaviour.
      const auto sum =
          static_cast<std::int32_t>(static_cast<std::uint32_t>(previous) +
                                    static_cast<std::uint32_t>(in.values<std::int32_t>()[0]));
      // OUTPUT has INPUT's shape: [1, 1] (the batch dimension, then dims [1]) in a batching
      // model, [1] in one with max_batch_size 0.
      out.add_output("OUTPUT", servekit::data_type::int32, in.shape).values<std::int32_t>()[0] =
          sum;
      // The next request of this sequence receives this as INPUT_STATE. OUTPUT_STATE is not in
      // the config's `output`, so servekit takes it out of the response: clients never see it.
      out.add_output("OUTPUT_STATE", servekit::data_type::int32, state->shape)
          .values<std::int32_t>()[0] = sum;
    }
  }
};

} // namespace accumulate
