// expect: servekit: ensemble: a tensor has two producers
// names: tensor_has_two_producers SCORES step<1, step<0, score_backend
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
