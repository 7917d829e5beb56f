#pragma once
/// \file
/// Umbrella header of the ensemble layer: compile-time ensembles, configured ensembles and the
/// executor they share.

#include <servekit/ensemble/ensemble.hpp>
#include <servekit/ensemble/ensemble_executor.hpp>
#include <servekit/ensemble/ensemble_graph.hpp>
#include <servekit/ensemble/runtime_ensemble.hpp>
#include <servekit/schedule/ensemble_scheduling_options.hpp>
