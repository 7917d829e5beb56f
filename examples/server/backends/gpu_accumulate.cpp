// The models of the bundled `gpu_accumulate` backend (its four compositions), compiled once for
// servekit-server and the tests that serve the bundled models (bundled_backends.hpp).
#include "bundled_backends.hpp"

SERVEKIT_INSTANTIATE_COMPOSITIONS(cuda_examples::gpu_accumulate_backend,
                                  cuda_examples::gpu_accumulate_state_store);
