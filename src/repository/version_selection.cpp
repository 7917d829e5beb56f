/// \file
/// Compiles repository/impl/version_selection.ipp once, into servekit::server.

#include <servekit/repository/detail/version_selection.hpp>

#include <servekit/repository/impl/version_selection.ipp>
