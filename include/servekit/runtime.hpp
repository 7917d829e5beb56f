#pragma once
/// \file
/// The runtime layer: model<Backend, Policies...>, instance groups and the shells.

#include <servekit/runtime/auto_complete.hpp>
#include <servekit/runtime/generative_backend.hpp>
#include <servekit/runtime/generative_model.hpp>
#include <servekit/runtime/instance_group.hpp>
#include <servekit/runtime/iteration_shell.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_environment.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/model_ref.hpp>
#include <servekit/runtime/model_registry.hpp>
#include <servekit/runtime/resolved_config.hpp>
#include <servekit/runtime/sequence_shell.hpp>
#include <servekit/runtime/shutdown_mode.hpp>
#include <servekit/runtime/simulated_shell.hpp>
#include <servekit/runtime/submit_answering.hpp>
#include <servekit/runtime/threaded_shell.hpp>
