/// \file
/// Compiles repository/impl/model_repository_shutdown.ipp once, into servekit::server.

#include <servekit/repository/model_repository.hpp>

#include <servekit/repository/impl/model_repository_shutdown.ipp>
