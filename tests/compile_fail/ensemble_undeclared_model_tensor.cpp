// expect: servekit: ensemble: a step maps a model tensor that its model does not declare
// names: step_maps_a_tensor_its_model_does_not_declare step<0, classify_backend FORMATTED_IMG
// The step maps model input "FORMATTED_IMG"; the backend declares "FORMATTED_IMAGE".
#include <servekit/ensemble/ensemble.hpp>
#include <servekit/runtime/model.hpp>

struct classify_backend {
  static constexpr servekit::tensor_declaration inputs[] = {
      {"FORMATTED_IMAGE", servekit::data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::fp32, {4}}};
  explicit classify_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
using classify = servekit::model<classify_backend>;

using pipeline = servekit::ensemble<servekit::inputs<"IMAGE">, servekit::outputs<"CLASSIFICATION">,
                                    servekit::step<classify, servekit::in<"FORMATTED_IMG", "IMAGE">,
                                                   servekit::out<"OUT", "CLASSIFICATION">>>;

[[maybe_unused]] constexpr auto size = sizeof(pipeline);
