// A backend written with the accessors validation guarantees (request::input) and the throwing
// gather/scatter, run by a model: the good path has no status to check, and a failure in the
// middle of execute becomes an error response for each request of that batch.
#include <servekit/backend/batch_io.hpp>
#include <servekit/core/request_builder.hpp>
#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace execute_ergonomics_test {

using servekit::data_type;

/// Doubles X (FP32 [2]) into Y through one contiguous buffer; a request whose GATHER_FROM input
/// (optional, INT32 [1]) is 1 makes it gather an input nobody has, which fails the batch.
struct doubling_backend {
  static constexpr std::int32_t max_batch_size = 4;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"X", data_type::fp32, {2}},
      {.name = "FAIL", .type = data_type::int32, .dims = {1}, .optional = true}};
  static constexpr servekit::tensor_declaration outputs[] = {{"Y", data_type::fp32, {2}}};

  explicit doubling_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    std::vector<float> rows(static_cast<std::size_t>(b.batch_size()) * 2);
    const char* from = "X";
    for (std::size_t i = 0; i < b.size(); ++i) {
      // Declared and not optional: the validator guarantees it, so a reference, not a pointer.
      (void)b.request(i).input("X");
      if (b.request(i).find_input("FAIL") != nullptr) {
        from = "NOT_AN_INPUT";
      }
    }
    servekit::gather_input_or_throw(b, from, std::as_writable_bytes(std::span{rows}));
    for (float& v : rows) {
      v *= 2.0F;
    }
    servekit::scatter_output_or_throw(b, "Y", data_type::fp32, {2}, std::as_bytes(std::span{rows}));
  }
};

using doubling_model = servekit::model<doubling_backend>;

servekit::model_options named(std::string name) {
  servekit::model_options o;
  o.name = std::move(name);
  return o;
}

TEST(execute_ergonomics, the_throwing_gather_and_scatter_serve_a_batch) {
  doubling_model m{named("double")};
  const servekit::response r =
      m.infer(servekit::request_builder{"r"}.input("X", {1, 2}, {1.5F, -2.0F}).build()).get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.output("Y").shape, (servekit::shape{1, 2}));
  EXPECT_EQ(r.output("Y").values<float>()[0], 3.0F);
  EXPECT_EQ(r.output("Y").values<float>()[1], -4.0F);
}

TEST(execute_ergonomics, a_throwing_gather_fails_the_batch_with_its_message) {
  doubling_model m{named("double")};
  const servekit::response r = m.infer(servekit::request_builder{}
                                           .input("X", {1, 2}, {1.0F, 2.0F})
                                           .input("FAIL", {1, 1}, {1})
                                           .build())
                                   .get();
  // The gather's own status code (invalid_argument), not a generic internal error.
  EXPECT_EQ(r.status.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(r.status.message().find("gather_input: request 0 has no input 'NOT_AN_INPUT'"),
            std::string::npos)
      << r.status.message();
  EXPECT_TRUE(r.outputs.empty());
  // The instance goes on serving.
  EXPECT_TRUE(
      m.infer(servekit::request_builder{}.input("X", {1, 2}, {1.0F, 2.0F}).build()).get().ok());
}

TEST(execute_ergonomics, an_unknown_input_is_refused_with_the_inputs_the_model_has) {
  doubling_model m{named("double")};
  const servekit::status s =
      m.submit(servekit::request_builder{}.input("x", {1, 2}, {1.0F, 2.0F}).build(),
               [](servekit::response&&) {});
  EXPECT_EQ(s.message(),
            "unexpected inference input 'x' for model 'double' (the model's inputs: X, FAIL)");
}

} // namespace execute_ergonomics_test
