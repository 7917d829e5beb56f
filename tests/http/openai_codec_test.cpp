// The OpenAI codec (http/openai_codec.hpp) without a server: requests decoded into the generate
// request they stand for, every refusal naming its field, and the response objects and chunks
// as OpenAI's clients parse them.
#include <servekit/http/openai_codec.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace openai_codec_test {

using servekit::http::decode_openai_request;
using servekit::http::openai_api;
using servekit::http::openai_request;
using json = nlohmann::json;

std::string prompt_of(const openai_request& r) {
  return std::string{r.request.input("text_input").strings().front()};
}

TEST(OpenAICodec, CompletionsRequest) {
  openai_request r;
  ASSERT_TRUE(decode_openai_request(R"({"model": "m", "prompt": "Hi", "max_tokens": 5,
      "stream": true, "stream_options": {"include_usage": true}, "temperature": 0.7,
      "ignore_eos": true, "priority": 2})",
                                    openai_api::completions, r)
                  .ok());
  EXPECT_EQ(r.model, "m");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(prompt_of(r), "Hi");
  EXPECT_EQ(r.request.parameters.get<std::int64_t>("max_tokens"), 5);
  EXPECT_EQ(r.request.parameters.get<bool>("stream"), true);
  EXPECT_EQ(r.request.parameters.get<bool>("ignore_eos"), true);
  EXPECT_EQ(r.request.priority, 2U);
  // A prompt given as an array of one string.
  ASSERT_TRUE(
      decode_openai_request(R"({"model": "m", "prompt": ["one"]})", openai_api::completions, r)
          .ok());
  EXPECT_EQ(prompt_of(r), "one");
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.request.parameters.contains("max_tokens")); // the model's default
}

TEST(OpenAICodec, ChatRequestThroughTheTemplate) {
  openai_request r;
  ASSERT_TRUE(decode_openai_request(R"({"model": "m", "max_completion_tokens": 3, "messages": [
      {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})",
                                    openai_api::chat_completions, r)
                  .ok());
  EXPECT_EQ(prompt_of(r), "system: Be brief.\nuser: Hi\nassistant: ");
  EXPECT_EQ(r.request.parameters.get<std::int64_t>("max_tokens"), 3);
}

TEST(OpenAICodec, RefusalsNameTheField) {
  const auto refused = [](std::string_view body, openai_api api, std::string_view field) {
    openai_request r;
    const auto s = decode_openai_request(body, api, r);
    EXPECT_EQ(s.code(), servekit::status_code::invalid_argument) << body;
    EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
  };
  const auto c = openai_api::completions;
  refused("[1]", c, "JSON object");
  refused(R"({"prompt": "x"})", c, "'model'");
  refused(R"({"model": "m"})", c, "'prompt'");
  refused(R"({"model": "m", "prompt": ["a", "b"]})", c, "'prompt'");
  refused(R"({"model": "m", "prompt": [1, 2]})", c, "'prompt'");
  refused(R"({"model": "m", "prompt": "x", "max_tokens": 0})", c, "'max_tokens'");
  refused(R"({"model": "m", "prompt": "x", "max_tokens": 1.5})", c, "'max_tokens'");
  refused(R"({"model": "m", "prompt": "x", "stream": "yes"})", c, "'stream'");
  refused(R"({"model": "m", "prompt": "x", "n": 3})", c, "'n'");
  refused(R"({"model": "m", "prompt": "x", "stop": ["\n"]})", c, "'stop'");
  refused(R"({"model": "m", "prompt": "x", "logprobs": 2})", c, "'logprobs'");
  const auto chat = openai_api::chat_completions;
  refused(R"({"model": "m"})", chat, "'messages'");
  refused(R"({"model": "m", "messages": [{"role": "user"}]})", chat, "'messages'");
  refused(R"({"model": "m", "messages": [{"role": "user", "content": [1]}]})", chat, "'messages'");
  // What asks for nothing unsupported is fine: n 1, stop null, logprobs false.
  openai_request r;
  EXPECT_TRUE(decode_openai_request(
                  R"({"model": "m", "prompt": "x", "n": 1, "stop": null, "logprobs": false})", c, r)
                  .ok());
}

servekit::response final_response(std::string_view text) {
  servekit::response r;
  r.final = true;
  r.outputs.push_back(servekit::make_tensor("text_output", {1}, {text}));
  r.parameters.set("finish_reason", std::string{"length"});
  r.parameters.set("prompt_tokens", std::int64_t{4});
  r.parameters.set("completion_tokens", std::int64_t{2});
  return r;
}

TEST(OpenAICodec, ResponsesAndChunks) {
  const auto last = final_response("lo");
  const auto c = json::parse(servekit::http::encode_openai_response(
      openai_api::completions, "7", 1700000000, "m", "hello", last));
  EXPECT_EQ(c["id"], "cmpl-7");
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["created"], 1700000000);
  EXPECT_EQ(c["choices"][0]["text"], "hello");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"], json::parse(R"({"prompt_tokens":4,"completion_tokens":2,
                                        "total_tokens":6})"));
  const auto chat = json::parse(servekit::http::encode_openai_response(
      openai_api::chat_completions, "7", 1, "m", "hello \"you\"", last));
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "hello \"you\"");

  servekit::response partial;
  partial.final = false;
  partial.outputs.push_back(servekit::make_tensor("text_output", {1}, {std::string_view{"x"}}));
  const auto first = json::parse(servekit::http::encode_openai_chunk(openai_api::chat_completions,
                                                                     "7", 1, "m", partial, true));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "x");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const auto end = json::parse(
      servekit::http::encode_openai_chunk(openai_api::completions, "7", 1, "m", last, false));
  EXPECT_EQ(end["choices"][0]["text"], "lo");
  EXPECT_EQ(end["choices"][0]["finish_reason"], "length");
  const auto usage = json::parse(
      servekit::http::encode_openai_usage_chunk(openai_api::completions, "7", 1, "m", last));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 6);

  const auto error = json::parse(servekit::http::encode_openai_error(404, "no model 'x'"));
  EXPECT_EQ(error["error"]["message"], "no model 'x'");
  EXPECT_EQ(error["error"]["type"], "NotFoundError");
  EXPECT_EQ(error["error"]["code"], 404);
  const std::string names[] = {"a", "b\"c"};
  const auto models = json::parse(servekit::http::encode_openai_models(names));
  EXPECT_EQ(models["data"].size(), 2U);
  EXPECT_EQ(models["data"][1]["id"], "b\"c");
  EXPECT_EQ(models["data"][1]["object"], "model");
}

} // namespace openai_codec_test
