// servekit::server: the HTTP front end, compiled once (include/servekit/http/impl/server.ipp).
#include <servekit/http/server.hpp>

#include <servekit/http/impl/server.ipp>
