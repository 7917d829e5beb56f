#pragma once
/// \file
/// to_statistics_json: one model's statistics in the JSON shape of Triton's statistics
/// extension (`GET v2/models/{m}/versions/{v}/stats`), plus servekit's extensions.

#include <servekit/core/batch_close_reason.hpp>
#include <servekit/metrics/statistics.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace servekit {

namespace detail {

/// `{"count": n, "ns": n}`, Triton's `$duration_stat`.
[[nodiscard]] inline nlohmann::json duration_stat_json(const duration_stat& d) {
  return nlohmann::json{{"count", d.count}, {"ns", d.ns}};
}

} // namespace detail

/// One `$model_stat` object of Triton's statistics extension for model `model`, version
/// `version`. Counts and durations are JSON numbers (unsigned 64-bit), as Triton's HTTP endpoint
/// writes them. Keys:
/// - `name`, `version` (strings), `last_inference` (ms since the Unix epoch, 0 if none),
///   `inference_count`, `execution_count`;
/// - `inference_stats`: `success`, `fail`, `queue`, `compute_input`, `compute_infer`,
///   `compute_output`, `cache_hit`, `cache_miss`, each `{"count","ns"}` (success and queue
///   include cache hits; compute_* and the inference and execution counts exclude them);
/// - `batch_stats`: `[{"batch_size", "compute_input", "compute_infer", "compute_output"}]`, one
///   per batch size that executed, ascending;
/// - `response_stats` (decoupled models): `{"<index>": {"success", "fail", "empty_response"}}`,
///   one entry per response index that occurred, each `{"count","ns"}` (ns: from the start of
///   the execution to the response); `memory_usage`: `[]` (not recorded);
/// - servekit extensions: `batch_close_reasons`: `{"max_batch_size": n, ...}` with every
///   batch_close_reason, `batch_padding`: `{"padded_executions": n, "padding_elements": m}`
///   (rows backends ran beyond the requests, see batch::record_padding), and `instance_stats`:
///   `[{"name", "execution_count", "inference_count", "compute_infer"}]`, one per model
///   instance, `rate_limiter_wait` and `warmup`, each `{"count","ns"}`: executions that waited
///   for rate-limiter resources and how long, and warmup executions.
///
/// Wrap several in `{"model_stats": [...]}` for Triton's `$stats_model_response`.
[[nodiscard]] inline nlohmann::json to_statistics_json(std::string_view model,
                                                       std::string_view version,
                                                       const statistics_snapshot& stats) {
  using detail::duration_stat_json;
  using nlohmann::json;

  json batch_stats = json::array();
  for (const auto& b : stats.batch_stats) {
    batch_stats.push_back(json{{"batch_size", b.batch_size},
                               {"compute_input", duration_stat_json(b.compute_input)},
                               {"compute_infer", duration_stat_json(b.compute_infer)},
                               {"compute_output", duration_stat_json(b.compute_output)}});
  }

  json close_reasons = json::object();
  for (const batch_close_reason r : all_batch_close_reasons) {
    close_reasons[std::string(to_string(r))] = stats.closed_by(r);
  }

  json instance_stats = json::array();
  for (const auto& i : stats.instances) {
    instance_stats.push_back(json{{"name", i.name},
                                  {"execution_count", i.execution_count},
                                  {"inference_count", i.inference_count},
                                  {"compute_infer", duration_stat_json(i.compute_infer)}});
  }

  json j = json::object();
  j["name"] = std::string(model);
  j["version"] = std::string(version);
  j["last_inference"] = stats.last_inference_ms;
  j["inference_count"] = stats.inference_count;
  j["execution_count"] = stats.execution_count;
  j["inference_stats"] = json{{"success", duration_stat_json(stats.success)},
                              {"fail", duration_stat_json(stats.fail)},
                              {"queue", duration_stat_json(stats.queue)},
                              {"compute_input", duration_stat_json(stats.compute_input)},
                              {"compute_infer", duration_stat_json(stats.compute_infer)},
                              {"compute_output", duration_stat_json(stats.compute_output)},
                              {"cache_hit", duration_stat_json(stats.cache_hit)},
                              {"cache_miss", duration_stat_json(stats.cache_miss)}};
  j["batch_stats"] = std::move(batch_stats);
  json response_stats = json::object();
  for (const auto& r : stats.response_stats) {
    response_stats[std::to_string(r.index)] =
        json{{"success", duration_stat_json(r.success)},
             {"fail", duration_stat_json(r.fail)},
             {"empty_response", duration_stat_json(r.empty_response)}};
  }
  j["response_stats"] = std::move(response_stats);
  j["memory_usage"] = json::array();
  j["batch_close_reasons"] = std::move(close_reasons);
  j["batch_padding"] = json{{"padded_executions", stats.padded_executions},
                            {"padding_elements", stats.padding_elements}};
  j["instance_stats"] = std::move(instance_stats);
  j["rate_limiter_wait"] = duration_stat_json(stats.rate_limiter_wait);
  j["warmup"] = duration_stat_json(stats.warmup);
  return j;
}

/// to_statistics_json with the version given as a number (model_options::version), written as
/// a decimal string as Triton does.
[[nodiscard]] inline nlohmann::json to_statistics_json(std::string_view model, std::int64_t version,
                                                       const statistics_snapshot& stats) {
  return to_statistics_json(model, std::to_string(version), stats);
}

} // namespace servekit
