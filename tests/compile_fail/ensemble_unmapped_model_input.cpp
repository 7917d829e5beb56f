// expect: tensor_name\{"MASK"\}.*does not map its model.s required input ModelTensor
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
