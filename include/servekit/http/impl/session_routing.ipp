#pragma once
/// \file
/// A session's routing (http/impl/session.hpp): a request read whole is parsed into a route,
/// checked (400 bad target, 404 no endpoint, 403 restricted API without its header, 405 wrong
/// method) and dispatched to its endpoint's handler; and the answer for a request naming a model
/// the repository did not return. On the connection's strand. Compiled once into servekit::server
/// by src/http/session_routing.cpp, or included by http/server.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/http/endpoints.hpp>
#include <servekit/http/impl/server_state.hpp>
#include <servekit/http/impl/session.hpp>
#include <servekit/http/kserve_response.hpp>
#include <servekit/http/model_control.hpp>
#include <servekit/http/routes.hpp>
#include <servekit/repository/model_repository.hpp>

#include <boost/beast/http/verb.hpp>

#include <fmt/format.h>

#include <exception>
#include <new>
#include <string>

namespace servekit::http {

namespace detail {

SERVEKIT_DECL void session::handle() {
  on_strand_.phase = phase::handling;
  auto& req = on_strand_.parser->get();
  on_strand_.keep_alive = req.keep_alive();
  try {
    parse_route(to_std(req.target()), on_strand_.route);
    if (!on_strand_.route.error.empty()) {
      reply_error(400, on_strand_.route.error);
      return;
    }
    if (on_strand_.route.kind == endpoint::unknown) {
      reply_error(404, fmt::format("no endpoint at {} {}", to_std(req.method_string()),
                                   to_std(req.target())));
      return;
    }
    // Triton checks a restricted API's header before anything else about the request.
    if (const auto* rule = server_.options().model_control.restricted.find(on_strand_.route.kind)) {
      const auto it = req.find(rule->header); // field names compare case-insensitively
      if (it == req.end() || to_std(it->value()) != rule->value) {
        reply_error(403, restricted_api_message(rule->header));
        return;
      }
    }
    const bhttp::verb wanted =
        method_for(on_strand_.route.kind) == method::get ? bhttp::verb::get : bhttp::verb::post;
    if (req.method() != wanted) {
      reply_error(405, fmt::format("{} takes {}, not {}", to_std(req.target()),
                                   to_string(method_for(on_strand_.route.kind)),
                                   to_std(req.method_string())));
      return;
    }
    dispatch_route();
  } catch (const std::exception& e) {
    try {
      reply_error(500, std::string("internal error: ") + e.what());
    } catch (const std::bad_alloc&) {
      close(); // no memory even for the error: the client sees the connection close
    }
  }
}

SERVEKIT_DECL void session::dispatch_route() {
  switch (on_strand_.route.kind) {
  case endpoint::model_infer:
    handle_infer();
    return;
  case endpoint::model_generate:
  case endpoint::model_generate_stream:
    handle_generate(on_strand_.route.kind == endpoint::model_generate_stream);
    return;
  case endpoint::health_live:
    reply_empty(200);
    return;
  case endpoint::health_ready:
    handle_health_ready();
    return;
  case endpoint::server_metadata:
    handle_server_metadata();
    return;
  case endpoint::model_ready:
    handle_model_ready();
    return;
  case endpoint::model_metadata:
  case endpoint::model_config:
    handle_model_metadata();
    return;
  case endpoint::model_stats:
    handle_model_stats();
    return;
  case endpoint::all_model_stats:
    handle_all_model_stats();
    return;
  case endpoint::repository_index:
    handle_repository_index();
    return;
  case endpoint::repository_load:
  case endpoint::repository_unload:
    handle_repository_load_unload();
    return;
  case endpoint::metrics:
    handle_metrics();
    return;
  case endpoint::openai_completions:
    handle_openai(openai_api::completions);
    return;
  case endpoint::openai_chat_completions:
    handle_openai(openai_api::chat_completions);
    return;
  case endpoint::openai_models:
    handle_openai_models();
    return;
  case endpoint::admin_drain:
    handle_admin_drain();
    return;
  case endpoint::unknown:
    break;
  }
  reply_error(404, "no such endpoint");
}

/// Answers a request for a model that find() did not return: 404 if the repository does not
/// know it (or does not serve that version); if it knows it and it is not READY, 503 with the
/// reason, or, for GET .../ready (`ready_endpoint`), Triton's bodiless 400.
SERVEKIT_DECL void session::reply_missing_model(bool ready_endpoint) {
  const auto s = missing_model_status(server_.models(), on_strand_.route.model,
                                      on_strand_.route.version, !ready_endpoint);
  if (!s) {
    reply_empty(400);
    return;
  }
  reply_error(http_status_for(s->code()), s->message());
}

} // namespace detail

} // namespace servekit::http
