/// \file
/// Compiles servekit/runtime/impl/instance_group.ipp once, into servekit::servekit.

#include <servekit/runtime/instance_group.hpp>

#include <servekit/runtime/impl/instance_group.ipp>
