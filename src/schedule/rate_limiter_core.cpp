/// \file
/// Compiles servekit/schedule/impl/rate_limiter_core.ipp once, into servekit::servekit.

#include <servekit/schedule/rate_limiter_core.hpp>

#include <servekit/schedule/impl/rate_limiter_core.ipp>
