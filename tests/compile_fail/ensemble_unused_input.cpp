// expect: servekit: ensemble: an input of the ensemble is not read by any step
// names: ensemble_input_not_read_by_any_step MASK
// The ensemble lists input "MASK", but no step's input_map reads it.
#include <servekit/ensemble/ensemble.hpp>
#include <servekit/runtime/model.hpp>

struct classify_backend {
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", servekit::data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::fp32, {4}}};
  explicit classify_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
using classify = servekit::model<classify_backend>;

using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE", "MASK">, servekit::outputs<"CLASSIFICATION">,
    servekit::step<classify, servekit::in<"IN", "IMAGE">, servekit::out<"OUT", "CLASSIFICATION">>>;

[[maybe_unused]] constexpr auto size = sizeof(pipeline);
