/// \file
/// Compiles http/impl/server.ipp once, into servekit::server: server_state's members (listening,
/// accepting, running, stopping) and servekit::http::server's.

#include <servekit/http/server.hpp>

#include <servekit/http/impl/server.ipp>
