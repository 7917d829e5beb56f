/// \file
/// Compiles runtime/impl/warmup.ipp once, into servekit::servekit.

#include <servekit/runtime/detail/warmup.hpp>

#include <servekit/runtime/impl/warmup.ipp>
