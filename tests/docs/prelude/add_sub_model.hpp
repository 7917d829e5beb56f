#pragma once
// Prelude of docs/getting-started.md's blocks that use add_sub_model without defining it.
#include "prelude/add_sub.hpp"

#include <servekit/config.hpp> // load_model_config (the server tier)

using add_sub_model =
    servekit::model<add_sub_backend, servekit::dynamic_batcher<>, servekit::instance_group<2>>;
