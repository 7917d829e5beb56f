#pragma once
/// \file
/// The backends compiled into servekit-server, by the name a config.json's "backend" gives.
/// Add your own here: write a backend class, then one `named_backend` line.

#include "backends/accumulate.hpp"
#include "backends/add_sub.hpp"
#include "backends/identity.hpp"

#include <servekit/repository/backend_list.hpp>

namespace servekit_server {

using bundled_backends =
    servekit::backend_list<servekit::named_backend<"add_sub", add_sub_backend>,
                           servekit::named_backend<"identity", identity_backend>,
                           servekit::named_backend<"accumulate", accumulate_backend>>;

} // namespace servekit_server
