#pragma once
/// \file
/// Backend `accumulate`: INPUT INT32 [1] -> OUTPUT INT32 [1], the running sum of INPUT over the
/// requests of a sequence (a START request's output is its input). It keeps no state itself: the
/// sum travels in servekit's implicit state, INPUT_STATE in and OUTPUT_STATE out (config
/// `sequence_batching.state`), so any slot and any instance can serve any sequence. Run it under
/// `sequence_batching` (direct or oldest).
///
/// examples/accumulate's backend. The control flags come from `batch::sequence(i)`, which holds
/// them whatever the config names its control inputs (and whether it declares READY, END or
/// CORRID at all).

#include "accumulate/accumulate_backend.hpp" // examples/accumulate
#include "execute_delay.hpp"

namespace servekit_server {

using accumulate_backend = with_execute_delay<accumulate::backend>;

} // namespace servekit_server
