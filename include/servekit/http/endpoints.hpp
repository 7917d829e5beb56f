#pragma once
/// \file
/// The bodies of the server's non-inference endpoints, as functions of the model repository:
/// the repository index, Triton's statistics extension, Prometheus metrics and readiness. The
/// server (server.hpp) calls them; they do no I/O, so a user's own front end can reuse them.

#include <servekit/config/detail/json_teardown.hpp>
#include <servekit/core/status.hpp>
#include <servekit/http/prometheus.hpp>
#include <servekit/http/statistics_json.hpp>
#include <servekit/repository/model_repository.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servekit::http {

/// Serialises `j` compactly. Invalid UTF-8 (a model folder name, say) is replaced rather than
/// thrown about: a response must always be writable.
[[nodiscard]] inline std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// Triton's model repository index (`POST /v2/repository/index`): an array of
/// `{"name", "version", "state", "reason"}`, version as a string ("" when unknown), sorted by
/// name; `ready_only` keeps only READY models (the request body `{"ready": true}`).
[[nodiscard]] inline nlohmann::json
repository_index_json(const std::vector<model_index_entry>& index, bool ready_only = false) {
  nlohmann::json out = nlohmann::json::array();
  const servekit::detail::json_teardown_on_throw teardown{out}; // see json_teardown.hpp
  for (const auto& e : index) {
    if (ready_only && e.state != model_ready_state::ready) {
      continue;
    }
    auto& entry = servekit::detail::json_object_element(out);
    entry["name"] = e.name;
    entry["version"] = e.version > 0 ? std::to_string(e.version) : "";
    entry["state"] = std::string(to_string(e.state));
    entry["reason"] = e.reason;
  }
  return out;
}

/// Triton's `$stats_model_response`: `{"model_stats": [...]}`, one entry per model given.
[[nodiscard]] inline nlohmann::json
model_stats_json(const std::vector<std::shared_ptr<const loaded_model>>& models) {
  nlohmann::json out = nlohmann::json::object();
  const servekit::detail::json_teardown_on_throw teardown{out}; // see json_teardown.hpp
  auto& stats = servekit::detail::json_array_member(out, "model_stats");
  for (const auto& m : models) {
    const auto& c = m->options();
    nlohmann::json entry =
        to_statistics_json(c.name, std::to_string(c.version), m->model().statistics());
    const servekit::detail::json_teardown_on_throw entry_teardown{entry};
    stats.push_back(std::move(entry));
  }
  return out;
}

/// The Prometheus exposition of every READY model (`GET /metrics`), appended to `out`.
inline void write_metrics(const model_repository& models, std::string& out) {
  prometheus_writer writer;
  for (const auto& m : models.ready_models()) {
    writer.add(m->options().name, m->options().version, m->model().statistics());
  }
  writer.write(out);
}

/// Why model `name`, version `version` (-1: the one its version policy serves), which
/// model_repository::find did not return, cannot be served, with the front ends' messages:
/// not_found for an unknown model or version, unavailable for a model that is not ready (its state
/// and reason) or was published between the two looks. nullopt for a model the repository knows
/// but that is not ready, when `not_ready_is_error` is false (the ready endpoints answer that
/// without a message).
[[nodiscard]] inline std::optional<status> missing_model_status(const model_repository& models,
                                                                std::string_view name,
                                                                std::int64_t version,
                                                                bool not_ready_is_error = true) {
  const auto entry = models.status_of(name);
  if (!entry) {
    return not_found(fmt::format("Request for unknown model: '{}' is not found", name));
  }
  if (entry->state == model_ready_state::ready && version != -1) {
    return not_found(
        fmt::format("Request for unknown model: '{}' version {} is not found", name, version));
  }
  if (entry->state == model_ready_state::ready) {
    // find() and status_of() read two snapshots: the model was published in between.
    return unavailable(fmt::format(
        "Request for model '{}' arrived while it was being loaded; send it again", name));
  }
  if (!not_ready_is_error) {
    return std::nullopt;
  }
  std::string message = fmt::format("Request for model '{}' failed: the model is not ready ({})",
                                    name, to_string(entry->state));
  if (!entry->reason.empty()) {
    message += ": ";
    message += entry->reason;
  }
  return unavailable(std::move(message));
}

/// `GET /v2/health/ready`: with strict readiness, every model the repository knows is READY
/// (Triton's --strict-readiness=true); otherwise the server being up is enough. A stopping
/// server is never ready.
[[nodiscard]] inline bool server_ready(const model_repository& models, bool strict, bool stopping) {
  if (stopping) {
    return false;
  }
  return !strict || models.all_ready();
}

} // namespace servekit::http
