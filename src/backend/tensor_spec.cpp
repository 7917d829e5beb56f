/// \file
/// Compiles servekit/backend/impl/tensor_spec.ipp once, into servekit::servekit.

#include <servekit/backend/tensor_spec.hpp>

#include <servekit/backend/impl/tensor_spec.ipp>
