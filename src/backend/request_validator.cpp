/// \file
/// Compiles servekit/backend/impl/request_validator.ipp once, into servekit::servekit.

#include <servekit/backend/request_validator.hpp>

#include <servekit/backend/impl/request_validator.ipp>
