#pragma once
// Prelude of README.md's server block: the HTTP front end and the backends the block registers by
// name: examples/add_sub's add_sub_backend (the example server bundles the same backend with its
// dims and batch limit left to the config) and the example server's accumulate_backend
// (examples/server/backends).
#include "add_sub/add_sub_backend.hpp"
#include "server/backends/accumulate.hpp"

#include <servekit/http.hpp>
#include <servekit/repository.hpp>

using servekit_server::accumulate_backend;
