// expect: servekit: ensemble: a step input reads a tensor that no ensemble input and no step
// names: step_input_reads_a_tensor_nothing_provides step<1, classify_backend
// names: FORMATTED_IMAGE preprocessed_image
// A step reads "preprocessed_image", but no ensemble input and no step output provides it.
#include <servekit/ensemble/ensemble.hpp>
#include <servekit/runtime/model.hpp>

struct classify_backend {
  static constexpr servekit::tensor_declaration inputs[] = {
      {"FORMATTED_IMAGE", servekit::data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"CLASSIFICATION_OUTPUT", servekit::data_type::fp32, {4}}};
  explicit classify_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
using classify = servekit::model<classify_backend>;

using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"CLASSIFICATION">,
    servekit::step<classify, servekit::in<"FORMATTED_IMAGE", "IMAGE">,
                   servekit::out<"CLASSIFICATION_OUTPUT", "CLASSIFICATION">>,
    servekit::step<classify, servekit::in<"FORMATTED_IMAGE", "preprocessed_image">,
                   servekit::out<"CLASSIFICATION_OUTPUT", "SCORES">>>;

[[maybe_unused]] constexpr auto size = sizeof(pipeline);
