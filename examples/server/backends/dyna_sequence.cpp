// The models of the bundled `dyna_sequence` backend (its four compositions), compiled once for
// servekit-server and the tests that serve the bundled models (bundled_backends.hpp).
#include "bundled_backends.hpp"

SERVEKIT_INSTANTIATE_COMPOSITIONS(servekit_server::dyna_sequence_backend,
                                  servekit::host_state_store);
