#pragma once
/// \file
/// A session's statistics and metrics endpoints (http/impl/session.hpp): GET
/// /v2/models/{m}[/versions/{v}]/stats, /v2/models/stats (Triton's statistics extension) and
/// /metrics (Prometheus text). On the connection's strand. Compiled once into servekit::server by
/// src/http/session_statistics.cpp, or included by http/server.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/http/endpoints.hpp>
#include <servekit/http/impl/server_state.hpp>
#include <servekit/http/impl/session.hpp>
#include <servekit/http/prometheus.hpp>
#include <servekit/repository/model_repository.hpp>

namespace servekit::http {

namespace detail {

SERVEKIT_DECL void session::handle_model_stats() {
  const auto m = server_.models().find(on_strand_.route.model, on_strand_.route.version);
  if (!m) {
    reply_missing_model();
    return;
  }
  assign_body(handoff_.body, model_stats_json({m}));
  reply(200, json_content_type);
}

SERVEKIT_DECL void session::handle_all_model_stats() {
  assign_body(handoff_.body, model_stats_json(server_.models().ready_models()));
  reply(200, json_content_type);
}

SERVEKIT_DECL void session::handle_metrics() {
  handoff_.body.clear();
  write_metrics(server_.models(), handoff_.body);
  reply(200, prometheus_content_type);
}

} // namespace detail

} // namespace servekit::http
