#pragma once
/// \file
/// model_environment: what a model shares with the other models of a server (the rate
/// limiter, the response cache), given to it at construction.

#include <memory>

namespace servekit {

class rate_limiter;   // runtime/rate_limiter.hpp
class response_cache; // cache/response_cache.hpp

/// The server-wide objects a model uses, if it is given them. Each is shared: the models hold
/// it, so it outlives every model built with it, whichever is destroyed last.
///
///     auto limiter = std::make_shared<servekit::rate_limiter>(...);
///     servekit::model<my_backend> m{options, {}, {.limiter = limiter}};
struct model_environment {
  /// Instances execute only when the resources of their group's `rate_limiter` are free.
  /// Null: no rate limiting (Triton's `--rate-limit off`, its default).
  std::shared_ptr<rate_limiter> limiter;
  /// Responses of models with `response_cache { enable: true }` are cached here. Null: no
  /// cache (the models' `response_cache` settings have no effect, as in Triton without
  /// `--cache-config`).
  std::shared_ptr<response_cache> cache;
};

} // namespace servekit
