/// \file
/// Compiles servekit/cache/impl/response_cache.ipp once, into servekit::servekit.

#include <servekit/cache/response_cache.hpp>

#include <servekit/cache/impl/response_cache.ipp>
