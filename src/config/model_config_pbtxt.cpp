/// \file
/// Compiles config/impl/model_config_pbtxt.ipp once, into servekit::server.

#include <servekit/config/model_config_pbtxt.hpp>

#include <servekit/config/impl/model_config_pbtxt.ipp>
