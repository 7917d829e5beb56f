/// \file
/// Compiles servekit/schedule/impl/kv_block_pool.ipp once, into servekit::servekit.

#include <servekit/schedule/kv_block_pool.hpp>

#include <servekit/schedule/impl/kv_block_pool.ipp>
