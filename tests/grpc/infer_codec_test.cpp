// The ModelInfer codec of the gRPC front end (src/grpc/infer_codec.hpp) on its own: raw contents
// viewed in place (not copied) while their owner is held, typed contents converted, parameters
// both ways, and the response's raw outputs.
#include "infer_codec.hpp"

#include <servekit/core/tensor.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace infer_codec_test {

using servekit::grpc::detail::decode_infer_request;
using servekit::grpc::detail::encode_infer_response;
using servekit::grpc::detail::parse_model_version;
using servekit::grpc::detail::raw_view_owner;

/// Counts the views of a request's bytes that are alive.
struct view_counter {
  int alive = 0;
  int taken = 0;
  static void acquire(void* self) noexcept {
    auto* c = static_cast<view_counter*>(self);
    ++c->alive;
    ++c->taken;
  }
  static void release(void* self, std::byte*, std::size_t) noexcept {
    --static_cast<view_counter*>(self)->alive;
  }
  [[nodiscard]] raw_view_owner owner() {
    return {&view_counter::acquire, &view_counter::release, this};
  }
};

inference::ModelInferRequest two_raw_inputs() {
  inference::ModelInferRequest q;
  for (const char* name : {"A", "B"}) {
    auto* in = q.add_inputs();
    in->set_name(name);
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(16);
    std::vector<float> values(16, 1.5F);
    std::string raw(values.size() * sizeof(float), '\0');
    std::memcpy(raw.data(), values.data(), raw.size());
    q.add_raw_input_contents(raw);
  }
  return q;
}

TEST(GrpcInferCodec, RawContentsAreViewedWhileTheOwnerIsHeld) {
  auto q = two_raw_inputs();
  view_counter views;
  {
    servekit::request r;
    const auto s = decode_infer_request(q, r, {}, views.owner());
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(r.inputs.size(), 2U);
    EXPECT_EQ(views.taken, 2);
    EXPECT_EQ(views.alive, 2);
    // The tensor's bytes are the message's own.
    EXPECT_EQ(static_cast<const void*>(r.inputs[0].data.data()),
              static_cast<const void*>(q.raw_input_contents(0).data()));
    EXPECT_EQ(r.inputs[1].values<float>()[15], 1.5F);
  }
  EXPECT_EQ(views.alive, 0); // released with the request
}

TEST(GrpcInferCodec, WithoutAnOwnerRawContentsAreCopied) {
  auto q = two_raw_inputs();
  servekit::request r;
  ASSERT_TRUE(decode_infer_request(q, r, {}).ok());
  EXPECT_NE(static_cast<const void*>(r.inputs[0].data.data()),
            static_cast<const void*>(q.raw_input_contents(0).data()));
  EXPECT_EQ(r.inputs[0].values<float>()[3], 1.5F);
}

TEST(GrpcInferCodec, TypedContentsAreRangeChecked) {
  inference::ModelInferRequest q;
  auto* in = q.add_inputs();
  in->set_name("X");
  in->set_datatype("INT8");
  in->add_shape(2);
  in->mutable_contents()->add_int_contents(-5);
  in->mutable_contents()->add_int_contents(127);
  servekit::request r;
  ASSERT_TRUE(decode_infer_request(q, r, {}).ok());
  EXPECT_EQ(r.inputs[0].values<std::int8_t>()[0], -5);
  EXPECT_EQ(r.inputs[0].values<std::int8_t>()[1], 127);
  in->mutable_contents()->set_int_contents(1, 300);
  const auto s = decode_infer_request(q, r, {});
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  EXPECT_EQ(s.message(), "input 'X': value 300 is out of range for its datatype");
}

TEST(GrpcInferCodec, Fp16NeedsRawContents) {
  inference::ModelInferRequest q;
  auto* in = q.add_inputs();
  in->set_name("H");
  in->set_datatype("FP16");
  in->add_shape(1);
  servekit::request r;
  const auto s = decode_infer_request(q, r, {});
  EXPECT_EQ(s.message(), "input 'H': FP16 data must be sent in raw_input_contents");
}

TEST(GrpcInferCodec, LimitsAreEnforced) {
  auto q = two_raw_inputs();
  servekit::http::request_limits limits;
  limits.max_inputs = 1;
  servekit::request r;
  EXPECT_EQ(decode_infer_request(q, r, limits).message(),
            "the request has 2 inputs, more than the limit of 1");
  limits = {};
  limits.max_tensor_elements = 8;
  EXPECT_EQ(decode_infer_request(q, r, limits).message(),
            "input 'A': shape [1,16] has more elements than the limit of 8");
}

TEST(GrpcInferCodec, SchedulingParametersAreFields) {
  auto q = two_raw_inputs();
  (*q.mutable_parameters())["sequence_id"].set_string_param("session-1");
  (*q.mutable_parameters())["sequence_start"].set_bool_param(true);
  (*q.mutable_parameters())["priority"].set_int64_param(2);
  (*q.mutable_parameters())["timeout"].set_uint64_param(1000);
  (*q.mutable_parameters())["temperature"].set_double_param(0.5);
  servekit::request r;
  ASSERT_TRUE(decode_infer_request(q, r, {}).ok());
  EXPECT_EQ(r.sequence_id, servekit::correlation_id{"session-1"});
  EXPECT_TRUE(r.sequence_start);
  EXPECT_FALSE(r.sequence_end);
  EXPECT_EQ(r.priority, 2U);
  EXPECT_EQ(r.timeout_us, 1000U);
  ASSERT_EQ(r.parameters.size(), 1U);
  double t = 0;
  EXPECT_TRUE(r.parameters.get("temperature", t).ok());
  EXPECT_EQ(t, 0.5);
  (*q.mutable_parameters())["sequence_id"].set_int64_param(-1);
  EXPECT_EQ(
      decode_infer_request(q, r, {}).message(),
      "Unable to parse 'sequence_id': expected an unsigned integer or a string, got an int64");
}

TEST(GrpcInferCodec, ResponseOutputsAreRawAndParametersTyped) {
  servekit::response res;
  res.id = "r7";
  auto& y = res.add_output("Y", servekit::data_type::int32, {2});
  y.values<std::int32_t>()[0] = 3;
  y.values<std::int32_t>()[1] = -4;
  res.add_output("Z", servekit::data_type::int32, {1}).values<std::int32_t>()[0] = 9;
  res.parameters.set("tokens", std::int64_t{5});
  res.parameters.set("done", true);
  inference::ModelInferResponse out;
  const std::vector<std::string> requested{"Y"};
  ASSERT_TRUE(encode_infer_response(res, "m", 3, requested, out).ok());
  EXPECT_EQ(out.model_name(), "m");
  EXPECT_EQ(out.model_version(), "3");
  EXPECT_EQ(out.id(), "r7");
  ASSERT_EQ(out.outputs_size(), 1); // Z was not asked for
  EXPECT_EQ(out.outputs(0).datatype(), "INT32");
  ASSERT_EQ(out.raw_output_contents(0).size(), 8U);
  std::int32_t second = 0;
  std::memcpy(&second, out.raw_output_contents(0).data() + 4, 4);
  EXPECT_EQ(second, -4);
  EXPECT_EQ(out.parameters().at("tokens").int64_param(), 5);
  EXPECT_TRUE(out.parameters().at("done").bool_param());
}

TEST(GrpcInferCodec, ModelVersions) {
  std::int64_t v = 0;
  EXPECT_TRUE(parse_model_version("", v).ok());
  EXPECT_EQ(v, -1);
  EXPECT_TRUE(parse_model_version("12", v).ok());
  EXPECT_EQ(v, 12);
  EXPECT_FALSE(parse_model_version("-3", v).ok());
  EXPECT_FALSE(parse_model_version("1x", v).ok());
}

} // namespace infer_codec_test
