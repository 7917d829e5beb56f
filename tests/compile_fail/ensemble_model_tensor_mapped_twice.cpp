// expect: servekit: ensemble: a step maps a model tensor more than once
// names: step_maps_a_model_tensor_twice step<0, classify_backend IN
// The step maps its model's input "IN" twice, from two ensemble tensors.
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
    servekit::step<classify, servekit::in<"IN", "IMAGE">, servekit::in<"IN", "MASK">,
                   servekit::out<"OUT", "CLASSIFICATION">>>;

[[maybe_unused]] constexpr auto size = sizeof(pipeline);
