#pragma once
/// \file
/// to_statistics_json: one model's statistics in the JSON shape of Triton's statistics
/// extension (`GET v2/models/{m}/versions/{v}/stats`), plus servekit's extensions.

#include <servekit/config/detail/json_teardown.hpp>
#include <servekit/core/batch_close_reason.hpp>
#include <servekit/metrics/statistics.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace servekit {

namespace detail {

/// `parent[key] = {"count": n, "ns": n}`, Triton's `$duration_stat`.
inline void put_duration_stat(nlohmann::json& parent, const char* key, const duration_stat& d) {
  auto& o = detail::json_object_member(parent, key);
  o["count"] = d.count;
  o["ns"] = d.ns;
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
///   for rate-limiter resources and how long, and warmup executions; and for a model with the
///   adaptive batcher `adaptive_batching`: `{"target_latency_us", "target_percentile",
///   "wait_for", "max_delay_us", "at_most", "fixed_latency_us", "per_element_latency_us",
///   "profile_samples", "arrival_rate", "recent_within_target", "requests", "within_target",
///   "refused_for_deadline", "controller_value"}` (metrics/adaptive_batching_statistics.hpp).
///
/// Wrap several in `{"model_stats": [...]}` for Triton's `$stats_model_response`.
[[nodiscard]] inline nlohmann::json to_statistics_json(std::string_view model,
                                                       std::string_view version,
                                                       const statistics_snapshot& stats) {
  using detail::json_array_member;
  using detail::json_object_element;
  using detail::json_object_member;
  using detail::put_duration_stat;
  using nlohmann::json;

  // Built member by member: nothing here destroys a container with children, which would
  // allocate (config/detail/json_teardown.hpp), and a failure half-way dismantles `j`.
  json j = json::object();
  const detail::json_teardown_on_throw teardown{j};
  j["name"] = std::string(model);
  j["version"] = std::string(version);
  j["last_inference"] = stats.last_inference_ms;
  j["inference_count"] = stats.inference_count;
  j["execution_count"] = stats.execution_count;
  auto& inference = json_object_member(j, "inference_stats");
  put_duration_stat(inference, "success", stats.success);
  put_duration_stat(inference, "fail", stats.fail);
  put_duration_stat(inference, "queue", stats.queue);
  put_duration_stat(inference, "compute_input", stats.compute_input);
  put_duration_stat(inference, "compute_infer", stats.compute_infer);
  put_duration_stat(inference, "compute_output", stats.compute_output);
  put_duration_stat(inference, "cache_hit", stats.cache_hit);
  put_duration_stat(inference, "cache_miss", stats.cache_miss);
  auto& batch_stats = json_array_member(j, "batch_stats");
  for (const auto& b : stats.batch_stats) {
    auto& e = json_object_element(batch_stats);
    e["batch_size"] = b.batch_size;
    put_duration_stat(e, "compute_input", b.compute_input);
    put_duration_stat(e, "compute_infer", b.compute_infer);
    put_duration_stat(e, "compute_output", b.compute_output);
  }
  auto& response_stats = json_object_member(j, "response_stats");
  for (const auto& r : stats.response_stats) {
    auto& e = response_stats[std::to_string(r.index)] = json::object();
    put_duration_stat(e, "success", r.success);
    put_duration_stat(e, "fail", r.fail);
    put_duration_stat(e, "empty_response", r.empty_response);
  }
  json_array_member(j, "memory_usage");
  auto& close_reasons = json_object_member(j, "batch_close_reasons");
  for (const batch_close_reason r : all_batch_close_reasons) {
    close_reasons[std::string(to_string(r))] = stats.closed_by(r);
  }
  auto& padding = json_object_member(j, "batch_padding");
  padding["padded_executions"] = stats.padded_executions;
  padding["padding_elements"] = stats.padding_elements;
  auto& instance_stats = json_array_member(j, "instance_stats");
  for (const auto& i : stats.instances) {
    auto& e = json_object_element(instance_stats);
    e["name"] = i.name;
    e["execution_count"] = i.execution_count;
    e["inference_count"] = i.inference_count;
    put_duration_stat(e, "compute_infer", i.compute_infer);
  }
  put_duration_stat(j, "rate_limiter_wait", stats.rate_limiter_wait);
  put_duration_stat(j, "warmup", stats.warmup);
  if (const auto& a = stats.adaptive_batching) {
    auto& e = json_object_member(j, "adaptive_batching");
    e["target_latency_us"] = a->target_latency_us;
    e["target_percentile"] = a->target_percentile;
    e["wait_for"] = a->wait_for;
    e["max_delay_us"] = a->max_delay_us;
    e["at_most"] = a->at_most;
    e["fixed_latency_us"] = a->fixed_latency_us;
    e["per_element_latency_us"] = a->per_element_latency_us;
    e["profile_samples"] = a->profile_samples;
    e["arrival_rate"] = a->arrival_rate;
    e["recent_within_target"] = a->recent_within_target;
    e["requests"] = a->requests;
    e["within_target"] = a->within_target;
    e["refused_for_deadline"] = a->refused_for_deadline;
    e["controller_value"] = a->controller_value;
  }
  return j;
}

/// to_statistics_json with the version given as a number (model_options::version), written as
/// a decimal string as Triton does.
[[nodiscard]] inline nlohmann::json to_statistics_json(std::string_view model, std::int64_t version,
                                                       const statistics_snapshot& stats) {
  return to_statistics_json(model, std::to_string(version), stats);
}

} // namespace servekit
