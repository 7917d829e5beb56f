#pragma once
/// \file
/// The codec of the OpenAI-compatible endpoints a model server offers LLM gateways (the
/// Kubernetes Gateway API Inference Extension requires them): POST /v1/completions, POST
/// /v1/chat/completions and GET /v1/models, free of I/O.
///
/// A request becomes the generate request of a model with Triton's LLM inputs: `text_input`
/// (the prompt, or the chat messages through a trivial template), and the request parameters
/// `max_tokens` and `stream`. A response is built from the model's responses: their
/// `text_output`, and the final response's parameters `finish_reason`, `prompt_tokens` and
/// `completion_tokens` (the iteration batcher sets them). Sampling is the model's: a request
/// asking for what the server cannot give (n > 1, stop strings, logprobs) is refused by name
/// rather than answered differently.

#include <servekit/core/bytes.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/http/detail/json_body.hpp>
#include <servekit/http/detail/json_writer.hpp>
#include <servekit/http/kserve_response.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace servekit::http {

/// Which OpenAI endpoint.
enum class openai_api : std::uint8_t {
  completions,      ///< POST /v1/completions: "prompt"
  chat_completions, ///< POST /v1/chat/completions: "messages"
};

/// A decoded OpenAI request: the model it names, whether it streams, and the request to submit.
struct openai_request {
  std::string model;
  bool stream = false;
  bool include_usage = false; ///< stream_options.include_usage: a last chunk with the counts
  servekit::request request;
};

/// The trivial chat template: each message as "<role>: <content>\n", then "assistant: ", the
/// turn the model completes.
[[nodiscard]] inline std::string apply_chat_template(const nlohmann::json& messages) {
  std::string prompt;
  for (const auto& m : messages) {
    prompt += m["role"].get<std::string>();
    prompt += ": ";
    prompt += m["content"].get<std::string>();
    prompt += '\n';
  }
  prompt += "assistant: ";
  return prompt;
}

namespace detail {

[[nodiscard]] inline status openai_field_error(std::string_view field, std::string_view why) {
  return invalid_argument("'" + std::string{field} + "' " + std::string{why});
}

/// The prompt of a completions request: a string, or an array of exactly one string.
[[nodiscard]] inline status openai_prompt(const nlohmann::json& j, std::string& out) {
  const auto it = j.find("prompt");
  if (it == j.end()) {
    return openai_field_error("prompt", "is required");
  }
  if (it->is_string()) {
    out = it->get<std::string>();
    return {};
  }
  if (it->is_array() && it->size() == 1 && it->front().is_string()) {
    out = it->front().get<std::string>();
    return {};
  }
  return openai_field_error("prompt", "must be a string (or an array of one string; a batch of "
                                      "prompts or token ids is not supported)");
}

/// The chat messages of a chat request, checked, through the template.
[[nodiscard]] inline status openai_messages(const nlohmann::json& j, std::string& out) {
  const auto it = j.find("messages");
  if (it == j.end() || !it->is_array() || it->empty()) {
    return openai_field_error("messages", "must be a non-empty array of {role, content}");
  }
  for (const auto& m : *it) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      return openai_field_error("messages",
                                "entries must be objects with string 'role' and 'content'");
    }
  }
  out = apply_chat_template(*it);
  return {};
}

} // namespace detail

/// Decodes an OpenAI request body for `api` into `out`. Errors are invalid_argument naming the
/// field.
[[nodiscard]] inline status
decode_openai_request(std::string_view body, openai_api api, openai_request& out,
                      std::size_t max_depth = detail::max_json_body_depth) {
  nlohmann::json j;
  if (status s = detail::parse_json_body(body, j, "the request", max_depth); !s.ok()) {
    return s;
  }
  if (!j.is_object()) {
    return invalid_argument("the request body must be a JSON object");
  }
  out = openai_request{};
  const auto model = j.find("model");
  if (model == j.end() || !model->is_string() || model->get<std::string>().empty()) {
    return detail::openai_field_error("model", "is required: the name of the model to use");
  }
  out.model = model->get<std::string>();
  std::string prompt;
  if (status s = api == openai_api::completions ? detail::openai_prompt(j, prompt)
                                                : detail::openai_messages(j, prompt);
      !s.ok()) {
    return s;
  }
  auto& r = out.request;
  r.inputs.push_back(make_tensor("text_input", shape{1}, {std::string_view{prompt}}));
  // max_completion_tokens is the chat API's newer name of max_tokens.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      continue;
    }
    if (!it->is_number_integer() || it->get<std::int64_t>() < 1) {
      return detail::openai_field_error(key, "must be an integer of at least 1");
    }
    r.parameters.set("max_tokens", it->get<std::int64_t>());
  }
  if (const auto it = j.find("stream"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return detail::openai_field_error("stream", "must be true or false");
    }
    out.stream = it->get<bool>();
  }
  r.parameters.set("stream", out.stream);
  if (const auto it = j.find("stream_options"); it != j.end() && it->is_object()) {
    if (const auto u = it->find("include_usage"); u != it->end() && u->is_boolean()) {
      out.include_usage = u->get<bool>();
    }
  }
  if (const auto it = j.find("n"); it != j.end() && !it->is_null() &&
                                   !(it->is_number_integer() && it->get<std::int64_t>() == 1)) {
    return detail::openai_field_error("n", "must be 1: one choice per request");
  }
  for (const char* unsupported : {"stop", "logprobs", "top_logprobs", "echo", "best_of"}) {
    const auto it = j.find(unsupported);
    if (it != j.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>())) {
      return detail::openai_field_error(unsupported, "is not supported by this server");
    }
  }
  if (const auto it = j.find("ignore_eos"); it != j.end() && it->is_boolean()) {
    r.parameters.set("ignore_eos", it->get<bool>()); // vLLM's extension
  }
  if (const auto it = j.find("priority"); it != j.end() && it->is_number_unsigned()) {
    r.priority = it->get<std::uint64_t>(); // vLLM's extension; Triton's levels (1 highest)
  }
  return {};
}

namespace detail {

/// The text of a response's `text_output` (empty when it has none).
[[nodiscard]] inline std::string_view openai_text(const servekit::response& r) {
  const tensor* t = r.find_output("text_output");
  if (t == nullptr || t->type != data_type::bytes || !t->data.location().host_accessible()) {
    return {};
  }
  std::string_view text;
  (void)for_each_bytes_element(t->data.bytes(), [&](std::string_view e) {
    if (text.empty()) {
      text = e;
    }
  });
  return text;
}

inline void append_openai_head(std::string& out, openai_api api, bool chunk, std::string_view id,
                               std::int64_t created, std::string_view model) {
  out += R"({"id":)";
  append_json_string(out, std::string{api == openai_api::completions ? "cmpl-" : "chatcmpl-"} +
                              std::string{id});
  out += R"(,"object":")";
  out += api == openai_api::completions ? "text_completion"
         : chunk                        ? "chat.completion.chunk"
                                        : "chat.completion";
  out += R"(","created":)";
  out += std::to_string(created);
  out += R"(,"model":)";
  append_json_string(out, model);
}

inline void append_openai_usage(std::string& out, const servekit::response& r) {
  const auto prompt = r.parameters.get<std::int64_t>("prompt_tokens").value_or(0);
  const auto completion = r.parameters.get<std::int64_t>("completion_tokens").value_or(0);
  out += R"("usage":{"prompt_tokens":)";
  out += std::to_string(prompt);
  out += R"(,"completion_tokens":)";
  out += std::to_string(completion);
  out += R"(,"total_tokens":)";
  out += std::to_string(prompt + completion);
  out += '}';
}

inline void append_finish_reason(std::string& out, const servekit::response& r) {
  const auto reason = r.parameters.get<std::string_view>("finish_reason");
  if (r.final && reason) {
    append_json_string(out, *reason);
  } else if (r.final) {
    out += R"("stop")";
  } else {
    out += "null";
  }
}

} // namespace detail

/// The non-streaming answer: `text` is every token's text (the model's one final response
/// carries it, or the caller joined a stream's), `last` the final response (finish reason and
/// counts).
[[nodiscard]] inline std::string encode_openai_response(openai_api api, std::string_view id,
                                                        std::int64_t created,
                                                        std::string_view model,
                                                        std::string_view text,
                                                        const servekit::response& last) {
  std::string out;
  detail::append_openai_head(out, api, false, id, created, model);
  out += R"(,"choices":[{"index":0,)";
  if (api == openai_api::completions) {
    out += R"("text":)";
    detail::append_json_string(out, text);
  } else {
    out += R"("message":{"role":"assistant","content":)";
    detail::append_json_string(out, text);
    out += '}';
  }
  out += R"(,"logprobs":null,"finish_reason":)";
  detail::append_finish_reason(out, last);
  out += "}],";
  detail::append_openai_usage(out, last);
  out += '}';
  return out;
}

/// One streamed chunk for response `r` (the `index`-th of its request); `first` adds the
/// chat's assistant role.
[[nodiscard]] inline std::string encode_openai_chunk(openai_api api, std::string_view id,
                                                     std::int64_t created, std::string_view model,
                                                     const servekit::response& r, bool first) {
  std::string out;
  detail::append_openai_head(out, api, true, id, created, model);
  out += R"(,"choices":[{"index":0,)";
  if (api == openai_api::completions) {
    out += R"("text":)";
    detail::append_json_string(out, detail::openai_text(r));
  } else {
    out += R"("delta":{)";
    if (first) {
      out += R"("role":"assistant",)";
    }
    out += R"("content":)";
    detail::append_json_string(out, detail::openai_text(r));
    out += '}';
  }
  out += R"(,"logprobs":null,"finish_reason":)";
  detail::append_finish_reason(out, r);
  out += "}]}";
  return out;
}

/// The last chunk of a stream that asked for stream_options.include_usage: no choices, the
/// counts of the final response `r`.
[[nodiscard]] inline std::string encode_openai_usage_chunk(openai_api api, std::string_view id,
                                                           std::int64_t created,
                                                           std::string_view model,
                                                           const servekit::response& r) {
  std::string out;
  detail::append_openai_head(out, api, true, id, created, model);
  out += R"(,"choices":[],)";
  detail::append_openai_usage(out, r);
  out += '}';
  return out;
}

/// An error in OpenAI's form: {"error":{"message","type","param":null,"code"}}; `type` from the
/// HTTP status as OpenAI's clients read it.
[[nodiscard]] inline std::string encode_openai_error(unsigned http_status,
                                                     std::string_view message) {
  std::string out = R"({"error":{"message":)";
  detail::append_json_string(out, message);
  out += R"(,"type":")";
  out += http_status == 404   ? "NotFoundError"
         : http_status == 400 ? "BadRequestError"
         : http_status == 503 ? "ServiceUnavailableError"
                              : "InternalServerError";
  out += R"(","param":null,"code":)";
  out += std::to_string(http_status);
  out += "}}";
  return out;
}

/// GET /v1/models: {"object":"list","data":[{"id","object":"model","created":0,"owned_by"}]}.
template <class Names>
[[nodiscard]] std::string encode_openai_models(const Names& names) {
  std::string out = R"({"object":"list","data":[)";
  bool first = true;
  for (const auto& name : names) {
    if (!first) {
      out += ',';
    }
    first = false;
    out += R"({"id":)";
    detail::append_json_string(out, name);
    out += R"(,"object":"model","created":0,"owned_by":"servekit"})";
  }
  out += "]}";
  return out;
}

} // namespace servekit::http
