// libFuzzer target for the generate extension's request decoder (servekit/http/generate_codec.hpp),
// the body of POST /v2/models/{m}/generate and generate_stream.
//
// Input layout: the first byte picks the model's batching (bit 0) and the depth limit (the next
// bits: 512, or a small one so limits are hit often); the rest is the body. The model has the
// inputs of tests/http/generate_codec_test.cpp (a BYTES scalar, INT32 [-1], FP32 [-1,-1],
// INT64 [2,-1]).
//
// Checks per input:
// - decode_generate_request answers ok, or invalid_argument (resource_exhausted when memory runs
//   out) with a message: a client's body is never an internal error, and no nesting crashes it
//   (issue 16: 100,000 levels were a SIGSEGV, 1e400 a 500);
// - it agrees with translate_generate_request followed by decode_infer_request (the path it
//   replaces): both succeed or both fail, but where one stops at the depth limit.

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/generate_codec.hpp>
#include <servekit/http/kserve_request.hpp>
#include <servekit/http/request_limits.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

const std::vector<servekit::tensor_config>& model_inputs() {
  static const std::vector<servekit::tensor_config> inputs = {
      {"text_input", servekit::data_type::bytes, servekit::shape{1}},
      {"IDS", servekit::data_type::int32, servekit::shape{-1}},
      {"GRID", servekit::data_type::fp32, servekit::shape{-1, -1}},
      {"PAIR", servekit::data_type::int64, servekit::shape{2, -1}}};
  return inputs;
}

void check_failure(const servekit::status& s) {
  if (s.ok()) {
    return;
  }
  if ((s.code() != servekit::status_code::invalid_argument &&
       s.code() != servekit::status_code::resource_exhausted) ||
      s.message().empty()) {
    __builtin_trap();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const bool batching = (data[0] & 1U) != 0;
  servekit::http::request_limits limits;
  if ((data[0] & 2U) != 0) {
    limits.max_json_depth = 2U + ((data[0] >> 2U) & 7U);
  }
  const std::string_view body{reinterpret_cast<const char*>(data) + 1, size - 1};

  servekit::http::decoded_infer_request decoded;
  const servekit::status s = servekit::http::decode_generate_request(body, "fuzz", model_inputs(),
                                                                     batching, decoded, limits);
  check_failure(s);

  // The translated infer request goes through the /infer reader, whose limit is the same.
  std::string infer_json;
  const servekit::status t = servekit::http::translate_generate_request(
      body, "fuzz", model_inputs(), batching, infer_json);
  check_failure(t);
  if (limits.max_json_depth == servekit::http::request_limits{}.max_json_depth) {
    servekit::status via_infer = t;
    if (t.ok()) {
      servekit::http::decoded_infer_request d2;
      via_infer = servekit::http::decode_infer_request(infer_json, std::nullopt, d2);
    }
    // The translation nests the values two levels deeper ({"inputs":[{"data":...}]}), so near
    // the depth limit only the generate body itself may parse.
    const auto nested = [](const servekit::status& x) {
      return x.message().find("nest") != std::string::npos;
    };
    if (s.ok() != via_infer.ok() && !nested(s) && !nested(via_infer)) {
      __builtin_trap();
    }
  }
  return 0;
}
