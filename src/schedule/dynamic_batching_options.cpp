/// \file
/// Compiles servekit/schedule/impl/dynamic_batching_options.ipp once, into servekit::servekit.

#include <servekit/schedule/dynamic_batching_options.hpp>

#include <servekit/schedule/impl/dynamic_batching_options.ipp>
