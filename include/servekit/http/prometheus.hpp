#pragma once
/// \file
/// prometheus_writer: model statistics as Prometheus text exposition format 0.0.4, with Triton's
/// metric names (`nv_inference_*`) plus servekit's own families (`servekit_*`).
///
/// docs/metrics.md lists every family, what it counts, and a sample of the output.

#include <servekit/core/batch_close_reason.hpp>
#include <servekit/metrics/statistics.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit {

/// The HTTP `Content-Type` of what prometheus_writer produces.
inline constexpr std::string_view prometheus_content_type =
    "text/plain; version=0.0.4; charset=utf-8";

namespace detail {

/// Appends `value` escaped as a Prometheus label value: backslash, double quote and line feed
/// become `\\`, `\"` and `\n`; every other byte is copied (the format is UTF-8).
inline void append_prometheus_label_value(std::string& out, std::string_view value) {
  for (const char c : value) {
    switch (c) {
    case '\\':
      out += "\\\\";
      break;
    case '"':
      out += "\\\"";
      break;
    case '\n':
      out += "\\n";
      break;
    default:
      out += c;
      break;
    }
  }
}

/// Appends `key="value"` with the value escaped.
inline void append_prometheus_label(std::string& out, std::string_view key,
                                    std::string_view value) {
  out += key;
  out += "=\"";
  append_prometheus_label_value(out, value);
  out += '"';
}

/// Nanoseconds to whole microseconds, truncating, as Triton reports its `_us` counters.
[[nodiscard]] constexpr std::uint64_t ns_to_us(std::uint64_t ns) noexcept { return ns / 1000; }

/// Appends the `# HELP` and `# TYPE` lines of one family.
inline void append_prometheus_family_header(std::string& out, std::string_view name,
                                            std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

/// Appends one sample: `name{<labels>[,<key>="<value>"]} <number>`. `labels` is already
/// escaped; `extra_value` is escaped here. An empty `extra_key` adds no label.
inline void append_prometheus_sample(std::string& out, std::string_view name,
                                     std::string_view labels, std::string_view extra_key,
                                     std::string_view extra_value, std::uint64_t number) {
  out += name;
  out += '{';
  out += labels;
  if (!extra_key.empty()) {
    out += ',';
    append_prometheus_label(out, extra_key, extra_value);
  }
  fmt::format_to(std::back_inserter(out), "}} {}\n", number);
}

} // namespace detail

/// Collects statistics snapshots of several models and writes them as one Prometheus text
/// exposition (format 0.0.4): each metric family once, `# HELP` and `# TYPE` first, then one
/// sample per model (or per model and label value), models in the order they were added.
///
/// Families, in this order (`_us` values are whole microseconds, truncated):
/// - counter `nv_inference_request_success`: successful requests.
/// - counter `nv_inference_request_failure{reason}`: failed requests, one sample per reason
///   `REJECTED`, `CANCELED`, `BACKEND`, `OTHER`.
/// - counter `nv_inference_count`: inferences (a request of batch size n counts n).
/// - counter `nv_inference_exec_count`: model executions (batches).
/// - counter `nv_inference_request_duration_us`: end-to-end time of successful requests, as
///   Triton counts it (failed requests add to `fail.ns` in the statistics, not here).
/// - counter `nv_inference_queue_duration_us`, `nv_inference_compute_input_duration_us`,
///   `nv_inference_compute_infer_duration_us`, `nv_inference_compute_output_duration_us`.
/// - gauge `nv_inference_pending_request_count`: accepted and not yet started.
/// - counters `nv_cache_num_hits_per_model`, `nv_cache_num_misses_per_model`,
///   `nv_cache_hit_duration_per_model` and `nv_cache_miss_duration_per_model` (microseconds):
///   the response cache, as Triton names them.
/// - counter `servekit_response_count{outcome}` (servekit extension): responses of decoupled
///   requests by outcome (success, fail, empty).
/// - counters `servekit_rate_limiter_wait_count` and `servekit_rate_limiter_wait_duration_us`
///   (servekit extensions): executions that waited for rate-limiter resources, and how long.
/// - counter `servekit_batch_close_total{reason}` (servekit extension): batches by
///   batch_close_reason, one sample per reason.
/// - counter `servekit_batch_padding_elements_total` and `servekit_padded_exec_count` (servekit
///   extensions): rows backends ran as padding (batch::record_padding, e.g. to replay a CUDA
///   graph of a larger size) and the executions that had any.
/// - counter `servekit_instance_exec_count{instance}` (servekit extension): executions per
///   model instance; left out when no added model has instances.
/// - models with the adaptive batcher only (servekit extensions): gauges
///   `servekit_adaptive_wait_for`, `servekit_adaptive_max_delay_us`,
///   `servekit_adaptive_fixed_latency_us`, `servekit_adaptive_per_element_latency_us`,
///   `servekit_adaptive_arrival_rate`, `servekit_adaptive_recent_within_target` (0..1); counters
///   `servekit_adaptive_requests_total`, `servekit_adaptive_within_target_total` and
///   `servekit_adaptive_refused_total` (deadline-aware admission).
/// - generative models only (iteration batcher), under vLLM's names with a `model_name` label:
///   gauges `vllm:num_requests_running`, `vllm:num_requests_waiting`,
///   `vllm:kv_cache_usage_perc` (0..1) and `vllm:cache_config_info{block_size,num_gpu_blocks}`;
///   counters `vllm:prompt_tokens_total`, `vllm:generation_tokens_total`,
///   `vllm:num_preemptions_total`, `vllm:prefix_cache_queries_total`,
///   `vllm:prefix_cache_hits_total`; histograms `vllm:time_to_first_token_seconds` and
///   `vllm:time_per_output_token_seconds` with vLLM's buckets.
///
/// Every sample carries `model` and `version` first. Label values are escaped. A writer with
/// no model writes nothing.
class prometheus_writer {
public:
  /// Adds one model version. The snapshot is copied; the writer does not refer to `stats`.
  void add(std::string_view model, std::string_view version, const statistics_snapshot& stats) {
    std::string labels;
    detail::append_prometheus_label(labels, "model", model);
    labels += ',';
    detail::append_prometheus_label(labels, "version", version);
    // vLLM's families carry model_name, which LLM gateways select by.
    std::string vllm_labels = labels;
    vllm_labels += ',';
    detail::append_prometheus_label(vllm_labels, "model_name", model);
    entries_.push_back({std::move(labels), std::move(vllm_labels), stats});
  }

  /// Adds one model version given as a number (model_options::version), written in decimal.
  void add(std::string_view model, std::int64_t version, const statistics_snapshot& stats) {
    const fmt::format_int text(version);
    add(model, std::string_view(text.data(), text.size()), stats);
  }

  /// Number of model versions added.
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

  /// True if no model was added.
  [[nodiscard]] bool empty() const noexcept { return entries_.empty(); }

  /// Forgets every added model, so the writer can be reused for the next scrape.
  void clear() noexcept { entries_.clear(); }

  /// Appends the exposition to `out`.
  void write(std::string& out) const {
    if (entries_.empty()) {
      return;
    }
    counter(out, "nv_inference_request_success",
            "Number of successful inference requests; a request counts once whatever its "
            "batch size",
            [](const statistics_snapshot& s) { return s.success.count; });
    failure_counter(out);
    counter(out, "nv_inference_count",
            "Number of inferences performed; a request of batch size n counts n",
            [](const statistics_snapshot& s) { return s.inference_count; });
    counter(out, "nv_inference_exec_count", "Number of model executions (batches) performed",
            [](const statistics_snapshot& s) { return s.execution_count; });
    counter(out, "nv_inference_request_duration_us",
            "Cumulative end-to-end duration of successful inference requests, in microseconds",
            [](const statistics_snapshot& s) { return detail::ns_to_us(s.success.ns); });
    counter(out, "nv_inference_queue_duration_us",
            "Cumulative time successful requests waited in the scheduling queue, in "
            "microseconds",
            [](const statistics_snapshot& s) { return detail::ns_to_us(s.queue.ns); });
    counter(out, "nv_inference_compute_input_duration_us",
            "Cumulative input preparation time of the executions, charged to each successful "
            "request of a batch, in microseconds",
            [](const statistics_snapshot& s) { return detail::ns_to_us(s.compute_input.ns); });
    counter(out, "nv_inference_compute_infer_duration_us",
            "Cumulative model execution time, charged to each successful request of a batch, "
            "in microseconds",
            [](const statistics_snapshot& s) { return detail::ns_to_us(s.compute_infer.ns); });
    counter(out, "nv_inference_compute_output_duration_us",
            "Cumulative output extraction time of the executions, charged to each successful "
            "request of a batch, in microseconds",
            [](const statistics_snapshot& s) { return detail::ns_to_us(s.compute_output.ns); });
    simple_family(out, "nv_inference_pending_request_count", "gauge",
                  "Number of requests accepted and not yet started by a model instance",
                  [](const statistics_snapshot& s) { return s.pending_request_count; });
    counter(out, "nv_cache_num_hits_per_model", "Number of cache hits per model",
            [](const statistics_snapshot& s) { return s.cache_hit.count; });
    counter(out, "nv_cache_num_misses_per_model", "Number of cache misses per model",
            [](const statistics_snapshot& s) { return s.cache_miss.count; });
    counter(out, "nv_cache_hit_duration_per_model",
            "Total cache hit duration per model, in microseconds",
            [](const statistics_snapshot& s) { return detail::ns_to_us(s.cache_hit.ns); });
    counter(out, "nv_cache_miss_duration_per_model",
            "Total cache miss (lookup and insertion) duration per model, in microseconds",
            [](const statistics_snapshot& s) { return detail::ns_to_us(s.cache_miss.ns); });
    response_counter(out);
    counter(out, "servekit_rate_limiter_wait_count",
            "Number of executions that waited for rate-limiter resources (servekit extension)",
            [](const statistics_snapshot& s) { return s.rate_limiter_wait.count; });
    counter(out, "servekit_rate_limiter_wait_duration_us",
            "Cumulative time executions waited for rate-limiter resources, in microseconds "
            "(servekit extension)",
            [](const statistics_snapshot& s) { return detail::ns_to_us(s.rate_limiter_wait.ns); });
    close_reason_counter(out);
    counter(out, "servekit_batch_padding_elements_total",
            "Number of padding rows backends executed beyond the requests' batch sizes "
            "(servekit extension)",
            [](const statistics_snapshot& s) { return s.padding_elements; });
    counter(out, "servekit_padded_exec_count",
            "Number of model executions that ran padding rows (servekit extension)",
            [](const statistics_snapshot& s) { return s.padded_executions; });
    instance_counter(out);
    adaptive_families(out);
    generation_families(out);
  }

  /// The exposition as a new string.
  [[nodiscard]] std::string str() const {
    std::string out;
    write(out);
    return out;
  }

private:
  struct entry {
    std::string labels;      ///< `model="...",version="..."`, escaped
    std::string vllm_labels; ///< the same and `model_name="..."`
    statistics_snapshot stats;
  };

  template <class Value>
  void simple_family(std::string& out, std::string_view name, std::string_view type,
                     std::string_view help, Value value) const {
    detail::append_prometheus_family_header(out, name, type, help);
    for (const auto& e : entries_) {
      detail::append_prometheus_sample(out, name, e.labels, {}, {}, value(e.stats));
    }
  }

  template <class Value>
  void counter(std::string& out, std::string_view name, std::string_view help, Value value) const {
    simple_family(out, name, "counter", help, std::move(value));
  }

  void failure_counter(std::string& out) const {
    constexpr std::string_view name = "nv_inference_request_failure";
    detail::append_prometheus_family_header(
        out, name, "counter",
        "Number of failed inference requests by reason; a request counts once whatever its "
        "batch size");
    constexpr failure_reason reasons[] = {failure_reason::rejected, failure_reason::canceled,
                                          failure_reason::backend, failure_reason::other};
    for (const auto& e : entries_) {
      for (const failure_reason r : reasons) {
        detail::append_prometheus_sample(out, name, e.labels, "reason", to_string(r),
                                         e.stats.failed_by(r));
      }
    }
  }

  void response_counter(std::string& out) const {
    constexpr std::string_view name = "servekit_response_count";
    detail::append_prometheus_family_header(
        out, name, "counter",
        "Number of responses of decoupled requests by outcome (servekit extension)");
    for (const auto& e : entries_) {
      std::uint64_t success = 0;
      std::uint64_t fail = 0;
      std::uint64_t empty = 0;
      for (const auto& r : e.stats.response_stats) {
        success += r.success.count;
        fail += r.fail.count;
        empty += r.empty_response.count;
      }
      detail::append_prometheus_sample(out, name, e.labels, "outcome", "success", success);
      detail::append_prometheus_sample(out, name, e.labels, "outcome", "fail", fail);
      detail::append_prometheus_sample(out, name, e.labels, "outcome", "empty", empty);
    }
  }

  void close_reason_counter(std::string& out) const {
    constexpr std::string_view name = "servekit_batch_close_total";
    detail::append_prometheus_family_header(
        out, name, "counter",
        "Number of batches closed, by the reason the batch stopped growing (servekit "
        "extension)");
    for (const auto& e : entries_) {
      for (const batch_close_reason r : all_batch_close_reasons) {
        detail::append_prometheus_sample(out, name, e.labels, "reason", to_string(r),
                                         e.stats.closed_by(r));
      }
    }
  }

  void instance_counter(std::string& out) const {
    constexpr std::string_view name = "servekit_instance_exec_count";
    bool any = false;
    for (const auto& e : entries_) {
      any = any || !e.stats.instances.empty();
    }
    if (!any) {
      return;
    }
    detail::append_prometheus_family_header(
        out, name, "counter", "Number of model executions per model instance (servekit extension)");
    for (const auto& e : entries_) {
      for (const auto& i : e.stats.instances) {
        detail::append_prometheus_sample(out, name, e.labels, "instance", i.name,
                                         i.execution_count);
      }
    }
  }

  /// One family over the models whose statistics hold the optional part `part` (the adaptive
  /// batcher's, a generative model's), labelled with `labels` (e.labels or e.vllm_labels).
  template <class Part, class Value>
  void optional_family(std::string& out, std::optional<Part> statistics_snapshot::*part,
                       std::string entry::*labels, std::string_view name, std::string_view type,
                       std::string_view help, Value value) const {
    detail::append_prometheus_family_header(out, name, type, help);
    for (const auto& e : entries_) {
      if (const auto& p = e.stats.*part) {
        fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, e.*labels, value(*p));
      }
    }
  }

  /// Whether any added model's statistics hold the optional part `part`.
  template <class Part>
  [[nodiscard]] bool any_has(std::optional<Part> statistics_snapshot::*part) const {
    return std::any_of(entries_.begin(), entries_.end(),
                       [part](const entry& e) { return (e.stats.*part).has_value(); });
  }

  /// The adaptive batcher's gauges and counters; left out when no added model has one.
  void adaptive_families(std::string& out) const {
    constexpr auto part = &statistics_snapshot::adaptive_batching;
    if (!any_has(part)) {
      return;
    }
    const auto family = [&](std::string_view name, std::string_view type, std::string_view help,
                            auto value) {
      optional_family(out, part, &entry::labels, name, type, help, value);
    };
    using snapshot = adaptive_batching_snapshot;
    family("servekit_adaptive_wait_for", "gauge",
           "Batch size the adaptive batcher waits for (servekit extension)",
           [](const snapshot& a) { return a.wait_for; });
    family("servekit_adaptive_max_delay_us", "gauge",
           "Longest the adaptive batcher holds a batch open, in microseconds (servekit extension)",
           [](const snapshot& a) { return a.max_delay_us; });
    family("servekit_adaptive_fixed_latency_us", "gauge",
           "Learned execution time of a batch: the fixed part, in microseconds (servekit "
           "extension)",
           [](const snapshot& a) { return a.fixed_latency_us; });
    family("servekit_adaptive_per_element_latency_us", "gauge",
           "Learned execution time of a batch: the part per element, in microseconds (servekit "
           "extension)",
           [](const snapshot& a) { return a.per_element_latency_us; });
    family("servekit_adaptive_arrival_rate", "gauge",
           "Arrival rate the adaptive batcher sees, elements per second (servekit extension)",
           [](const snapshot& a) { return a.arrival_rate; });
    family("servekit_adaptive_recent_within_target", "gauge",
           "Share of about the last 1000 requests answered within the objective (servekit "
           "extension)",
           [](const snapshot& a) { return a.recent_within_target; });
    family("servekit_adaptive_requests_total", "counter",
           "Requests the adaptive batcher saw executed (servekit extension)",
           [](const snapshot& a) { return a.requests; });
    family("servekit_adaptive_within_target_total", "counter",
           "Requests answered within the objective (servekit extension)",
           [](const snapshot& a) { return a.within_target; });
    family("servekit_adaptive_refused_total", "counter",
           "Requests refused by deadline-aware admission (servekit extension)",
           [](const snapshot& a) { return a.refused_for_deadline; });
  }

  /// A generative model's families, under vLLM's names (what the Gateway API Inference
  /// Extension scrapes); left out when no added model is generative.
  void generation_families(std::string& out) const {
    constexpr auto part = &statistics_snapshot::generation;
    if (!any_has(part)) {
      return;
    }
    const auto gauge = [&](std::string_view name, std::string_view help, auto value) {
      optional_family(out, part, &entry::vllm_labels, name, "gauge", help, value);
    };
    const auto counter_of = [&](std::string_view name, std::string_view help, auto value) {
      optional_family(out, part, &entry::vllm_labels, name, "counter", help, value);
    };
    gauge("vllm:num_requests_running", "Number of requests in model execution batches",
          [](const generation_snapshot& g) { return g.num_requests_running; });
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed",
          [](const generation_snapshot& g) { return g.num_requests_waiting; });
    gauge("vllm:kv_cache_usage_perc", "KV-cache usage: 1 means 100 percent usage",
          [](const generation_snapshot& g) { return g.kv_cache_usage; });
    detail::append_prometheus_family_header(out, "vllm:cache_config_info", "gauge",
                                            "Information of the KV cache configuration");
    for (const auto& e : entries_) {
      if (e.stats.generation) {
        fmt::format_to(std::back_inserter(out),
                       "vllm:cache_config_info{{{},block_size=\"{}\",num_gpu_blocks=\"{}\"}} 1\n",
                       e.vllm_labels, e.stats.generation->block_size,
                       e.stats.generation->num_blocks);
      }
    }
    counter_of("vllm:prompt_tokens_total", "Number of prefill tokens processed",
               [](const generation_snapshot& g) { return g.prompt_tokens; });
    counter_of("vllm:generation_tokens_total", "Number of generation tokens processed",
               [](const generation_snapshot& g) { return g.generation_tokens; });
    counter_of("vllm:num_preemptions_total", "Cumulative number of preemptions",
               [](const generation_snapshot& g) { return g.preemptions; });
    counter_of("vllm:prefix_cache_queries_total",
               "Prefix cache queries, in number of queried tokens",
               [](const generation_snapshot& g) { return g.prefix_cache_queries; });
    counter_of("vllm:prefix_cache_hits_total", "Prefix cache hits, in number of cached tokens",
               [](const generation_snapshot& g) { return g.prefix_cache_hits; });
    histogram(out, "vllm:time_to_first_token_seconds",
              "Histogram of time to first token in seconds",
              [](const generation_snapshot& g) -> const latency_histogram& {
                return g.time_to_first_token;
              });
    histogram(out, "vllm:time_per_output_token_seconds",
              "Histogram of time per output token in seconds",
              [](const generation_snapshot& g) -> const latency_histogram& {
                return g.time_per_output_token;
              });
  }

  template <class Get>
  void histogram(std::string& out, std::string_view name, std::string_view help, Get get) const {
    detail::append_prometheus_family_header(out, name, "histogram", help);
    for (const auto& e : entries_) {
      if (!e.stats.generation) {
        continue;
      }
      const latency_histogram& h = get(*e.stats.generation);
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < h.bounds_seconds.size(); ++i) {
        cumulative += h.buckets[i];
        fmt::format_to(std::back_inserter(out), "{}_bucket{{{},le=\"{}\"}} {}\n", name,
                       e.vllm_labels, h.bounds_seconds[i], cumulative);
      }
      fmt::format_to(std::back_inserter(out), "{}_bucket{{{},le=\"+Inf\"}} {}\n", name,
                     e.vllm_labels, h.count);
      fmt::format_to(std::back_inserter(out), "{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name,
                     e.vllm_labels, h.sum_seconds, name, e.vllm_labels, h.count);
    }
  }

  std::vector<entry> entries_;
};

} // namespace servekit
