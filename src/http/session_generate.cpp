/// \file
/// Compiles http/impl/session_generate.ipp once, into servekit::server.

#include <servekit/http/server.hpp>

#include <servekit/http/impl/session_generate.ipp>
