#pragma once
/// \file
/// A session's repository endpoints (http/impl/session.hpp), Triton's repository extension:
/// POST /v2/repository/index, /v2/repository/models/{m}/load and .../unload. The requests are
/// checked on the connection's strand; load and unload run on the server's admin thread and are
/// answered on the strand. Compiled once into servekit::server by
/// src/http/session_repository.cpp, or included by http/server.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/endpoints.hpp>
#include <servekit/http/impl/server_state.hpp>
#include <servekit/http/impl/session.hpp>
#include <servekit/http/kserve_response.hpp>
#include <servekit/http/routes.hpp>
#include <servekit/repository/model_repository.hpp>

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/post.hpp>

#include <nlohmann/json.hpp>

#include <exception>
#include <string>

namespace servekit::http {

namespace detail {

SERVEKIT_DECL void session::handle_repository_index() {
  bool ready_only = false;
  const auto& body = on_strand_.parser->get().body();
  if (body.find_first_not_of(" \t\r\n") != std::string::npos) {
    const auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      reply_error(400, "the repository index request body must be a JSON object");
      return;
    }
    if (const auto it = j.find("ready"); it != j.end()) {
      if (!it->is_boolean()) {
        reply_error(400, "the repository index request's \"ready\" must be a boolean");
        return;
      }
      ready_only = it->get<bool>();
    }
  }
  handoff_.body = dump_json(repository_index_json(server_.models().index(), ready_only));
  reply(200, json_content_type);
}

SERVEKIT_DECL void session::handle_repository_load_unload() {
  // Triton's load/unload bodies carry "parameters" (a config override, model files,
  // unload_dependents). We support none of them: refuse rather than ignore them silently.
  const auto& body = on_strand_.parser->get().body();
  if (body.find_first_not_of(" \t\r\n") != std::string::npos) {
    const auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      reply_error(400, "the repository load/unload request body must be a JSON object");
      return;
    }
    if (const auto it = j.find("parameters"); it != j.end() && !it->empty()) {
      reply_error(400, "repository load/unload parameters (config override, model files, "
                       "unload_dependents) are not supported by this server; "
                       "edit config.json in the repository and load again");
      return;
    }
  }
  handle_repository_change(on_strand_.route.kind == endpoint::repository_load);
}

SERVEKIT_DECL void session::handle_repository_change(bool load) {
  // Keep the session (and so run()) alive while the admin thread works; answer on the strand.
  asio::post(server_.admin(), [self = shared_from_this(), load, name = on_strand_.route.model] {
    status s;
    try {
      s = load ? self->server_.models().load(name) : self->server_.models().unload(name);
    } catch (const std::exception& e) {
      s = internal_error(std::string(load ? "load" : "unload") + " failed: " + e.what());
    }
    asio::post(self->executor(), [self, s = std::move(s)] {
      if (s.ok()) {
        self->reply_empty(200);
      } else {
        self->reply_error(http_status_for(s.code()), s.message());
      }
    });
  });
}

} // namespace detail

} // namespace servekit::http
