#pragma once
/// \file
/// Everything servekit offers, in one include, except the HTTP front end (servekit/http.hpp),
/// which brings Boost.Beast.

#include <servekit/backend.hpp>
#include <servekit/cache.hpp>
#include <servekit/config.hpp>
#include <servekit/core.hpp>
#include <servekit/ensemble.hpp>
#include <servekit/metrics.hpp>
#include <servekit/queue.hpp>
#include <servekit/repository.hpp>
#include <servekit/runtime.hpp>
#include <servekit/schedule.hpp>
#include <servekit/state.hpp>
