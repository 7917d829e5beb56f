/// \file
/// Compiles servekit/runtime/impl/finish.ipp once, into servekit::servekit.

#include <servekit/runtime/detail/finish.hpp>

#include <servekit/runtime/impl/finish.ipp>
