// expect: servekit: ensemble: a tensor is listed twice among the ensemble.s inputs and outputs
// names: tensor_listed_twice_among_ensemble_inputs_and_outputs IMAGE
// "IMAGE" is both an input and an output of the ensemble.
#include <servekit/ensemble/ensemble.hpp>
#include <servekit/runtime/model.hpp>

struct identity_backend {
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", servekit::data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::fp32, {4}}};
  explicit identity_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
using identity = servekit::model<identity_backend>;

using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"IMAGE">,
    servekit::step<identity, servekit::in<"IN", "IMAGE">, servekit::out<"OUT", "IMAGE">>>;

[[maybe_unused]] constexpr auto size = sizeof(pipeline);
