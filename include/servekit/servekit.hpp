#pragma once
/// \file
/// The engine in one include: backends, model<> and its schedulers, ensembles, state, cache,
/// metrics (link servekit::servekit). The server tier has its own umbrellas and target
/// (servekit::server, which brings nlohmann-json, fmt and Boost.Beast): servekit/config.hpp
/// (Triton model configs), servekit/repository.hpp (the model repository) and servekit/http.hpp
/// (the KServe v2 HTTP front end).

#include <servekit/backend.hpp>
#include <servekit/cache.hpp>
#include <servekit/core.hpp>
#include <servekit/ensemble.hpp>
#include <servekit/metrics.hpp>
#include <servekit/queue.hpp>
#include <servekit/runtime.hpp>
#include <servekit/schedule.hpp>
#include <servekit/state.hpp>
