/// \file
/// Compiles servekit/backend/impl/batch_compatibility.ipp once, into servekit::servekit.

#include <servekit/backend/batch_compatibility.hpp>

#include <servekit/backend/impl/batch_compatibility.ipp>
