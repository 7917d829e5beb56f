// The models of the bundled `onnx` backend (servekit::onnx::backend, its four compositions),
// compiled once for servekit-server and the tests that serve the bundled models; only in builds
// with OpenCV's DNN module (SERVEKIT_HAS_ONNX).
#include "bundled_backends.hpp"

#if defined(SERVEKIT_HAS_ONNX)
SERVEKIT_INSTANTIATE_COMPOSITIONS(servekit::onnx::backend, servekit::host_state_store);
#endif
