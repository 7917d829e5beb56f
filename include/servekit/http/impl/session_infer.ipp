#pragma once
/// \file
/// A session's /infer (http/impl/session.hpp): the request decoded and submitted on the strand,
/// the response encoded by the sink on the model's instance thread, then written on the strand.
/// Compiled once into servekit::server by src/http/session_infer.cpp, or included by
/// http/server.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/impl/server_state.hpp>
#include <servekit/http/impl/session.hpp>
#include <servekit/http/kserve_codec.hpp>
#include <servekit/http/routing_headers.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/post.hpp>

#include <fmt/format.h>

#include <charconv>
#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace servekit::http {

namespace detail {

SERVEKIT_DECL void session::infer_sink::operator()(response&& r) {
  if (!r.final) {
    return; // decoupled models are refused before submit; nothing partial reaches here
  }
  self->encode_infer_response(std::move(r));
  // The handler gets a copy: `self` keeps the session (and so the server) alive until post()
  // has returned, whatever the strand does meanwhile on another thread.
  post_reliably(self, [s = self] { s->write(); });
}

SERVEKIT_DECL void session::handle_infer() {
  handoff_.model = server_.models().find(on_strand_.route.model, on_strand_.route.version);
  if (!handoff_.model) {
    reply_missing_model();
    return;
  }
  const auto& req = on_strand_.parser->get();
  std::optional<std::size_t> header_length;
  if (const auto it = req.find("Inference-Header-Content-Length"); it != req.end()) {
    const auto text = to_std(it->value());
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc{} || end != text.data() + text.size()) {
      reply_error(400, fmt::format("invalid Inference-Header-Content-Length '{}'", text));
      return;
    }
    header_length = n;
  }
  if (status s = decode_infer_request(req.body(), header_length, handoff_.decoded,
                                      server_.options().limits);
      !s.ok()) {
    reply_error(http_status_for(s.code()), s.message());
    return;
  }
  const model_ref ref = handoff_.model->model();
  if (ref.decoupled()) {
    reply_error(400, fmt::format("model '{}' is decoupled (it may send several responses per "
                                 "request): /infer cannot return them; use POST "
                                 "/v2/models/{}/generate_stream (server-sent events)",
                                 on_strand_.route.model, on_strand_.route.model));
    return;
  }
  const auto outputs = ref.outputs();
  for (const auto& o : handoff_.decoded.outputs) {
    bool known = false;
    for (const auto& c : outputs) {
      known = known || c.name == o.name;
    }
    if (!known) {
      const std::string message = fmt::format("unexpected inference output '{}' for model '{}'",
                                              o.name, handoff_.model->options().name);
      reply_error(400, message);
      return;
    }
  }
  // From a successful submit on, the sink owns handoff_.decoded, handoff_.model and the response
  // strings until it posts the write: this thread must not touch them. (The encoder reads only
  // handoff_.decoded.outputs and handoff_.decoded.binary_data_output, not the request moved out
  // here.)
  if (status s = admit(handoff_.decoded.request, handoff_.model->options().name); !s.ok()) {
    reply_error(http_status_for(s.code()), s.message());
    return;
  }
  make_cancellable(handoff_.decoded.request, ref);
  status s = server_.drain().redirect(
      ref.submit(std::move(handoff_.decoded.request), infer_sink{shared_from_this()}));
  if (!s.ok()) {
    on_strand_.in_flight.reset();
    reply_error(http_status_for(s.code()), s.message());
  }
}

SERVEKIT_DECL status session::admit(request& r, std::string_view model) const {
  if (const routing_headers& headers = server_.options().routing; headers.any()) {
    const auto& req = on_strand_.parser->get();
    const auto find = [&req](const std::string& name) -> std::optional<std::string_view> {
      const auto it = req.find(name);
      if (it == req.end()) {
        return std::nullopt;
      }
      return std::string_view{it->value().data(), it->value().size()};
    };
    if (status s = apply_routing_headers(r, headers, find); !s.ok()) {
      return s;
    }
  }
  return server_.drain().admit(r, model);
}

SERVEKIT_DECL void session::make_cancellable(request& r, const model_ref& m) {
  if (!on_strand_.cancel_source) {
    on_strand_.cancel_source.emplace(); // one allocation per connection, not per request
  }
  r.cancellation = on_strand_.cancel_source->token();
  on_strand_.in_flight = m;
}

/// A client that leaves (its connection closes or fails while its request waits, or its
/// generate_stream breaks off) cancels its request through the model's in-process path, as
/// Triton cancels a request whose gRPC call is cancelled: a queued request is answered
/// `cancelled` (counted as a CANCELED failure) and never executes, a sequence request ends its
/// sequence, an ensemble sends no further steps, and a decoupled model's backend sees
/// request.cancellation.cancelled(). A request already executing finishes; its response is
/// dropped.
SERVEKIT_DECL void session::cancel_in_flight() {
  if (!on_strand_.in_flight || !on_strand_.cancel_source) {
    return;
  }
  const model_ref m = *on_strand_.in_flight;
  on_strand_.in_flight.reset();
  m.cancel(*on_strand_.cancel_source); // may answer the request here: its sink posts the write
}

/// On the model's instance thread (or wherever the model answers): the response into the
/// session's strings. The strand is not touching them: it waits for the write this precedes.
SERVEKIT_DECL void session::encode_infer_response(response&& r) noexcept {
  handoff_.json_header_length.reset();
  try {
    if (r.ok()) {
      const status s = servekit::http::encode_infer_response(
          r, handoff_.model->options().name, handoff_.model->options().version, handoff_.decoded,
          handoff_.body, handoff_.json_header_length);
      // On failure the codec has put the error body in handoff_.body already.
      handoff_.status = s.ok() ? 200 : http_status_for(s.code());
      handoff_.content_type = handoff_.json_header_length ? binary_content_type : json_content_type;
    } else {
      handoff_.status = http_status_for(r.status.code());
      handoff_.body = encode_error(r.status.message());
      handoff_.content_type = json_content_type;
    }
  } catch (const std::exception& e) {
    handoff_.json_header_length.reset();
    handoff_.status = 500;
    handoff_.content_type = json_content_type;
    try {
      handoff_.body = encode_error(std::string("cannot encode the response: ") + e.what());
    } catch (...) {
      // Out of memory (std::bad_alloc): the message needs no more memory than the body's
      // capacity holds; an assign that cannot get it must not escape (noexcept: terminate).
      try {
        handoff_.body.assign(R"({"error":"cannot encode the response"})");
      } catch (...) {
        handoff_.body.clear(); // a bodiless 500
      }
    }
  }
  // handoff_.model is released in write(), on the strand: once handle_infer has returned from
  // submit, so the model outlives the submit call even if it was unloaded meanwhile.
}

} // namespace detail

} // namespace servekit::http
