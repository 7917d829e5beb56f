#pragma once
/// \file
/// The state layer: Triton's implicit sequence state (the state_store role and its stores).

#include <servekit/state/host_state_store.hpp>
#include <servekit/state/state_options.hpp>
#include <servekit/state/state_store.hpp>
