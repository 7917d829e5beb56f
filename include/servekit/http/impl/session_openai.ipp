#pragma once
/// \file
/// A session's OpenAI-compatible endpoints (http/impl/session.hpp): POST /v1/completions and
/// /v1/chat/completions through the generate machinery (session_generate.ipp) with the OpenAI
/// codec (http/openai_codec.hpp), and GET /v1/models. Compiled once into servekit::server by
/// src/http/session_openai.cpp, or included by http/server.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/endpoints.hpp>
#include <servekit/http/generate_codec.hpp>
#include <servekit/http/impl/server_state.hpp>
#include <servekit/http/impl/session.hpp>
#include <servekit/http/kserve_response.hpp>
#include <servekit/http/openai_codec.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servekit::http {

namespace detail {

/// Whether a model takes Triton's LLM text input (what the OpenAI endpoints submit).
inline bool takes_text_input(const model_ref& m) {
  for (const auto& in : m.inputs()) {
    if (in.name == "text_input" && in.type == data_type::bytes) {
      return true;
    }
  }
  return false;
}

SERVEKIT_DECL void session::reply_openai_error(unsigned status, std::string_view message) {
  handoff_.body = encode_openai_error(status, message);
  reply(status, json_content_type);
}

/// The request is decoded into a generate request of the model its "model" names, which must
/// take `text_input`; from the submit on it runs as /generate (stream false) or
/// /generate_stream (stream true) does, the sink encoding OpenAI's objects.
SERVEKIT_DECL void session::handle_openai(openai_api api) {
  openai_request decoded;
  if (status s = decode_openai_request(on_strand_.parser->get().body(), api, decoded,
                                       server_.options().limits.max_json_depth);
      !s.ok()) {
    reply_openai_error(400, s.message());
    return;
  }
  handoff_.model = server_.models().find(decoded.model, -1);
  if (!handoff_.model) {
    const auto s = missing_model_status(server_.models(), decoded.model, -1, true);
    reply_openai_error(s ? http_status_for(s->code()) : 404,
                       s ? s->message()
                         : fmt::format("The model '{}' does not exist", decoded.model));
    return;
  }
  const model_ref ref = handoff_.model->model();
  if (!takes_text_input(ref)) {
    handoff_.model.reset();
    reply_openai_error(400, fmt::format("model '{}' is not a text generation model: it takes no "
                                        "BYTES input 'text_input'",
                                        decoded.model));
    return;
  }
  static std::atomic<std::uint64_t> next_id{1};
  handoff_.openai = api;
  handoff_.openai_id = std::to_string(next_id.fetch_add(1, std::memory_order_relaxed));
  handoff_.openai_created = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  handoff_.openai_include_usage = decoded.include_usage;
  handoff_.openai_text.clear();
  if (status s = submit_generate(std::move(decoded.request), ref, decoded.stream); !s.ok()) {
    handoff_.model.reset();
    reply_openai_error(http_status_for(s.code()), s.message());
  }
}

/// Non-streamed: joins the responses' text; the final one gives the finish reason and counts.
SERVEKIT_DECL void session::collect_openai_response(const response& r) {
  if (!r.ok()) {
    if (handoff_.status == 200) { // the first error wins
      handoff_.status = http_status_for(r.status.code());
      handoff_.body = encode_openai_error(handoff_.status, r.status.message());
    }
    return;
  }
  handoff_.openai_text += detail::openai_text(r);
  if (r.final && handoff_.status == 200) {
    handoff_.body =
        encode_openai_response(*handoff_.openai, handoff_.openai_id, handoff_.openai_created,
                               handoff_.generate_model, handoff_.openai_text, r);
  }
}

/// Streamed: one chunk per response, framed; after the final one the usage chunk (when asked
/// for) and [DONE]. An error is its JSON alone, with `error_status` set.
SERVEKIT_DECL std::string session::openai_events(const response& r, unsigned& error_status) {
  if (!r.ok()) {
    error_status = http_status_for(r.status.code());
    return encode_openai_error(error_status, r.status.message());
  }
  const openai_api api = *handoff_.openai;
  std::string events =
      sse_event(encode_openai_chunk(api, handoff_.openai_id, handoff_.openai_created,
                                    handoff_.generate_model, r, handoff_.generate_responses == 0));
  ++handoff_.generate_responses;
  if (r.final) {
    if (handoff_.openai_include_usage) {
      events += sse_event(encode_openai_usage_chunk(
          api, handoff_.openai_id, handoff_.openai_created, handoff_.generate_model, r));
    }
    events += sse_event("[DONE]");
  }
  return events;
}

/// The ready models that take `text_input`: what the OpenAI endpoints can serve.
SERVEKIT_DECL void session::handle_openai_models() {
  std::vector<std::string> names;
  for (const auto& entry : server_.models().index()) {
    if (entry.state != model_ready_state::ready) {
      continue;
    }
    if (const auto m = server_.models().find(entry.name, entry.version);
        m && takes_text_input(m->model())) {
      if (names.empty() || names.back() != entry.name) {
        names.push_back(entry.name);
      }
    }
  }
  handoff_.body = encode_openai_models(names);
  reply(200, json_content_type);
}

} // namespace detail

} // namespace servekit::http
