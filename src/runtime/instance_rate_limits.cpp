/// \file
/// Compiles servekit/runtime/impl/instance_rate_limits.ipp once, into servekit::servekit.

#include <servekit/runtime/detail/instance_rate_limits.hpp>

#include <servekit/runtime/impl/instance_rate_limits.ipp>
