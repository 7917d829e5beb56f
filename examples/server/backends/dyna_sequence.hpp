#pragma once
/// \file
/// Backend `dyna_sequence`: Triton's `dyna_sequence` test backend, which serves its example model
/// `simple_string_dyna_sequence`. INPUT INT32 -> OUTPUT INT32 of INPUT's shape, every element the
/// sequence's accumulator: a START request sets it to the sum of its INPUT elements, any other
/// adds them, and the END request also adds the correlation id (truncated to int32) before the
/// accumulator is dropped.
///
/// Like Triton's, it keeps the accumulators itself, one per correlation id in each instance (the
/// sequence batcher keeps a sequence on one instance), and reads its controls as the inputs named
/// START, END, READY and CORRID, all four required. CORRID may be TYPE_UINT64 or TYPE_STRING; a
/// string id must be a decimal number (a request whose id is not fails with 400). Run it under
/// `sequence_batching` (the example model uses the oldest strategy).

#include "control_values.hpp"
#include "execute_delay.hpp"

#include <servekit/backend/backend.hpp>
#include <servekit/backend/sequence_controls.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace servekit_server {

class dyna_sequence_backend {
public:
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT", servekit::data_type::int32, {-1}},
  };
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUTPUT", servekit::data_type::int32, {-1}},
  };

  explicit dyna_sequence_backend(const servekit::instance_context& context)
      : delay_{execute_delay(context)} {}

  void execute(servekit::batch& b) {
    simulate_work(delay_);
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::request& r = b.request(i);
      servekit::response& out = b.response(i);
      const std::string model{b.instance().model_name};
      if (r.find_input("START") == nullptr || r.find_input("END") == nullptr ||
          r.find_input("READY") == nullptr || r.find_input("CORRID") == nullptr) {
        out.status = servekit::invalid_argument(
            "model '" + model +
            "': the dyna_sequence backend needs the control inputs START, END, READY and CORRID "
            "in sequence_batching.control_input");
        continue;
      }
      if (control_flag(r, "READY") == 0) {
        continue; // padding (direct strategy): its response is discarded
      }
      const auto corrid = control_corrid(r, "CORRID");
      if (!corrid) {
        out.status = servekit::invalid_argument(
            "model '" + model +
            "': the dyna_sequence backend expects a correlation id decodable into an integer");
        continue;
      }
      const servekit::tensor& in = r.input("INPUT");
      const auto x = in.values<std::int32_t>();
      std::int32_t& sum = accumulators_[*corrid];
      std::size_t first = 0;
      if (control_flag(r, "START") != 0 && !x.empty()) {
        sum = x[0];
        first = 1;
      }
      for (std::size_t k = first; k < x.size(); ++k) {
        sum = wrapping_add(sum, x[k]);
      }
      const bool end = control_flag(r, "END") != 0;
      if (end) {
        sum = wrapping_add(sum, static_cast<std::int32_t>(*corrid));
      }
      const std::int32_t value = sum;
      if (end) {
        accumulators_.erase(*corrid);
      }
      if (r.wants_output("OUTPUT")) {
        auto y =
            out.add_output("OUTPUT", servekit::data_type::int32, in.shape).values<std::int32_t>();
        for (auto& v : y) {
          v = value;
        }
      }
    }
  }

  /// A sequence that ended without END (idle timeout, cancellation): drop its accumulator, which
  /// Triton's backend keeps until the id starts again.
  void sequence_ended(const servekit::sequence_end& e) {
    if (e.reason == servekit::sequence_end_reason::end) {
      return;
    }
    if (e.id.is_string()) {
      if (const auto id = parse_decimal<std::uint64_t>(e.id.as_string())) {
        accumulators_.erase(*id);
      }
      return;
    }
    accumulators_.erase(e.id.as_uint());
  }

private:
  std::chrono::milliseconds delay_;
  std::unordered_map<std::uint64_t, std::int32_t> accumulators_;
};

} // namespace servekit_server
