#pragma once
/// \file
/// Backend `input_plus_controls`: OUTPUT = (INPUT + START + END * CORRID) * READY, elementwise, in
/// int32 (wrapping), from the sequence batcher's control inputs. It keeps no state: these are the
/// ONNX graphs of Triton's example models `simple_sequence` (controls START and READY: OUTPUT is
/// INPUT, plus 1 on a sequence's first request) and `simple_dyna_sequence` (END and CORRID too:
/// the last request also adds the correlation id, truncated to int32).
///
/// Triton's client examples for these models (simple_http_sequence_sync_infer_client and
/// friends) check exactly that arithmetic. The controls are read as the inputs named START, END,
/// READY and CORRID, as the graphs take them; START, END or CORRID that the config does not
/// declare counts 0, a missing READY 1.
/// Run it under `sequence_batching` (direct or oldest) with INPUT and OUTPUT TYPE_INT32.

#include "control_values.hpp"
#include "execute_delay.hpp"

#include <servekit/backend/backend.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace servekit_server {

class input_plus_controls_backend {
public:
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT", servekit::data_type::int32, {-1}},
  };
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUTPUT", servekit::data_type::int32, {-1}},
  };

  explicit input_plus_controls_backend(const servekit::instance_context& context)
      : delay_{execute_delay(context)} {}

  void execute(servekit::batch& b) {
    simulate_work(delay_);
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::request& r = b.request(i);
      servekit::response& out = b.response(i);
      // Without a READY control every entry is a request: READY counts 1.
      const std::int32_t ready = r.find_input("READY") != nullptr ? control_flag(r, "READY") : 1;
      // A padding entry of the direct strategy (READY false): its response is discarded.
      if (b.has_sequences() && !b.sequence(i).ready) {
        continue;
      }
      const auto corrid = control_corrid(r, "CORRID");
      if (!corrid) {
        out.status =
            servekit::invalid_argument("model '" + std::string{b.instance().model_name} +
                                       "': the CORRID control holds no integer correlation id");
        continue;
      }
      const std::int32_t add =
          wrapping_add(control_flag(r, "START"),
                       wrapping_mul(control_flag(r, "END"), static_cast<std::int32_t>(*corrid)));
      const servekit::tensor& in = r.input("INPUT");
      if (!r.wants_output("OUTPUT")) {
        continue;
      }
      const auto x = in.values<std::int32_t>();
      auto y =
          out.add_output("OUTPUT", servekit::data_type::int32, in.shape).values<std::int32_t>();
      for (std::size_t k = 0; k < x.size(); ++k) {
        y[k] = wrapping_mul(wrapping_add(x[k], add), ready);
      }
    }
  }

private:
  std::chrono::milliseconds delay_;
};

} // namespace servekit_server
