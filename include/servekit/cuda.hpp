#pragma once
/// \file
/// The CUDA layer (servekit::cuda target): streams, events, device and pinned memory and their
/// pools, batch staging, CUDA graphs per batch size, optimization profiles and the device state
/// store. Not part of servekit/servekit.hpp: it needs the CUDA runtime (link servekit::cuda).

#include <servekit/cuda/buffer_pool.hpp>
#include <servekit/cuda/device.hpp>
#include <servekit/cuda/device_state_store.hpp>
#include <servekit/cuda/error.hpp>
#include <servekit/cuda/event.hpp>
#include <servekit/cuda/graph_batch_sizes.hpp>
#include <servekit/cuda/graph_cache.hpp>
#include <servekit/cuda/memory.hpp>
#include <servekit/cuda/optimization_profile.hpp>
#include <servekit/cuda/staging.hpp>
#include <servekit/cuda/stream.hpp>
