#pragma once
/// \file
/// The backends compiled into servekit-server, by the name a config.json's "backend" gives.
/// Add your own here: write a backend class, then one `named_backend` line.

#include "backends/accumulate.hpp"
#include "backends/add_sub.hpp"
#include "backends/identity.hpp"
#include "gpu_accumulate/gpu_accumulate_backend.hpp" // examples/cuda: GPU path when built with CUDA
#include "mlp/mlp_backend.hpp"
#include "repeat/repeat_backend.hpp" // examples/repeat: decoupled

#include <servekit/repository/backend_list.hpp>

namespace servekit_server {

using bundled_backends = servekit::backend_list<
    servekit::named_backend<"add_sub", add_sub_backend>,
    servekit::named_backend<"identity", identity_backend>,
    servekit::named_backend<"accumulate", accumulate_backend>,
    servekit::named_backend<"repeat", repeat::backend>,
    servekit::named_backend<"gpu_mlp", cuda_examples::mlp_backend>,
    servekit::named_backend<"gpu_accumulate", cuda_examples::gpu_accumulate_backend,
                            cuda_examples::gpu_accumulate_state_store>>;

} // namespace servekit_server
