/// \file
/// Compiles servekit/runtime/impl/resolved_config.ipp once, into servekit::servekit.

#include <servekit/runtime/resolved_config.hpp>

#include <servekit/runtime/impl/resolved_config.ipp>
