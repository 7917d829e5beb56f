#pragma once
/// \file
/// cached_submit: the response cache in front of a model's submit (a model with
/// `response_cache { enable: true }`, or an ensemble's top level).

#include <servekit/cache/cache_key.hpp>
#include <servekit/cache/response_cache.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/status.hpp>

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace servekit::detail {

/// Statistics a cached front records into (model_statistics has both).
template <class S>
concept cache_statistics = requires(S& s, std::uint64_t ns) {
  s.record_cache_hit(ns, ns);
  s.record_cache_miss(ns);
};

/// Wraps a missed request's sink: caches its final response if it succeeded, records the miss
/// (the lookup plus the insertion), then forwards the response.
template <cache_statistics Stats>
class inserting_sink {
public:
  inserting_sink(response_sink inner, response_cache& cache, cache_key key, Stats& stats,
                 std::uint64_t lookup_ns)
      : inner_{std::move(inner)}, cache_{&cache}, key_{std::move(key)}, stats_{&stats},
        lookup_ns_{lookup_ns} {}

  void operator()(response&& r) {
    if (r.final) {
      const time_point start = clock::now();
      if (r.ok()) {
        cache_->insert(std::move(key_), r.outputs);
      }
      stats_->record_cache_miss(lookup_ns_ + elapsed_ns(start, clock::now()));
    }
    inner_.send(std::move(r));
  }

private:
  response_sink inner_;
  response_cache* cache_;
  cache_key key_;
  Stats* stats_;
  std::uint64_t lookup_ns_;
};

/// Looks `r` up in `cache` under model `model` version `version`. A hit is answered through
/// `sink` at once, on this thread and before this returns (a copy of the cached outputs, with
/// `r`'s id), records `stats.record_cache_hit` and returns ok without calling `submit`. A miss
/// calls `submit(std::move(r), wrapped_sink)`, where the wrapped sink inserts the final response
/// if it succeeded and records `stats.record_cache_miss`; a miss that `submit` rejects records
/// the lookup alone. A request with an input outside host memory goes to `submit` untouched.
///
/// `cache` and `stats` must outlive every response of the submitted request.
template <cache_statistics Stats, class Submit>
[[nodiscard]] status cached_submit(response_cache& cache, std::string_view model,
                                   std::int64_t version, request&& r, response_sink sink,
                                   Stats& stats, Submit&& submit) {
  const time_point start = clock::now();
  const std::optional<request_key> key = request_key::of(model, version, r);
  if (!key) {
    return submit(std::move(r), std::move(sink));
  }
  if (std::optional<tensor_list> outputs = cache.lookup(*key)) {
    response hit;
    hit.id = std::move(r.id);
    hit.outputs = std::move(*outputs);
    const std::uint64_t ns = elapsed_ns(start, clock::now());
    stats.record_cache_hit(ns, ns);
    sink.complete(std::move(hit));
    return ok_status();
  }
  cache_key missed = key->materialize(); // before `r` moves: the key refers to its inputs
  const std::uint64_t lookup_ns = elapsed_ns(start, clock::now());
  status s =
      submit(std::move(r), response_sink{inserting_sink<Stats>{
                               std::move(sink), cache, std::move(missed), stats, lookup_ns}});
  if (!s.ok()) {
    stats.record_cache_miss(lookup_ns);
  }
  return s;
}

} // namespace servekit::detail
