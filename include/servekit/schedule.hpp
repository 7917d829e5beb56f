#pragma once
/// \file
/// The schedule layer: decision cores (default scheduler, dynamic batcher, sequence batcher,
/// iteration scheduler) and their policies.

#include <servekit/schedule/batch_plan.hpp>
#include <servekit/schedule/default_scheduler.hpp>
#include <servekit/schedule/direct_sequence_core.hpp>
#include <servekit/schedule/dynamic_batcher.hpp>
#include <servekit/schedule/dynamic_batching_options.hpp>
#include <servekit/schedule/ensemble_scheduling_options.hpp>
#include <servekit/schedule/iteration_batcher.hpp>
#include <servekit/schedule/iteration_batching_options.hpp>
#include <servekit/schedule/iteration_batching_parameters.hpp>
#include <servekit/schedule/iteration_scheduler_core.hpp>
#include <servekit/schedule/kv_block_pool.hpp>
#include <servekit/schedule/oldest_sequence_core.hpp>
#include <servekit/schedule/scheduler.hpp>
#include <servekit/schedule/sequence_batcher.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>
