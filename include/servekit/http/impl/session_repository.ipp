#pragma once
/// \file
/// A session's repository endpoints (http/impl/session.hpp), Triton's repository extension:
/// POST /v2/repository/index, /v2/repository/models/{m}/load and .../unload. The requests are
/// checked on the connection's strand; load and unload run on the server's admin thread and are
/// answered on the strand. Load and unload are refused outside explicit model control mode
/// (http/model_control.hpp). Compiled once into servekit::server by
/// src/http/session_repository.cpp, or included by http/server.hpp with SERVEKIT_HEADER_ONLY.

#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/detail/json_body.hpp>
#include <servekit/http/endpoints.hpp>
#include <servekit/http/impl/server_state.hpp>
#include <servekit/http/impl/session.hpp>
#include <servekit/http/kserve_response.hpp>
#include <servekit/http/model_control.hpp>
#include <servekit/http/routes.hpp>
#include <servekit/repository/model_repository.hpp>

#include <utility> // before Asio: Boost 1.74's Asio needs it under GCC 12 in C++20

#include <boost/asio/post.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

namespace servekit::http {

namespace detail {

/// The largest repository request body read: the index, load and unload bodies are a few
/// parameters; a larger one is refused before it is parsed.
inline constexpr std::size_t max_repository_body_bytes = std::size_t{64} << 10;

/// The body as a JSON object (an empty body is an empty object); nullopt, with `error` set, if it
/// is not one.
inline std::optional<nlohmann::json> repository_body(const std::string& body, std::string_view what,
                                                     std::string& error) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) {
    return nlohmann::json::object();
  }
  nlohmann::json j;
  const std::string named = "the repository " + std::string{what} + " request";
  if (const status s = parse_json_body(body, j, named); !s.ok()) {
    error = s.message();
    return std::nullopt;
  }
  if (!j.is_object()) {
    error = named + " body must be a JSON object";
    return std::nullopt;
  }
  return j;
}

SERVEKIT_DECL void session::handle_repository_index() {
  const auto& body = on_strand_.parser->get().body();
  if (body.size() > max_repository_body_bytes) {
    reply_error(413, "the repository index request body is larger than 64 KiB");
    return;
  }
  try {
    std::string error;
    const auto j = repository_body(body, "index", error);
    if (!j) {
      reply_error(400, error);
      return;
    }
    bool ready_only = false;
    if (const auto it = j->find("ready"); it != j->end()) {
      if (!it->is_boolean()) {
        reply_error(400, "the repository index request's \"ready\" must be a boolean");
        return;
      }
      ready_only = it->get<bool>();
    }
    assign_body(handoff_.body, repository_index_json(server_.models().index(), ready_only));
  } catch (const std::exception& e) {
    reply_error(400, std::string{"bad repository index request: "} + e.what());
    return;
  }
  reply(200, json_content_type);
}

SERVEKIT_DECL void session::handle_repository_load_unload() {
  const bool load = on_strand_.route.kind == endpoint::repository_load;
  const auto& body = on_strand_.parser->get().body();
  if (body.size() > max_repository_body_bytes) {
    reply_error(413, fmt::format("the repository {} request body is larger than 64 KiB",
                                 load ? "load" : "unload"));
    return;
  }
  bool unload_dependents = false;
  try {
    std::string error;
    const auto j = repository_body(body, load ? "load" : "unload", error);
    if (!j) {
      reply_error(400, error);
      return;
    }
    if (const auto it = j->find("parameters"); it != j->end()) {
      if (!it->is_object()) {
        reply_error(400, "the repository request's \"parameters\" must be a JSON object");
        return;
      }
      for (const auto& [key, value] : it->items()) {
        if (!load && key == "unload_dependents") {
          if (!value.is_boolean()) {
            // Triton's words (http_server.cc, HandleRepositoryControl, with TritonJson's).
            reply_error(400, "Unable to parse 'unload_dependents': attempt to access JSON "
                             "non-boolean as boolean");
            return;
          }
          unload_dependents = value.get<bool>();
          continue;
        }
        // Triton's load takes "config" (a config override) and "file:..." (model files);
        // this server loads what the repository folder holds, so it refuses them rather than
        // ignore them.
        reply_error(400, fmt::format("repository {} parameter '{}' is not supported by this "
                                     "server{}",
                                     load ? "load" : "unload", key,
                                     load ? "; edit config.json in the repository and load again"
                                          : " (it takes unload_dependents)"));
        return;
      }
    }
  } catch (const std::exception& e) {
    reply_error(400, std::string{"bad repository request: "} + e.what());
    return;
  }
  if (!server_.options().model_control.load_unload_allowed()) {
    reply_error(503, model_control_disabled_message);
    return;
  }
  handle_repository_change(load, unload_dependents);
}

SERVEKIT_DECL void session::handle_repository_change(bool load, bool unload_dependents) {
  // Keep the session (and so run()) alive while the admin thread works; answer on the strand.
  asio::post(server_.admin(),
             [self = shared_from_this(), load, unload_dependents, name = on_strand_.route.model] {
               status s;
               try {
                 s = load ? self->server_.models().load(name)
                          : self->server_.models().unload(name, unload_dependents);
               } catch (const std::exception& e) {
                 s = internal_error(fmt::format("failed to {} '{}': {}", load ? "load" : "unload",
                                                name, e.what()));
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
