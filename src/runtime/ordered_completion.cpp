/// \file
/// Compiles servekit/runtime/impl/ordered_completion.ipp once, into servekit::servekit.

#include <servekit/runtime/detail/ordered_completion.hpp>

#include <servekit/runtime/impl/ordered_completion.ipp>
