// The LibTorch backends, compiled once into servekit::libtorch: the model state (reading and
// checking the TorchScript file) and the instances (libtorch/backend.hpp), and the generative
// causal_lm (libtorch/causal_lm.hpp), which shares the model-file helpers. The only translation
// unit of the library that includes torch. See core/detail/linkage.hpp.

#include <servekit/libtorch/backend.hpp>
#include <servekit/libtorch/causal_lm.hpp>

#include <servekit/libtorch/impl/backend.ipp>
#include <servekit/libtorch/impl/causal_lm.ipp>
#include <servekit/libtorch/impl/torchscript_model.ipp>
