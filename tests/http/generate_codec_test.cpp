// The generate extension's codec (pure): a flat request into a KServe infer request with shapes
// from the config, and a response into the flat form.

#include <servekit/http/generate_codec.hpp>
#include <servekit/http/kserve_request.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace generate_codec_test {

using json = nlohmann::json;
using servekit::data_type;
using servekit::tensor_config;

std::vector<tensor_config> configs() {
  return {{"text_input", data_type::bytes, servekit::shape{1}},
          {"IDS", data_type::int32, servekit::shape{-1}},
          {"GRID", data_type::fp32, servekit::shape{-1, -1}},
          {"PAIR", data_type::int64, servekit::shape{2, -1}}};
}

json translate(const std::string& body, bool batching = false) {
  std::string out;
  const auto s = servekit::http::translate_generate_request(body, "m", configs(), batching, out);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? json::parse(out) : json{};
}

std::string error_of(const std::string& body) {
  std::string out;
  const auto s = servekit::http::translate_generate_request(body, "m", configs(), false, out);
  EXPECT_FALSE(s.ok()) << body;
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  return s.message();
}

TEST(GenerateCodec, ShapesFromTheConfig) {
  const auto j = translate(R"({"text_input": "hi", "IDS": [1, 2, 3], "PAIR": [1, 2, 3, 4, 5, 6],
                               "GRID": [[1, 2, 3], [4, 5, 6]]})");
  const auto& in = j.at("inputs");
  ASSERT_EQ(in.size(), 4U);
  std::map<std::string, json> by_name;
  for (const auto& t : in) {
    by_name[t.at("name").get<std::string>()] = t;
  }
  EXPECT_EQ(
      by_name["text_input"],
      (json{{"name", "text_input"}, {"datatype", "BYTES"}, {"shape", {1}}, {"data", {"hi"}}}));
  EXPECT_EQ(by_name["IDS"].at("shape"), json::array({3}));
  EXPECT_EQ(by_name["IDS"].at("datatype"), "INT32");
  EXPECT_EQ(by_name["PAIR"].at("shape"), json::array({2, 3}));
  EXPECT_EQ(by_name["GRID"].at("shape"), json::array({2, 3}));
  EXPECT_EQ(by_name["GRID"].at("data"), json::array({1, 2, 3, 4, 5, 6}));
  // A batching model gets the batch dimension 1 in front; a scalar is one element.
  const auto b = translate(R"({"IDS": 7})", true);
  EXPECT_EQ(b.at("inputs")[0].at("shape"), json::array({1, 1}));
}

TEST(GenerateCodec, ParametersAndIdPassThrough) {
  const auto j = translate(R"({"IDS": [1], "parameters": {"priority": 2}, "id": "x"})");
  EXPECT_EQ(j.at("parameters"), (json{{"priority", 2}}));
  EXPECT_EQ(j.at("id"), "x");
  // The translation decodes as /infer decodes.
  std::string infer;
  ASSERT_TRUE(servekit::http::translate_generate_request(
                  R"({"IDS": [1, 2], "parameters": {"priority": 2}})", "m", configs(), false, infer)
                  .ok());
  servekit::http::decoded_infer_request decoded;
  const auto s = servekit::http::decode_infer_request(infer, std::nullopt, decoded);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(decoded.request.inputs.size(), 1U);
  EXPECT_EQ(decoded.request.inputs[0].values<std::int32_t>()[1], 2);
  EXPECT_EQ(decoded.request.priority, 2U);
}

TEST(GenerateCodec, ErrorsNameTheKey) {
  EXPECT_NE(error_of(R"({"prompt": "x"})").find("unexpected generate input 'prompt' for model 'm'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"PAIR": [1, 2, 3]})").find("'PAIR'"), std::string::npos);
  EXPECT_NE(error_of(R"({"GRID": [1, 2, 3]})").find("nested arrays of rank 2"), std::string::npos);
  EXPECT_NE(error_of(R"({"GRID": [[1, 2], [3]]})").find("'GRID'"), std::string::npos);
  EXPECT_NE(error_of(R"({"IDS": {"a": 1}})").find("'IDS'"), std::string::npos);
  EXPECT_NE(error_of(R"({"parameters": []})").find("parameters"), std::string::npos);
  EXPECT_NE(error_of(R"({"id": 3})").find("\"id\""), std::string::npos);
  EXPECT_NE(error_of(R"("text")").find("JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"IDS": )").find("parse"), std::string::npos);
}

// Issue 16: a body nesting 100,000 levels deep crashed the server (SIGSEGV: the generate path
// walked the parsed value recursively), and `1e400` reached the client as a 500 with
// nlohmann's internal message. Both are the client's fault: invalid_argument, saying what.
TEST(GenerateCodec, DeepNestingIsRefusedAtTheDepthLimit) {
  constexpr std::size_t levels = 100'000;
  const std::string deep =
      R"({"IDS": )" + std::string(levels, '[') + "1" + std::string(levels, ']') + "}";
  EXPECT_NE(error_of(deep).find("nests deeper than"), std::string::npos);
  servekit::http::decoded_infer_request d;
  const auto s = servekit::http::decode_generate_request(deep, "m", configs(), false, d);
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(s.message().find("nests deeper than"), std::string::npos) << s.message();
  // At the limit itself the body parses (whatever its shape check says next).
  const std::size_t ok_levels = servekit::http::detail::max_json_body_depth - 1;
  const std::string at_limit =
      R"({"IDS": )" + std::string(ok_levels, '[') + "1" + std::string(ok_levels, ']') + "}";
  std::string out;
  const auto t = servekit::http::translate_generate_request(at_limit, "m", configs(), false, out);
  EXPECT_EQ(t.message().find("nests deeper than"), std::string::npos) << t.message();
}

TEST(GenerateCodec, NumberOutOfRangeIsTheClientsFault) {
  const std::string message = error_of(R"({"IDS": [1e400]})");
  EXPECT_NE(message.find("number out of range"), std::string::npos) << message;
  EXPECT_EQ(message.find("[json.exception"), std::string::npos) << message;
  servekit::http::decoded_infer_request d;
  const auto s =
      servekit::http::decode_generate_request(R"({"IDS": [1e400]})", "m", configs(), false, d);
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument) << s.message();
}

// The server's request_limits reach the generate path: its body's nesting, and the elements of
// each input as the decoder takes them.
TEST(GenerateCodec, RequestLimitsApply) {
  servekit::http::request_limits l;
  l.max_json_depth = 3;
  servekit::http::decoded_infer_request d;
  auto s =
      servekit::http::decode_generate_request(R"({"GRID": [[[1]]]})", "m", configs(), false, d, l);
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(s.message().find("nests deeper than 3 levels"), std::string::npos) << s.message();
  EXPECT_TRUE(
      servekit::http::decode_generate_request(R"({"GRID": [[1, 2]]})", "m", configs(), false, d, l)
          .ok());
  l.max_tensor_elements = 2;
  s = servekit::http::decode_generate_request(R"({"IDS": [1, 2, 3]})", "m", configs(), false, d, l);
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(s.message().find("the limit max_tensor_elements"), std::string::npos) << s.message();
}

// decode_generate_request parses the body once; it must decode exactly as decode_infer_request
// decodes translate_generate_request's JSON: same tensors and fields, or the same error.
void expect_decodes_as_translated(const std::string& body, bool batching) {
  SCOPED_TRACE(body);
  servekit::http::decoded_infer_request direct;
  const auto d = servekit::http::decode_generate_request(body, "m", configs(), batching, direct);
  std::string infer;
  auto t = servekit::http::translate_generate_request(body, "m", configs(), batching, infer);
  servekit::http::decoded_infer_request via_json;
  if (t.ok()) {
    t = servekit::http::decode_infer_request(infer, std::nullopt, via_json);
  }
  ASSERT_EQ(d.ok(), t.ok()) << d.message() << " | " << t.message();
  if (!d.ok()) {
    EXPECT_EQ(d.code(), t.code());
    EXPECT_EQ(d.message(), t.message());
    return;
  }
  const auto& a = direct.request;
  const auto& b = via_json.request;
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.priority, b.priority);
  EXPECT_EQ(a.timeout_us, b.timeout_us);
  EXPECT_EQ(a.sequence_id, b.sequence_id);
  EXPECT_EQ(a.sequence_start, b.sequence_start);
  EXPECT_EQ(a.sequence_end, b.sequence_end);
  EXPECT_EQ(direct.binary_data_output, via_json.binary_data_output);
  EXPECT_EQ(a.parameters, b.parameters);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (std::size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i].name, b.inputs[i].name);
    EXPECT_EQ(a.inputs[i].type, b.inputs[i].type);
    EXPECT_TRUE(a.inputs[i].shape == b.inputs[i].shape) << a.inputs[i].name;
    const auto x = a.inputs[i].data.bytes();
    const auto y = b.inputs[i].data.bytes();
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << a.inputs[i].name;
  }
}

TEST(GenerateCodec, DecodesInOneParseAsTheTranslation) {
  const char* bodies[] = {
      R"({"text_input": "hi", "IDS": [1, 2, 3], "PAIR": [1, 2, 3, 4, 5, 6],
          "GRID": [[1.5, -2, 3e2], [4, 5, 6]]})",
      R"({"IDS": 7, "id": "r1", "parameters": {"priority": 2, "timeout": 5, "x": "y"}})",
      R"({"IDS": [1], "parameters": {"sequence_id": "s", "sequence_start": true,
          "sequence_end": false, "binary_data_output": true}})",
      R"({"text_input": "caf\u00e9 \"q\"", "IDS": []})",
      R"({"GRID": [[0.1, -0.0], [1e-320, 3.4e38]], "PAIR": [[-0, 1], [2, 3]]})",
      R"({"IDS": [1], "parameters": {"priority": -0}})", // "-0": unsigned, as from the dump
      R"({})",
      // Errors: from the plan, or from the decoder (element, parameter and type checks).
      R"({"IDS": ["x"]})",
      R"({"IDS": [1.0]})",
      R"({"IDS": [2147483648]})",
      R"({"GRID": [[1e39]]})",
      R"({"text_input": 3})",
      R"({"IDS": [1], "parameters": {"priority": -1}})",
      R"({"IDS": [1], "parameters": {"triton_x": 1}})",
      R"({"IDS": [1], "parameters": {"priority": [1]}})",
      R"({"IDS": [1], "parameters": {"x": {"y": [[[1]]]}}})",
      R"({"IDS": [1], "parameters": {"x": 1.5, "n": 18446744073709551615, "s": "t", "b": true}})",
      R"({"IDS": [1], "parameters": {"x": null}})",
      R"({"IDS": [null], "id": "r"})",
      R"({"prompt": "x"})",
      R"({"GRID": [1, 2]})",
      R"([1])",
      R"({"IDS": )",
  };
  for (const char* body : bodies) {
    expect_decodes_as_translated(body, false);
    expect_decodes_as_translated(body, true);
  }
}

TEST(GenerateCodec, ParametersReachTheRequestAsFromInfer) {
  servekit::http::decoded_infer_request d;
  auto s = servekit::http::decode_generate_request(
      R"({"IDS": [1], "parameters": {"max_tokens": 20, "temperature": 0.7, "stream": false,
          "stop": "\n", "priority": 1}})",
      "m", configs(), false, d);
  ASSERT_TRUE(s.ok()) << s.message();
  const auto& p = d.request.parameters;
  // nlohmann's object keeps its keys sorted: the parameters arrive in that order.
  ASSERT_EQ(p.size(), 4U);
  EXPECT_EQ(p[0].name, "max_tokens");
  EXPECT_EQ(p.get<std::int64_t>("max_tokens"), 20);
  EXPECT_EQ(p.get<double>("temperature"), 0.7);
  EXPECT_EQ(p.get<bool>("stream"), false);
  EXPECT_EQ(p.get<std::string_view>("stop"), "\n");
  EXPECT_EQ(d.request.priority, 1U); // reserved: a field, not a parameter
  EXPECT_FALSE(p.contains("priority"));

  s = servekit::http::decode_generate_request(R"({"IDS": [1], "parameters": {"stop": ["a"]}})", "m",
                                              configs(), false, d);
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(s.message().find("parameter 'stop' has invalid type (an array)"), std::string::npos)
      << s.message();
}

TEST(GenerateCodec, ResponseParametersAreTopLevelKeysAsTritonWritesThem) {
  servekit::response r;
  r.id = "7";
  r.add_output("OUT", data_type::int32, {1}).values<std::int32_t>()[0] = 5;
  r.parameters.set("tokens", 3);
  r.parameters.set("finish_reason", "length");
  r.parameters.set("score", 0.5);
  std::string out;
  ASSERT_TRUE(servekit::http::encode_generate_response(r, "m", 3, out).ok());
  EXPECT_EQ(json::parse(out), (json{{"model_name", "m"},
                                    {"model_version", "3"},
                                    {"id", "7"},
                                    {"tokens", 3},
                                    {"finish_reason", "length"},
                                    {"score", 0.5},
                                    {"OUT", 5}}));

  // Triton's precedence on a shared name: the response's own keys, then parameters, then
  // outputs; no key is written twice.
  r.parameters.set("model_name", "other");
  r.parameters.set("id", "other");
  r.parameters.set("OUT", true);
  ASSERT_TRUE(servekit::http::encode_generate_response(r, "m", 3, out).ok());
  EXPECT_EQ(json::parse(out).at("model_name"), "m");
  EXPECT_EQ(json::parse(out).at("id"), "7");
  EXPECT_EQ(json::parse(out).at("OUT"), true);
  EXPECT_EQ(out.find("\"OUT\""), out.rfind("\"OUT\""));
  EXPECT_EQ(out.find("\"id\""), out.rfind("\"id\""));
  // Without a request id, "id" is free for a parameter, as in Triton.
  r.id.clear();
  ASSERT_TRUE(servekit::http::encode_generate_response(r, "m", 3, out).ok());
  EXPECT_EQ(json::parse(out).at("id"), "other");
}

TEST(GenerateCodec, ResponseIsFlat) {
  servekit::response r;
  r.id = "7";
  r.add_output("OUT", data_type::int32, {1}).values<std::int32_t>()[0] = 5;
  auto& f = r.add_output("VEC", data_type::fp32, {1, 2});
  f.values<float>()[0] = 0.5F;
  f.values<float>()[1] = 1.5F;
  std::string out;
  ASSERT_TRUE(servekit::http::encode_generate_response(r, "m", 3, out).ok());
  EXPECT_EQ(json::parse(out), (json{{"model_name", "m"},
                                    {"model_version", "3"},
                                    {"id", "7"},
                                    {"OUT", 5},
                                    {"VEC", {0.5, 1.5}}}));
  EXPECT_EQ(servekit::http::sse_event(R"({"a":1})"), "data: {\"a\":1}\n\n");
}

} // namespace generate_codec_test
