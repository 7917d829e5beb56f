/// \file
/// Compiles servekit/runtime/impl/decoupled_requests.ipp once, into servekit::servekit.

#include <servekit/runtime/detail/decoupled_requests.hpp>

#include <servekit/runtime/impl/decoupled_requests.ipp>
