#include <servekit/backend/batch_compatibility.hpp>
#include <servekit/backend/batch_io.hpp>

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

namespace batch_test {

using servekit::data_type;
using servekit::shape;

servekit::request with_input(std::string name, shape s, float first = 0.0F) {
  servekit::request r;
  auto t = servekit::make_tensor(std::move(name), data_type::fp32, s);
  for (auto& v : t.values<float>()) {
    v = first++;
  }
  r.inputs.push_back(std::move(t));
  return r;
}

TEST(batch_compatibility, variable_dims_must_match_unless_ragged) {
  const std::vector<servekit::tensor_config> strict{{"X", data_type::fp32, shape{-1}}};
  const servekit::batch_compatibility c{strict, true};
  EXPECT_TRUE(c.needs_check());
  EXPECT_TRUE(c.compatible(with_input("X", {1, 4}), with_input("X", {2, 4})));
  EXPECT_FALSE(c.compatible(with_input("X", {1, 4}), with_input("X", {1, 5})));

  const std::vector<servekit::tensor_config> ragged{
      {"X", data_type::fp32, shape{-1}, /*allow_ragged_batch=*/true}};
  const servekit::batch_compatibility r{ragged, true};
  EXPECT_TRUE(r.compatible(with_input("X", {1, 4}), with_input("X", {1, 5})));
}

TEST(batch_compatibility, fixed_dims_need_no_check) {
  const std::vector<servekit::tensor_config> fixed{{"X", data_type::fp32, shape{16}}};
  EXPECT_FALSE((servekit::batch_compatibility{fixed, true}).needs_check());
}

TEST(batch_compatibility, shape_tensors_must_agree_in_content) {
  const std::vector<servekit::tensor_config> inputs{
      {"S", data_type::fp32, shape{2}, false, false, /*is_shape_tensor=*/true}};
  const servekit::batch_compatibility c{inputs, true};
  EXPECT_TRUE(c.compatible(with_input("S", {1, 2}, 1.0F), with_input("S", {1, 2}, 1.0F)));
  EXPECT_FALSE(c.compatible(with_input("S", {1, 2}, 1.0F), with_input("S", {1, 2}, 5.0F)));
}

class batch_io : public ::testing::Test {
protected:
  void SetUp() override {
    context_.max_batch_size = 8;
    requests_.push_back(with_input("X", {2, 3}, 0.0F));
    requests_.push_back(with_input("X", {1, 3}, 6.0F));
    b_.bind(context_, false);
    for (auto& r : requests_) {
      b_.add(r, r.inputs[0].shape[0], sink_);
    }
  }
  servekit::instance_context context_;
  std::vector<servekit::request> requests_;
  servekit::response_sink sink_ = [](servekit::response&&) {};
  servekit::batch b_;
};

TEST_F(batch_io, gather_concatenates_requests_in_batch_order) {
  EXPECT_EQ(b_.batch_size(), 3);
  std::array<float, 9> all{};
  ASSERT_EQ(servekit::gathered_size(b_, "X"), sizeof(all));
  ASSERT_TRUE(servekit::gather_input(b_, "X", std::as_writable_bytes(std::span{all})).ok());
  EXPECT_EQ(all[0], 0.0F);
  EXPECT_EQ(all[5], 5.0F);
  EXPECT_EQ(all[6], 6.0F);
  EXPECT_EQ(all[8], 8.0F);
}

TEST_F(batch_io, gather_names_a_missing_input) {
  std::array<float, 9> all{};
  const auto s = servekit::gather_input(b_, "Y", std::as_writable_bytes(std::span{all}));
  EXPECT_NE(s.message().find("no input 'Y'"), std::string::npos);
}

TEST_F(batch_io, scatter_splits_by_each_requests_batch_dimension) {
  std::array<float, 6> out{1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(
      servekit::scatter_output(b_, "Y", data_type::fp32, shape{2}, std::as_bytes(std::span{out}))
          .ok());
  const auto* y0 = b_.response(0).find_output("Y");
  const auto* y1 = b_.response(1).find_output("Y");
  ASSERT_NE(y0, nullptr);
  ASSERT_NE(y1, nullptr);
  EXPECT_EQ(y0->shape, (shape{2, 2}));
  EXPECT_EQ(y1->shape, (shape{1, 2}));
  EXPECT_EQ(y1->values<float>()[1], 6.0F);
}

TEST_F(batch_io, the_throwing_forms_do_the_same_work_when_they_succeed) {
  std::array<float, 9> all{};
  servekit::gather_input_or_throw(b_, "X", std::as_writable_bytes(std::span{all}));
  EXPECT_EQ(all[8], 8.0F);
  servekit::scatter_output_or_throw(b_, "Y", data_type::fp32, shape{3},
                                    std::as_bytes(std::span{all}));
  EXPECT_EQ(b_.response(1).output("Y").values<float>()[2], 8.0F);
}

TEST_F(batch_io, the_throwing_forms_throw_the_status_the_others_return) {
  std::array<float, 9> all{};
  try {
    servekit::gather_input_or_throw(b_, "Y", std::as_writable_bytes(std::span{all}));
    FAIL() << "gather_input_or_throw of a missing input returned";
  } catch (const servekit::batch_io_error& e) {
    EXPECT_EQ(e.status().code(), servekit::status_code::invalid_argument);
    EXPECT_EQ(std::string{e.what()}, "gather_input: request 0 has no input 'Y'");
  }
  std::array<float, 2> too_small{};
  EXPECT_THROW(servekit::scatter_output_or_throw(b_, "Y", data_type::fp32, shape{2},
                                                 std::as_bytes(std::span{too_small})),
               servekit::batch_io_error);
}

} // namespace batch_test
