#pragma once
/// \file
/// A session's /generate and /generate_stream (http/impl/session.hpp), Triton's generate
/// extension: the flat request translated and submitted on the strand; /generate's one response
/// collected by the sink, /generate_stream's responses encoded by the sink and written on the
/// strand as server-sent events. Compiled once into servekit::server by
/// src/http/session_generate.cpp, or included by http/server.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/generate_codec.hpp>
#include <servekit/http/impl/server_state.hpp>
#include <servekit/http/impl/session.hpp>
#include <servekit/http/kserve_codec.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <thread>

namespace servekit::http {

namespace detail {

SERVEKIT_DECL void session::generate_sink::operator()(response&& r) {
  if (self->handoff_.streaming) {
    self->stream_response(self, std::move(r));
  } else {
    self->collect_generate_response(self, std::move(r));
  }
}

/// POST .../generate (`stream` false) and .../generate_stream (`stream` true). The flat
/// request is decoded as the KServe infer request it stands for (generate_codec.hpp), checked as
/// /infer checks it, from one parse of the body. /generate answers with one JSON object: the
/// model's only response (a decoupled model sending more than one gets 400 naming /generate_stream,
/// as Triton refuses); an empty final response adds nothing. /generate_stream answers with
/// server-sent events, one per response, chunked, written as the responses arrive; an error after
/// the first event is an event {"error": "..."}, an error before it is an ordinary error reply.
SERVEKIT_DECL void session::handle_generate(bool stream) {
  handoff_.model = server_.models().find(on_strand_.route.model, on_strand_.route.version);
  if (!handoff_.model) {
    reply_missing_model();
    return;
  }
  const model_ref ref = handoff_.model->model();
  if (status s = decode_generate_request(
          on_strand_.parser->get().body(), handoff_.model->options().name, ref.inputs(),
          ref.max_batch_size() > 0, handoff_.decoded, server_.options().limits);
      !s.ok()) {
    reply_error(http_status_for(s.code()), s.message());
    return;
  }
  handoff_.openai.reset();
  if (status s = submit_generate(std::move(handoff_.decoded.request), ref, stream); !s.ok()) {
    reply_error(http_status_for(s.code()), s.message());
  }
}

/// Submits `r` to `ref` (handoff_.model) with the generate sink, streaming or not; the OpenAI
/// endpoints come through here too, handoff_.openai set or not. Not ok: the submit's refusal,
/// for the caller to answer in its endpoint's form.
SERVEKIT_DECL status session::submit_generate(request&& r, const model_ref& ref, bool stream) {
  if (status s = admit(r, handoff_.model->options().name); !s.ok()) {
    return s;
  }
  handoff_.streaming = stream;
  handoff_.generate_responses = 0;
  handoff_.generate_model = handoff_.model->options().name;
  handoff_.generate_version = handoff_.model->options().version;
  on_strand_.stream_head_sent = false;
  on_strand_.stream_final_queued = false;
  on_strand_.stream_broken = false;
  handoff_.status = 200;
  // From a successful submit on, the sink owns handoff_.body and the generate_ members (non-stream)
  // until it posts the write: this thread must not touch them.
  make_cancellable(r, ref);
  status s = server_.drain().redirect(ref.submit(std::move(r), generate_sink{shared_from_this()}));
  if (!s.ok()) {
    on_strand_.in_flight.reset();
    handoff_.streaming = false;
  }
  return s;
}

/// /generate, on the thread the model answers on: keeps the one response in handoff_.body, and
/// posts the write after the final one.
SERVEKIT_DECL void session::collect_generate_response(const std::shared_ptr<session>& self,
                                                      response&& r) noexcept {
  try {
    if (handoff_.openai) {
      collect_openai_response(r);
    } else if (!r.ok()) {
      if (handoff_.status == 200) { // the first error wins; it replaces any response kept
        handoff_.status = http_status_for(r.status.code());
        handoff_.body = encode_error(r.status.message());
      }
    } else if (!r.final || !r.outputs.empty() || !r.parameters.empty()) {
      ++handoff_.generate_responses;
      if (handoff_.status == 200 && handoff_.generate_responses == 1) {
        const status s = encode_generate_response(r, handoff_.generate_model,
                                                  handoff_.generate_version, handoff_.body);
        handoff_.status = s.ok() ? 200 : http_status_for(s.code());
      } else if (handoff_.status == 200) {
        handoff_.status = 400;
        handoff_.body = encode_error(
            fmt::format("model '{}' sent more than one response: /generate returns exactly "
                        "one; use /v2/models/{}/generate_stream",
                        handoff_.generate_model, handoff_.generate_model));
      }
    }
    if (!handoff_.openai && r.final && handoff_.status == 200 && handoff_.generate_responses == 0) {
      // A decoupled model that sent only an empty final response: no outputs.
      const status s = encode_generate_response(response{}, handoff_.generate_model,
                                                handoff_.generate_version, handoff_.body);
      handoff_.status = s.ok() ? 200 : http_status_for(s.code());
    }
  } catch (...) {
    handoff_.status = 500;
    try {
      handoff_.body = R"({"error":"cannot encode the response"})";
    } catch (...) {
      handoff_.body.clear(); // out of memory: a bodiless 500 (noexcept: nothing may escape)
    }
  }
  if (r.final) {
    handoff_.content_type = json_content_type;
    handoff_.json_header_length.reset();
    post_reliably(self, [s = self] { s->write(); });
  }
}

/// /generate_stream, on the thread the model answers on: encodes the response and posts it to
/// the strand, which writes the events in the order the model sent them.
SERVEKIT_DECL void session::stream_response(const std::shared_ptr<session>& self,
                                            response&& r) noexcept {
  std::string json;
  unsigned error_status = 0;
  bool has_event = true;
  try {
    if (handoff_.openai) {
      // Already server-sent events (the chunk, and after the final one the usage chunk and
      // [DONE]); an error is its JSON alone, which stream_push_event frames.
      json = openai_events(r, error_status);
    } else if (!r.ok()) {
      error_status = http_status_for(r.status.code());
      json = encode_error(r.status.message());
    } else if (r.final && r.outputs.empty() && r.parameters.empty()) {
      has_event = false; // Triton sends no event for an empty final response
    } else if (const status s = encode_generate_response(r, handoff_.generate_model,
                                                         handoff_.generate_version, json);
               !s.ok()) {
      error_status = http_status_for(s.code()); // json holds the error
    }
  } catch (...) {
    error_status = 500;
    json.clear(); // out of memory: an error without a message (noexcept: nothing may escape)
  }
  // Straight to the strand, so the events keep their order. Retried while memory is exhausted
  // (a lost final event would leave the client waiting); Asio's post fails before queueing the
  // event unless the strand's invoker cannot be allocated (see post_reliably).
  // Each try posts a copy: a failed post may have consumed what it was given.
  auto push = [s = self, json = std::move(json), has_event, error_status,
               final = r.final]() mutable {
    s->stream_push(std::move(json), has_event, final, error_status);
  };
  for (;;) {
    try {
      auto attempt = push;
      asio::post(self->strand_, std::move(attempt));
      return;
    } catch (const std::bad_alloc&) {
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
  }
}

/// On the strand: queues one response's event (and the end of the body after the final).
SERVEKIT_DECL void session::stream_push(std::string json, bool has_event, bool final,
                                        unsigned error_status) {
  try {
    stream_push_event(std::move(json), has_event, final, error_status);
  } catch (const std::bad_alloc&) {
    // No memory for this event: the stream cannot go on whole, so it is given up as for a
    // client that does not read (the client sees the connection close before the last chunk).
    on_strand_.stream_final_queued = on_strand_.stream_final_queued || final;
    give_up_stream();
  }
}

SERVEKIT_DECL void session::stream_push_event(std::string json, bool has_event, bool final,
                                              unsigned error_status) {
  if (on_strand_.stream_broken) {
    if (final) {
      end_broken_stream();
    }
    return; // the client is gone: the model's responses are dropped
  }
  if (!on_strand_.stream_head_sent && final && error_status != 0) {
    // Failed before anything was streamed: an ordinary error reply with the right status.
    handoff_.streaming = false;
    handoff_.body = std::move(json);
    reply(error_status, json_content_type);
    return;
  }
  if (!on_strand_.stream_head_sent) {
    on_strand_.stream_head_sent = true;
    on_strand_.phase = phase::writing;
    on_strand_.close_after = !on_strand_.keep_alive || on_strand_.stopping;
    std::string head = "HTTP/1.1 200 OK\r\nContent-Type: ";
    head += event_stream_content_type;
    head += "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";
    if (on_strand_.close_after) {
      head += "Connection: close\r\n";
    }
    head += "\r\n";
    on_strand_.stream_queued_bytes += head.size();
    on_strand_.stream_queue.push_back(std::move(head));
  }
  if (has_event) {
    // An OpenAI stream's events come framed (several after its final response), its errors not;
    // an error event ends it with [DONE] as a completed stream does.
    const bool framed = handoff_.openai && error_status == 0;
    std::string event = framed ? std::move(json) : sse_event(json);
    if (handoff_.openai && error_status != 0) {
      event += sse_event("[DONE]");
    }
    std::string chunk = fmt::format("{:x}\r\n", event.size());
    chunk += event;
    chunk += "\r\n";
    on_strand_.stream_queued_bytes += chunk.size();
    on_strand_.stream_queue.push_back(std::move(chunk));
  }
  if (final) {
    on_strand_.stream_queue.emplace_back("0\r\n\r\n");
    on_strand_.stream_queued_bytes += 5;
    on_strand_.stream_final_queued = true;
  }
  if (on_strand_.stream_queued_bytes > server_.options().stream_buffer_bytes) {
    // The client reads slower than the model answers: give the stream up rather than buffer
    // without bound. Closing fails the write in progress (on_stream_write), which drops the
    // queue; the model's remaining responses are dropped as for a departed client.
    give_up_stream();
    return;
  }
  stream_write_next();
}

/// Drops the stream's queued events and closes the connection; the model's remaining responses
/// are dropped as for a departed client.
SERVEKIT_DECL void session::give_up_stream() {
  // The chunk being written stays until its write completes (the socket may still be
  // reading from it); the others are freed now.
  on_strand_.stream_broken = true;
  if (!on_strand_.stream_final_queued) {
    cancel_in_flight(); // the model need not produce what nobody will read
  }
  if (on_strand_.stream_writing) {
    on_strand_.stream_queue.erase(on_strand_.stream_queue.begin() + 1,
                                  on_strand_.stream_queue.end());
    on_strand_.stream_queue.shrink_to_fit();
  } else {
    std::deque<std::string>{}.swap(on_strand_.stream_queue);
  }
  on_strand_.stream_queued_bytes = 0;
  close();
  if (on_strand_.stream_final_queued && !on_strand_.stream_writing) {
    end_broken_stream();
  }
}

SERVEKIT_DECL void session::stream_write_next() {
  if (on_strand_.stream_writing || on_strand_.stream_queue.empty()) {
    return;
  }
  on_strand_.stream_writing = true;
  arm(server_.options().write_timeout); // a client that stops reading is cut off
  asio::async_write(on_strand_.socket, asio::buffer(on_strand_.stream_queue.front()),
                    [self = shared_from_this()](const error_code& ec, std::size_t) {
                      self->on_stream_write(ec);
                    });
}

SERVEKIT_DECL void session::on_stream_write(const error_code& ec) {
  on_strand_.stream_writing = false;
  disarm(); // waiting for the model's next response takes as long as it takes
  if (ec || on_strand_.stream_broken) {
    // The client went away mid-stream. The model still answers the request (its sink holds
    // the session); its remaining responses are dropped, and the connection is closed.
    const bool final_seen = on_strand_.stream_final_queued;
    on_strand_.stream_broken = true;
    if (!final_seen) {
      cancel_in_flight();
    }
    std::deque<std::string>{}.swap(on_strand_.stream_queue); // returns the memory
    on_strand_.stream_queued_bytes = 0;
    close();
    if (final_seen) {
      end_broken_stream();
    }
    return;
  }
  on_strand_.stream_queued_bytes -= on_strand_.stream_queue.front().size();
  on_strand_.stream_queue.pop_front();
  if (!on_strand_.stream_queue.empty()) {
    stream_write_next();
    return;
  }
  if (on_strand_.stream_final_queued) {
    handoff_.streaming = false;
    handoff_.model.reset();
    on_strand_.in_flight.reset();
    on_strand_.close_after = on_strand_.close_after || on_strand_.stopping;
    handoff_.status = 200;
    on_write(ec); // logs, then reads the next request or closes
  }
}

/// The final response of a stream whose client is gone: releases the model.
SERVEKIT_DECL void session::end_broken_stream() {
  handoff_.streaming = false;
  on_strand_.stream_final_queued = false;
  handoff_.model.reset();
  on_strand_.in_flight.reset();
  if (server_.options().log_verbose > 0) {
    handoff_.status = 499; // nginx's "client closed request", for the log line only
    log();
  }
}

} // namespace detail

} // namespace servekit::http
