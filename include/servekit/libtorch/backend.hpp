#pragma once
/// \file
/// The LibTorch backend: TorchScript models (`<model>/<version>/model.pt`) served as Triton's
/// PyTorch backend serves them (`platform: "pytorch_libtorch"` or `backend: "pytorch"`). Register
/// it in a backend_list:
///
///     using backends = servekit::backend_list<
///         servekit::named_backend<"pytorch", servekit::libtorch::backend>>;
///
/// - The model state reads `<directory>/<version>/<default_model_filename>` (`model.pt` when the
///   config names none) once, and checks forward() against the config before any instance is
///   built: its arity, that each argument is a Tensor, that it returns a Tensor or a tuple of
///   Tensors, and the names (libtorch/tensor_naming.hpp). A missing or corrupt file, or a
///   mismatch, fails the load with a message naming the file.
/// - Each instance loads its own torch::jit::Module from those bytes, and runs forward() in
///   c10::InferenceMode (model parameter `INFERENCE_MODE: "false"`: no-grad mode instead).
/// - With max_batch_size > 0 a batch's requests are concatenated along dimension 0 and each
///   output is split back into the requests' rows. A batch of one request gives torch its input
///   buffers as they are, without a copy (torch::from_blob).
/// - Model parameters `INTRA_OP_THREAD_COUNT` (torch's intra-op threads on the instances'
///   threads) and `INTER_OP_THREAD_COUNT` (its inter-op pool, once per process), as in Triton.
/// - Data types FP16, BF16, FP32, FP64, INT8, INT16, INT32, INT64, UINT8 and BOOL.
/// - An error torch raises during forward() fails that batch's requests with a message naming
///   the model; the instance goes on serving.
///
/// This header includes no torch header (they cost every translation unit that includes them
/// 5-10 s to compile): the torch code lives in libtorch/impl/*.ipp, compiled once into
/// servekit::libtorch, or included here when SERVEKIT_HEADER_ONLY is defined.

#include <servekit/backend/backend.hpp>
#include <servekit/backend/batch.hpp>
#include <servekit/backend/instance_context.hpp>
#include <servekit/core/detail/linkage.hpp>

#include <memory>
#include <string_view>

namespace servekit::libtorch {

/// The model file a version folder holds when the config names none (Triton's too).
inline constexpr std::string_view default_model_filename = "model.pt";

namespace detail {
class model_file;
class instance_module;
} // namespace detail

/// A TorchScript model, read and checked once per model (its model_state): the file's bytes,
/// which forward() argument each input feeds and which result each output reads, the threads.
class torchscript_model {
public:
  /// Reads and checks the model file; throws std::runtime_error naming the file (and, for a
  /// mismatch, the tensors) when it is missing, not TorchScript, or disagrees with the config.
  SERVEKIT_DECL explicit torchscript_model(const model_context& context);
  SERVEKIT_DECL ~torchscript_model();
  torchscript_model(const torchscript_model&) = delete;
  torchscript_model& operator=(const torchscript_model&) = delete;

  [[nodiscard]] const detail::model_file& loaded() const noexcept { return *loaded_; }

private:
  std::unique_ptr<const detail::model_file> loaded_;
};

/// One instance: its own torch::jit::Module, loaded from the model state's bytes.
class backend {
public:
  using model_state = torchscript_model;
  /// execute() sets what it needs on the calling thread each time (the intra-op thread count,
  /// inference mode), so a synchronous caller may run it on its own thread (infer_sync). That
  /// thread keeps the model's intra-op thread count afterwards, as an instance's thread does.
  static constexpr bool execute_on_any_thread = true;

  SERVEKIT_DECL backend(const instance_context& context, model_state& model);
  SERVEKIT_DECL ~backend();
  backend(const backend&) = delete;
  backend& operator=(const backend&) = delete;

  /// Runs forward() once for the batch (once per request when the model does not batch).
  /// Throws std::runtime_error naming the model when torch fails; the shell then fails the
  /// batch's requests with that message.
  SERVEKIT_DECL void execute(batch& b);

private:
  std::unique_ptr<detail::instance_module> module_;
};

} // namespace servekit::libtorch

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/libtorch/impl/backend.ipp>
#endif
