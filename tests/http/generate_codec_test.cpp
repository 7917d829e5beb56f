// The generate extension's codec (pure): a flat request into a KServe infer request with shapes
// from the config, and a response into the flat form.

#include <servekit/http/generate_codec.hpp>
#include <servekit/http/kserve_request.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

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

} // namespace
