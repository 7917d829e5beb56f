// expect: servekit: ensemble: a step does not map a required input of its model
// names: step_does_not_map_a_required_model_input step<0, segment_backend MASK
// The backend requires inputs "IMAGE" and "MASK"; the step maps only "IMAGE".
#include <servekit/ensemble/ensemble.hpp>
#include <servekit/runtime/model.hpp>

struct segment_backend {
  static constexpr servekit::tensor_declaration inputs[] = {
      {"IMAGE", servekit::data_type::fp32, {4}}, {"MASK", servekit::data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::fp32, {4}}};
  explicit segment_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
using segment = servekit::model<segment_backend>;

using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"SEGMENTATION">,
    servekit::step<segment, servekit::in<"IMAGE", "IMAGE">, servekit::out<"OUT", "SEGMENTATION">>>;

[[maybe_unused]] constexpr auto size = sizeof(pipeline);
