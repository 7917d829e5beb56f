/// \file
/// Compiles servekit/core/impl/shape.ipp once, into servekit::servekit.

#include <servekit/core/shape.hpp>

#include <servekit/core/impl/shape.ipp>
