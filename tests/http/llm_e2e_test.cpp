// End to end: a generative model (hash_llm under the iteration batcher) through
// servekit::http::server on a loopback port: Triton's generate extension (/generate and
// /generate_stream), the OpenAI-compatible /v1/completions, /v1/chat/completions (streamed and
// not) and /v1/models, the vLLM metrics LLM gateways read, and a streaming client that leaves
// (its sequence is cancelled and its KV blocks freed).
#include "archetypes/hash_llm.hpp"
#include "archetypes/temp_repository.hpp"
#include "http_client.hpp"
#include "raw_client.hpp"

#include "backends/identity.hpp"

#include <servekit/http/openai_codec.hpp>
#include <servekit/http/server.hpp>
#include <servekit/repository/backend_list.hpp>
#include <servekit/repository/model_repository.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/socket.h>
#include <sys/time.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace llm_e2e_test {

namespace asio = boost::asio;
using asio::ip::tcp;
using hash_llm_test::hash_llm;
using hash_llm_test::hash_llm_gate;
using hash_llm_test::reference;
using json = nlohmann::json;
using namespace std::chrono_literals;

using test_backends =
    servekit::backend_list<servekit::named_backend<"hash_llm", hash_llm>,
                           servekit::named_backend<"identity", servekit_server::identity_backend>>;

hash_llm_gate& gate() {
  static hash_llm_gate g;
  return g;
}

class running_server {
public:
  running_server() : repository_{files_.root(), test_backends{}} {
    files_.write_file("llm", "config.pbtxt", R"(
backend: "hash_llm"
max_batch_size: 0
sequence_batching { iterative_sequence: true }
parameters { key: "num_gpu_blocks" value: { string_value: "64" } }
parameters { key: "block_size" value: { string_value: "4" } }
parameters { key: "default_max_tokens" value: { string_value: "8" } }
)");
    files_.write_file("gated", "config.pbtxt",
                      R"(
backend: "hash_llm"
parameters { key: "num_gpu_blocks" value: { string_value: "64" } }
parameters { key: "block_size" value: { string_value: "4" } }
parameters { key: "step_gate" value: { string_value: ")" +
                          std::to_string(reinterpret_cast<std::uintptr_t>(&gate())) +
                          R"(" } }
)");
    files_.write("text", R"({"name": "text", "backend": "identity", "max_batch_size": 0,
      "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [1]}],
      "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [1]}]})");
    for (const auto& e : repository_.load_all()) {
      EXPECT_EQ(e.state, servekit::model_ready_state::ready) << e.name << ": " << e.reason;
    }
    servekit::http::server_options options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.thread_count = 2;
    server_.emplace(repository_, std::move(options));
    thread_ = std::thread{[this] { server_->run(); }};
  }
  running_server(const running_server&) = delete;
  running_server& operator=(const running_server&) = delete;
  ~running_server() {
    server_->stop();
    thread_.join();
  }
  [[nodiscard]] std::uint16_t port() const { return server_->port(); }
  [[nodiscard]] std::unique_ptr<test_http::client> client() const {
    return std::make_unique<test_http::client>("127.0.0.1", server_->port());
  }
  [[nodiscard]] servekit::statistics_snapshot statistics(std::string_view model) const {
    const auto m = repository_.find(model);
    return m ? m->model().statistics() : servekit::statistics_snapshot{};
  }

private:
  archetypes::temp_repository files_;
  servekit::model_repository repository_;
  std::optional<servekit::http::server> server_;
  std::thread thread_;
};

json parse(const test_http::reply& r) {
  auto j = json::parse(r.body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.body << r.error;
  return j;
}

/// The data of each server-sent event of a body ("[DONE]" kept as a string).
std::vector<std::string> events_of(const std::string& body) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < body.size()) {
    const auto end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "unterminated event in: " << body;
    if (end == std::string::npos) {
      break;
    }
    const std::string_view event{body.data() + at, end - at};
    EXPECT_EQ(event.substr(0, 6), "data: ") << body;
    out.emplace_back(event.substr(6));
    at = end + 2;
  }
  return out;
}

TEST(LlmServing, GenerateAnswersWithTheTextAndItsFinishReason) {
  running_server s;
  const auto r =
      s.client()->post("/v2/models/llm/generate", R"({"text_input": "Hello", "max_tokens": 6})");
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto j = parse(r);
  EXPECT_EQ(j["text_output"], reference("Hello", 6, false));
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["completion_tokens"], 6);
  EXPECT_EQ(j["prompt_tokens"], 5);
  // The model's default_max_tokens, and max_tokens as a request parameter.
  const auto d = parse(s.client()->post("/v2/models/llm/generate", R"({"text_input": "Hi"})"));
  EXPECT_EQ(d["text_output"], reference("Hi", 8, false));
  const auto p = parse(s.client()->post(
      "/v2/models/llm/generate", R"({"text_input": "Hi", "parameters": {"max_tokens": 3}})"));
  EXPECT_EQ(p["text_output"], reference("Hi", 3, false));
}

TEST(LlmServing, GenerateStreamSendsOneEventPerToken) {
  running_server s;
  const auto r = s.client()->post("/v2/models/llm/generate_stream",
                                  R"({"text_input": "Stream", "max_tokens": 5, "stream": true})");
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto events = events_of(r.body);
  ASSERT_EQ(events.size(), 5U) << r.body;
  std::string text;
  for (const auto& e : events) {
    text += json::parse(e)["text_output"].get<std::string>();
  }
  EXPECT_EQ(text, reference("Stream", 5, false));
}

TEST(LlmServing, CompletionsAsOpenAIAnswers) {
  running_server s;
  const auto r =
      s.client()->post("/v1/completions", R"({"model": "llm", "prompt": "Once", "max_tokens": 7})");
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto j = parse(r);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "llm");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0U);
  ASSERT_EQ(j["choices"].size(), 1U);
  EXPECT_EQ(j["choices"][0]["text"], reference("Once", 7, false));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(j["usage"]["completion_tokens"], 7);
  EXPECT_EQ(j["usage"]["total_tokens"], 11);
}

TEST(LlmServing, CompletionsStreamChunksThenUsageThenDone) {
  running_server s;
  const auto r = s.client()->post("/v1/completions",
                                  R"({"model": "llm", "prompt": "Once", "max_tokens": 4,
                                      "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_EQ(r.status, 200U) << r.body;
  EXPECT_NE(r.header("content-type").find("text/event-stream"), std::string::npos);
  const auto events = events_of(r.body);
  ASSERT_EQ(events.size(), 6U) << r.body; // 4 tokens, usage, [DONE]
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (std::size_t i = 0; i < 4; ++i) {
    const auto c = json::parse(events[i]);
    EXPECT_EQ(c["object"], "text_completion");
    text += c["choices"][0]["text"].get<std::string>();
    if (i < 3) {
      EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
    } else {
      EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
    }
  }
  EXPECT_EQ(text, reference("Once", 4, false));
  const auto usage = json::parse(events[4]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
}

TEST(LlmServing, ChatCompletionsThroughTheTemplate) {
  running_server s;
  const std::string body = R"({"model": "llm", "max_tokens": 5, "messages": [
      {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]})";
  const std::string prompt = "system: Be brief.\nuser: Hi!\nassistant: ";
  const auto r = s.client()->post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200U) << r.body;
  const auto j = parse(r);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], reference(prompt, 5, false));
  EXPECT_EQ(j["usage"]["prompt_tokens"], static_cast<int>(prompt.size()));

  auto streamed = json::parse(body);
  streamed["stream"] = true;
  const auto st = s.client()->post("/v1/chat/completions", streamed.dump());
  ASSERT_EQ(st.status, 200U) << st.body;
  const auto events = events_of(st.body);
  ASSERT_EQ(events.size(), 6U) << st.body;
  std::string text;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    const auto c = json::parse(events[i]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["choices"][0]["delta"].contains("role"), i == 0);
    text += c["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, reference(prompt, 5, false));
  EXPECT_EQ(events.back(), "[DONE]");
}

TEST(LlmServing, ModelsListsTheTextGenerationModels) {
  running_server s;
  const auto j = parse(s.client()->get("/v1/models"));
  EXPECT_EQ(j["object"], "list");
  std::vector<std::string> ids;
  for (const auto& m : j["data"]) {
    ids.push_back(m["id"]);
    EXPECT_EQ(m["object"], "model");
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"gated", "llm"}));
}

TEST(LlmServing, OpenAIErrorsNameWhatIsWrong) {
  running_server s;
  auto c = s.client();
  const auto expect = [&](const test_http::reply& r, unsigned status, std::string_view part) {
    EXPECT_EQ(r.status, status) << r.body;
    const auto j = parse(r);
    ASSERT_TRUE(j.contains("error") && j["error"].is_object()) << r.body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(part), std::string::npos) << r.body;
  };
  expect(c->post("/v1/completions", R"({"model": "nope", "prompt": "x"})"), 404, "nope");
  expect(c->post("/v1/completions", R"({"model": "llm"})"), 400, "'prompt' is required");
  expect(c->post("/v1/completions", R"({"model": "llm", "prompt": "x", "n": 2})"), 400, "'n'");
  expect(c->post("/v1/completions", R"({"model": "llm", "prompt": "x", "max_tokens": 0})"), 400,
         "max_tokens");
  expect(c->post("/v1/chat/completions", R"({"model": "llm", "messages": []})"), 400, "'messages'");
  expect(c->post("/v1/completions", R"({"model": "text", "prompt": "x"})"), 400,
         "not a text generation model");
  expect(c->post("/v1/completions",
                 R"({"model": "llm", "prompt": ")" + std::string(3000, 'x') + R"("})"),
         400, "max_model_len");
  expect(c->post("/v1/completions", "{not json"), 400, "");
}

TEST(LlmServing, MetricsUnderVllmNames) {
  running_server s;
  ASSERT_EQ(s.client()->post("/v1/completions", R"({"model": "llm", "prompt": "m"})").status, 200U);
  const auto r = s.client()->get("/metrics");
  ASSERT_EQ(r.status, 200U);
  for (
      const std::string_view line :
      {R"(vllm:num_requests_running{model="llm",version="1",model_name="llm"} 0)",
       R"(vllm:num_requests_waiting{model="llm",version="1",model_name="llm"} 0)",
       R"(vllm:kv_cache_usage_perc{model="llm",version="1",model_name="llm"} 0)",
       R"(vllm:cache_config_info{model="llm",version="1",model_name="llm",block_size="4",num_gpu_blocks="64"} 1)",
       R"(vllm:generation_tokens_total{model="llm",version="1",model_name="llm"} 8)",
       R"(vllm:prompt_tokens_total{model="llm",version="1",model_name="llm"} 1)",
       R"(vllm:time_to_first_token_seconds_count{model="llm",version="1",model_name="llm"} 1)",
       R"(vllm:time_per_output_token_seconds_count{model="llm",version="1",model_name="llm"} 7)",
       "# TYPE vllm:time_to_first_token_seconds histogram"}) {
    EXPECT_NE(r.body.find(line), std::string::npos) << line << "\n" << r.body;
  }
  EXPECT_EQ(r.body.find("vllm:num_requests_running{model=\"text\""), std::string::npos);
}

using test_http::eventually;
using test_http::raw_client;

TEST(LlmServing, AStreamWhoseClientLeavesIsCancelledAndFreesItsBlocks) {
  running_server s;
  gate().allow(2);
  raw_client client{s.port()};
  client.post("/v1/completions",
              R"({"model": "gated", "prompt": "a long story", "max_tokens": 60, "stream": true})");
  ASSERT_TRUE(client.read_until("\"finish_reason\":null")) << client.received();
  gate().wait_steps(3); // the third step is held: the sequence holds KV blocks
  EXPECT_GT(s.statistics("gated").generation->kv_cache_usage, 0.0);
  client.leave();
  // One step at a time, so the server meets the closed connection while the sequence still
  // has tokens to generate (each token's write is where it finds out).
  const auto cancelled = [&] {
    return s.statistics("gated").failed_by(servekit::failure_reason::canceled) == 1;
  };
  for (int steps = 3; steps < 60 && !cancelled(); ++steps) {
    gate().allow(steps);
    std::this_thread::sleep_for(10ms);
  }
  gate().allow(1 << 30);
  ASSERT_TRUE(eventually(cancelled));
  const auto g = *s.statistics("gated").generation;
  EXPECT_LT(g.generation_tokens, 60U) << "the sequence ran to its end: it was not cancelled";
  EXPECT_EQ(g.kv_cache_usage, 0.0);
  EXPECT_EQ(g.num_requests_running, 0U);
}

} // namespace llm_e2e_test
