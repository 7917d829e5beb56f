// expect: ensemble_fault::decoupled_step.*step Step uses a decoupled model
// A decoupled composing model (several responses per request) cannot be a step yet.
#include <servekit/ensemble/ensemble.hpp>
#include <servekit/runtime/model.hpp>

struct streaming_backend {
  static constexpr bool decoupled = true;
  static constexpr servekit::tensor_spec inputs[] = {{"IN", servekit::data_type::fp32, {4}}};
  static constexpr servekit::tensor_spec outputs[] = {{"OUT", servekit::data_type::fp32, {4}}};
  explicit streaming_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
using streaming = servekit::model<streaming_backend>;

using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"TOKENS">,
    servekit::step<streaming, servekit::in<"IN", "IMAGE">, servekit::out<"OUT", "TOKENS">>>;

[[maybe_unused]] constexpr auto size = sizeof(pipeline);
