#pragma once
// Prelude of README.md's server block: the HTTP front end and the example server's backends
// (examples/server/backends), which the block registers by name.
#include "server/backends/accumulate.hpp"
#include "server/backends/add_sub.hpp"

#include <servekit/http.hpp>

using servekit_server::accumulate_backend;
using servekit_server::add_sub_backend;
