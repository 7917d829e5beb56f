#pragma once
/// \file
/// The config layer: Triton model-configuration JSON for servekit's options structs.

#include <servekit/config/model_config_json.hpp>
