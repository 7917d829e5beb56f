#pragma once
// Prelude of docs/getting-started.md's blocks after "The backend": add_sub_backend as that section
// builds it (its blocks "backend", "declarations" and "execute", put together, with the length and
// the batch limit as template parameters for the example server), which examples/add_sub serves.
#include "add_sub/add_sub_backend.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <utility>
