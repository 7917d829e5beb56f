// expect: servekit: ensemble: a tensor has incompatible dims where it is provided
// names: tensor_dims_differ_between_producer_and_step_input preprocessed_image
// names: step<0, preprocess_backend step<1, classify_backend
// Step 0 writes "preprocessed_image" as FP32 [4]; step 1 reads it as FP32 [5].
#include <servekit/ensemble/ensemble.hpp>
#include <servekit/runtime/model.hpp>

struct preprocess_backend {
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", servekit::data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::fp32, {4}}};
  explicit preprocess_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
struct classify_backend {
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", servekit::data_type::fp32, {5}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::fp32, {4}}};
  explicit classify_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"CLASSIFICATION">,
    servekit::step<servekit::model<preprocess_backend>, servekit::in<"IN", "IMAGE">,
                   servekit::out<"OUT", "preprocessed_image">>,
    servekit::step<servekit::model<classify_backend>, servekit::in<"IN", "preprocessed_image">,
                   servekit::out<"OUT", "CLASSIFICATION">>>;

[[maybe_unused]] constexpr auto size = sizeof(pipeline);
