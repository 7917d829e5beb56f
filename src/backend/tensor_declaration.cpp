/// \file
/// Compiles servekit/backend/impl/tensor_declaration.ipp once, into servekit::servekit.

#include <servekit/backend/tensor_declaration.hpp>

#include <servekit/backend/impl/tensor_declaration.ipp>
