#pragma once
/// \file
/// The backends compiled into servekit-server, by the name a model config's `backend` gives
/// (config.pbtxt or config.json).
/// Add your own here: write a backend class, then one `named_backend` line (and, to build its
/// models once rather than in every file that includes this one, one SERVEKIT_EXTERN_COMPOSITIONS
/// line below and a backends/<name>.cpp with the matching SERVEKIT_INSTANTIATE_COMPOSITIONS).

#include "backends/accumulate.hpp"
#include "backends/add_sub.hpp"
#include "backends/add_sub_int32.hpp"
#include "backends/dyna_sequence.hpp"
#include "backends/identity.hpp"
#include "backends/input_plus_controls.hpp"
#include "gpu_accumulate/gpu_accumulate_backend.hpp" // examples/cuda: GPU path when built with CUDA
#include "mlp/mlp_backend.hpp"
#include "repeat/repeat_backend.hpp" // examples/repeat: decoupled

#include <servekit/repository/backend_list.hpp>

#if defined(SERVEKIT_HAS_ONNX)
#include <servekit/onnx/onnx_backend.hpp>
#endif
// TorchScript models (`platform: "pytorch_libtorch"` or `backend: "pytorch"`), in programs that
// link servekit::libtorch (which defines SERVEKIT_HAS_LIBTORCH): servekit-server in a build with
// LibTorch. The HTTP tests link the other backends only, and load no LibTorch.
#if defined(SERVEKIT_HAS_LIBTORCH)
#include <servekit/libtorch/backend.hpp>
#include <servekit/libtorch/causal_lm.hpp>
#endif

namespace servekit_server {

using builtin_backends = servekit::backend_list<
    servekit::named_backend<"add_sub", add_sub_backend>,
    servekit::named_backend<"identity", identity_backend>,
    servekit::named_backend<"accumulate", accumulate_backend>,
    servekit::named_backend<"repeat", repeat::backend>,
    // Triton's example models (examples/models-triton): simple, simple_string, the sequences.
    servekit::named_backend<"add_sub_int32", add_sub_int32_backend>,
    servekit::named_backend<"input_plus_controls", input_plus_controls_backend>,
    servekit::named_backend<"dyna_sequence", dyna_sequence_backend>,
    servekit::named_backend<"gpu_mlp", cuda_examples::mlp_backend>,
    servekit::named_backend<"gpu_accumulate", cuda_examples::gpu_accumulate_backend,
                            cuda_examples::gpu_accumulate_state_store>>;

#if defined(SERVEKIT_HAS_ONNX)
// ONNX models (`backend: "onnx"`, or Triton's `platform: "onnxruntime_onnx"`) through OpenCV's
// DNN module, in builds that found it (servekit::onnx).
using file_backends =
    builtin_backends::with<servekit::named_backend<"onnx", servekit::onnx::backend>>;
#else
using file_backends = builtin_backends;
#endif

#if defined(SERVEKIT_HAS_LIBTORCH)
// `causal_lm`: a generative TorchScript model served per step by the iteration batcher
// (examples/models/tiny_lm, docs/llm-serving.md).
using bundled_backends =
    file_backends::with<servekit::named_backend<"pytorch", servekit::libtorch::backend>,
                        servekit::named_backend<"causal_lm", servekit::libtorch::causal_lm>>;
#else
using bundled_backends = file_backends;
#endif

} // namespace servekit_server

// Each backend's models are compiled once, in backends/<name>.cpp (the library
// servekit_example_bundled_backends), not in every file that includes this header.
SERVEKIT_EXTERN_COMPOSITIONS(servekit_server::add_sub_backend, servekit::host_state_store);
SERVEKIT_EXTERN_COMPOSITIONS(servekit_server::identity_backend, servekit::host_state_store);
SERVEKIT_EXTERN_COMPOSITIONS(servekit_server::accumulate_backend, servekit::host_state_store);
SERVEKIT_EXTERN_COMPOSITIONS(repeat::backend, servekit::host_state_store);
SERVEKIT_EXTERN_COMPOSITIONS(servekit_server::add_sub_int32_backend, servekit::host_state_store);
SERVEKIT_EXTERN_COMPOSITIONS(servekit_server::input_plus_controls_backend,
                             servekit::host_state_store);
SERVEKIT_EXTERN_COMPOSITIONS(servekit_server::dyna_sequence_backend, servekit::host_state_store);
SERVEKIT_EXTERN_COMPOSITIONS(cuda_examples::mlp_backend, servekit::host_state_store);
SERVEKIT_EXTERN_COMPOSITIONS(cuda_examples::gpu_accumulate_backend,
                             cuda_examples::gpu_accumulate_state_store);
#if defined(SERVEKIT_HAS_ONNX)
SERVEKIT_EXTERN_COMPOSITIONS(servekit::onnx::backend, servekit::host_state_store);
#endif
#if defined(SERVEKIT_HAS_LIBTORCH)
SERVEKIT_EXTERN_COMPOSITIONS(servekit::libtorch::backend, servekit::host_state_store);
SERVEKIT_EXTERN_COMPOSITIONS(servekit::libtorch::causal_lm, servekit::host_state_store);
#endif
