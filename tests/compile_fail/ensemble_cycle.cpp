// expect: servekit: ensemble: the steps form a cycle: the first step reads the tensor
// names: steps_form_a_cycle step<0, merge_backend STATE step<1, update_backend
// Step 0 reads "STATE", which step 1 writes from "mixed", which step 0 writes.
#include <servekit/ensemble/ensemble.hpp>
#include <servekit/runtime/model.hpp>

struct merge_backend {
  static constexpr servekit::tensor_declaration inputs[] = {
      {"IN", servekit::data_type::fp32, {4}}, {"STATE_IN", servekit::data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::fp32, {4}}};
  explicit merge_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
struct update_backend {
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", servekit::data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::fp32, {4}}};
  explicit update_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"STATE">,
    servekit::step<servekit::model<merge_backend>, servekit::in<"IN", "IMAGE">,
                   servekit::in<"STATE_IN", "STATE">, servekit::out<"OUT", "mixed">>,
    servekit::step<servekit::model<update_backend>, servekit::in<"IN", "mixed">,
                   servekit::out<"OUT", "STATE">>>;

[[maybe_unused]] constexpr auto size = sizeof(pipeline);
