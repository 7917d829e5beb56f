#pragma once
/// \file
/// A session's health and metadata endpoints (http/impl/session.hpp): GET /v2/health/ready,
/// POST /v2/admin/drain, /v2 (server metadata), /v2/models/{m}[/versions/{v}] (model metadata),
/// .../ready and
/// .../config. (GET /v2/health/live is answered by the routing.) On the connection's strand.
/// Compiled once into servekit::server by src/http/session_metadata.cpp, or included by
/// http/server.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/config/model_config_json.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/http/endpoints.hpp>
#include <servekit/http/impl/server_state.hpp>
#include <servekit/http/impl/session.hpp>
#include <servekit/http/kserve_metadata.hpp>
#include <servekit/http/routes.hpp>
#include <servekit/repository/model_repository.hpp>

#include <nlohmann/json.hpp>

#include <chrono>

namespace servekit::http {

namespace detail {

SERVEKIT_DECL void session::handle_health_ready() {
  reply_empty(server_ready(server_.models(), server_.options().strict_readiness, server_.leaving())
                  ? 200
                  : 400);
}

/// POST /v2/admin/drain: starts draining (idempotent) and says how: `{"draining": true,
/// "reason": ..., "grace_secs": N}`. The server stops N seconds later; this connection is
/// answered first.
SERVEKIT_DECL void session::handle_admin_drain() {
  server_.begin_drain("POST /v2/admin/drain");
  nlohmann::json body = nlohmann::json::object();
  body["draining"] = true;
  body["reason"] = server_.drain().reason();
  body["grace_secs"] = std::chrono::duration<double>(server_.options().drain_grace).count();
  assign_body(handoff_.body, dump_json(body));
  reply(200, json_content_type);
}

SERVEKIT_DECL void session::handle_server_metadata() {
  assign_body(handoff_.body, server_metadata_json());
  reply(200, json_content_type);
}

SERVEKIT_DECL void session::handle_model_ready() {
  if (server_.models().find(on_strand_.route.model, on_strand_.route.version)) {
    reply_empty(200);
  } else {
    reply_missing_model(/*ready_endpoint=*/true);
  }
}

/// GET /v2/models/{m}[/versions/{v}] (metadata) and .../config (the loaded config as JSON).
SERVEKIT_DECL void session::handle_model_metadata() {
  auto& models = server_.models();
  const auto m = models.find(on_strand_.route.model, on_strand_.route.version);
  if (!m) {
    reply_missing_model();
    return;
  }
  if (on_strand_.route.kind == endpoint::model_metadata) {
    assign_body(handoff_.body,
                model_metadata_json(m->options(), models.versions_of(on_strand_.route.model)));
  } else {
    assign_body(handoff_.body, save_model_config(m->options()));
  }
  reply(200, json_content_type);
}

} // namespace detail

} // namespace servekit::http
