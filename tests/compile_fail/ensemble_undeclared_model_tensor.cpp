// expect: tensor_name\{"FORMATTED_IMG"\}.*maps ModelTensor, which its model does not declare
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
