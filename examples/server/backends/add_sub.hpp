#pragma once
/// \file
/// Backend `add_sub`: OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1, elementwise, in
/// FP32 (Triton's add_sub example). The config picks the dims (the bundled model uses [16]) and
/// the scheduling; the two inputs of one request must have the same shape.
///
/// examples/add_sub's backend with its declarations left to the config: any length, and no batch
/// limit of its own (max_batch_size 0: the config decides whether and how much to batch).

#include "add_sub/add_sub_backend.hpp" // examples/add_sub
#include "execute_delay.hpp"

namespace servekit_server {

using add_sub_backend = with_execute_delay<basic_add_sub_backend<-1, 0>>;

} // namespace servekit_server
