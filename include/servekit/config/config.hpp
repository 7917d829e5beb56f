#pragma once
/// \file
/// The config layer: Triton model configuration (JSON, and protobuf text format as in
/// config.pbtxt) for servekit's options structs.

#include <servekit/config/model_config_json.hpp>
#include <servekit/config/model_config_pbtxt.hpp>
#include <servekit/schedule/iteration_batching_parameters.hpp>
