#pragma once
/// \file
/// The LibTorch backend (servekit::libtorch target): TorchScript models served as Triton's
/// PyTorch backend serves them. Not part of servekit/servekit.hpp: it needs LibTorch (link
/// servekit::libtorch). See docs/backends.md.

#include <servekit/libtorch/backend.hpp>
#include <servekit/libtorch/causal_lm.hpp>
#include <servekit/libtorch/tensor_naming.hpp>
