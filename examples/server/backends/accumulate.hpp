#pragma once
/// \file
/// Backend `accumulate`: INPUT INT32 [1] -> OUTPUT INT32 [1], the running sum of INPUT over the
/// requests of a sequence (a START request's output is its input). It keeps no state itself: the
/// sum travels in servekit's implicit state, INPUT_STATE in and OUTPUT_STATE out (config
/// `sequence_batching.state`), so any slot and any instance can serve any sequence. Run it under
/// `sequence_batching` (direct or oldest).
///
/// The control flags come from `batch::sequence(i)`, which holds them whatever the config names
/// its control inputs (and whether it declares READY, END or CORRID at all).

#include "execute_delay.hpp"

#include <servekit/backend/backend.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace servekit_server {

class accumulate_backend {
public:
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT", servekit::data_type::int32, {1}},
  };
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUTPUT", servekit::data_type::int32, {1}},
  };

  explicit accumulate_backend(const servekit::instance_context& context)
      : delay_{execute_delay(context)} {}

  void execute(servekit::batch& b) {
    simulate_work(delay_);
    for (std::size_t i = 0; i < b.size(); ++i) {
      servekit::response& out = b.response(i);
      if (!b.has_sequences()) {
        out.status = servekit::invalid_argument(
            "model '" + std::string{b.instance().model_name} +
            "': the accumulate backend needs sequence_batching with implicit state");
        continue;
      }
      const servekit::sequence_controls& controls = b.sequence(i);
      // A direct-strategy slot with nothing ready is padding: its response is discarded.
      if (!controls.ready) {
        continue;
      }
      const servekit::request& r = b.request(i);
      const servekit::tensor& in = *r.find_input("INPUT");
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
      // On START the state is uninitialised as far as a portable model knows (servekit zeroes
      // it, Triton need not): start from 0 rather than read it.
      const std::int32_t previous = controls.start ? 0 : state->values<std::int32_t>()[0];
      // Wraps like the int32 it is rather than overflowing into undefined behaviour.
      const auto sum =
          static_cast<std::int32_t>(static_cast<std::uint32_t>(previous) +
                                    static_cast<std::uint32_t>(in.values<std::int32_t>()[0]));
      out.add_output("OUTPUT", servekit::data_type::int32, in.shape).values<std::int32_t>()[0] =
          sum;
      // Not in the config's `output`: servekit keeps it as the sequence's next INPUT_STATE and
      // takes it out of the response.
      out.add_output("OUTPUT_STATE", servekit::data_type::int32, state->shape)
          .values<std::int32_t>()[0] = sum;
    }
  }

private:
  std::chrono::milliseconds delay_;
};

} // namespace servekit_server
