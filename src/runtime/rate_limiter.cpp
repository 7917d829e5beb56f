/// \file
/// Compiles servekit/runtime/impl/rate_limiter.ipp once, into servekit::servekit.

#include <servekit/runtime/rate_limiter.hpp>

#include <servekit/runtime/impl/rate_limiter.ipp>
