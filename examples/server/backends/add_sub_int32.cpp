// The models of the bundled `add_sub_int32` backend (its four compositions), compiled once for
// servekit-server and the tests that serve the bundled models (bundled_backends.hpp).
#include "bundled_backends.hpp"

SERVEKIT_INSTANTIATE_COMPOSITIONS(servekit_server::add_sub_int32_backend,
                                  servekit::host_state_store);
