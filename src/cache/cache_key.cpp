/// \file
/// Compiles servekit/cache/impl/cache_key.ipp once, into servekit::servekit.

#include <servekit/cache/cache_key.hpp>

#include <servekit/cache/impl/cache_key.ipp>
