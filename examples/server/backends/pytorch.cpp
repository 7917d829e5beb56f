// The models of the bundled `pytorch` backend (servekit::libtorch: TorchScript models, its four
// compositions), compiled once for servekit-server in a build with LibTorch
// (bundled_backends.hpp). This file includes no torch header: the backend's torch code is
// compiled once, into servekit::libtorch.
#include "bundled_backends.hpp"

SERVEKIT_INSTANTIATE_COMPOSITIONS(servekit::libtorch::backend, servekit::host_state_store);
// causal_lm (servekit::libtorch's generative backend): its iteration-batched model.
SERVEKIT_INSTANTIATE_COMPOSITIONS(servekit::libtorch::causal_lm, servekit::host_state_store);
