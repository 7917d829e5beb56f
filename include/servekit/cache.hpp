#pragma once
/// \file
/// The response cache: servekit::response_cache, its settings (`--cache-config local,size=N`)
/// and its keys. Give a cache to models in model_environment.

#include <servekit/cache/cache_config.hpp>
#include <servekit/cache/cache_eligibility.hpp>
#include <servekit/cache/cache_key.hpp>
#include <servekit/cache/response_cache.hpp>
