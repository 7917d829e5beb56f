/// \file
/// Compiles http/impl/session_metadata.ipp once, into servekit::server.

#include <servekit/http/server.hpp>

#include <servekit/http/impl/session_metadata.ipp>
