/// \file
/// Compiles servekit/runtime/impl/config_bounds.ipp once, into servekit::servekit.

#include <servekit/runtime/config_bounds.hpp>

#include <servekit/runtime/impl/config_bounds.ipp>
