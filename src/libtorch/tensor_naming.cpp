// Triton's PyTorch-backend naming rules, compiled once into servekit::libtorch
// (libtorch/tensor_naming.hpp; no torch here). See core/detail/linkage.hpp.

#include <servekit/libtorch/tensor_naming.hpp>

#include <servekit/libtorch/impl/tensor_naming.ipp>
