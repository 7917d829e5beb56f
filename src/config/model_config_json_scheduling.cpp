/// \file
/// Compiles config/impl/model_config_json_scheduling.ipp once, into servekit::server.

#include <servekit/config/model_config_json.hpp>

#include <servekit/config/impl/model_config_json_scheduling.ipp>
