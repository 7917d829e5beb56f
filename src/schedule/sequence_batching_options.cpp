/// \file
/// Compiles servekit/schedule/impl/sequence_batching_options.ipp once, into servekit::servekit.

#include <servekit/schedule/sequence_batching_options.hpp>

#include <servekit/schedule/impl/sequence_batching_options.ipp>
