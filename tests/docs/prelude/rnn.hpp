#pragma once
// Prelude of README.md's sequence-batching block: a stateful backend to stand for my_rnn_backend
// (examples/accumulate's, which keeps a running sum per sequence).
#include "accumulate/accumulate_backend.hpp"

using my_rnn_backend = accumulate::backend;
