#pragma once
/// \file
/// The config layer: Triton model-configuration JSON for servekit's options structs (the same
/// as servekit/config/config.hpp, named like the other layers' umbrellas).

#include <servekit/config/config.hpp>
