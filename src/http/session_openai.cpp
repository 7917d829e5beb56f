/// \file
/// Compiles http/impl/session_openai.ipp once, into servekit::server.

#include <servekit/http/server.hpp>

#include <servekit/http/impl/session_openai.ipp>
