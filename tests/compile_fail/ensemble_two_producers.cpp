// expect: tensor_name\{"SCORES"\}.*Tensor has two producers: step Step and step OtherStep
// Two steps write the ensemble tensor "SCORES"; a tensor has one producer.
#include <servekit/ensemble/ensemble.hpp>
#include <servekit/runtime/model.hpp>

struct score_backend {
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", servekit::data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::fp32, {4}}};
  explicit score_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
using score = servekit::model<score_backend>;

using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"SCORES">,
    servekit::step<score, servekit::in<"IN", "IMAGE">, servekit::out<"OUT", "SCORES">>,
    servekit::step<score, servekit::in<"IN", "IMAGE">, servekit::out<"OUT", "SCORES">>>;

[[maybe_unused]] constexpr auto size = sizeof(pipeline);
