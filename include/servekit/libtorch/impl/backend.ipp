#pragma once
/// \file
/// The LibTorch backend's instances (libtorch/backend.hpp): one torch::jit::Module each, and
/// execute(): requests into tensors, forward(), results into responses. Compiled once by
/// src/libtorch/backend.cpp; see core/detail/linkage.hpp.

#include <servekit/backend/batch.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/libtorch/backend.hpp>
#include <servekit/libtorch/impl/torchscript_model.ipp>

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/api/module.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace servekit::libtorch {

namespace detail {

/// A failure the backend itself finds while executing (a result of the wrong type or size), as
/// opposed to one torch raises. The shell that catches either prefixes the model and instance:
/// "backend of model 'm' failed in instance 'm_0_0': ".
class execute_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string& what) { throw execute_error(what); }

/// Input `in` of requests [first, last) as one tensor. One request's input is handed to torch
/// as it is (at::from_blob: no copy; the request is the backend's until execute returns);
/// several requests' inputs are copied into one tensor, row after row.
[[nodiscard]] inline at::Tensor input_tensor(batch& b, std::size_t first, std::size_t last,
                                             const bound_tensor& in) {
  const auto options = at::TensorOptions{}.dtype(in.scalar).device(c10::kCPU);
  tensor* head = b.request(first).find_input(in.name);
  if (head == nullptr) {
    fail("request '" + b.request(first).id + "' has no input '" + in.name + "'");
  }
  std::vector<std::int64_t> sizes(head->shape.begin(), head->shape.end());
  if (last - first == 1) {
    if (!head->data.location().host_accessible()) {
      fail("input '" + in.name +
           "' is in device memory; the LibTorch backend runs on the "
           "CPU");
    }
    if (head->data.empty()) {
      return at::empty(sizes, options);
    }
    return at::from_blob(head->data.data(), sizes, options);
  }
  if (sizes.empty()) {
    fail("input '" + in.name + "' has no dimension 0 to batch along");
  }
  std::int64_t rows = 0;
  for (std::size_t i = first; i < last; ++i) {
    const tensor* t = b.request(i).find_input(in.name);
    if (t == nullptr) {
      fail("request '" + b.request(i).id + "' has no input '" + in.name + "'");
    }
    const auto dims = t->shape.dims();
    if (dims.empty() || !std::equal(dims.begin() + 1, dims.end(), sizes.begin() + 1, sizes.end()) ||
        !t->data.location().host_accessible()) {
      fail("the requests of one batch disagree on the shape of input '" + in.name +
           "' beyond dimension 0");
    }
    rows += dims[0];
  }
  sizes[0] = rows;
  at::Tensor out = at::empty(sizes, options);
  auto* at_byte = static_cast<std::byte*>(out.data_ptr());
  const std::byte* end = at_byte + out.nbytes();
  for (std::size_t i = first; i < last; ++i) {
    const tensor& t = *b.request(i).find_input(in.name);
    if (static_cast<std::size_t>(end - at_byte) < t.data.size()) {
      fail("input '" + in.name + "' holds more bytes than its shapes say");
    }
    if (!t.data.empty()) {
      std::memcpy(at_byte, t.data.data(), t.data.size());
    }
    at_byte += t.data.size();
  }
  if (at_byte != end) {
    fail("input '" + in.name + "' holds fewer bytes than its shapes say");
  }
  return out;
}

/// servekit's shape of a torch result.
[[nodiscard]] inline shape shape_of(const at::Tensor& t, const bound_tensor& out) {
  const auto sizes = t.sizes();
  const auto s = shape::from(std::span<const std::int64_t>{sizes.data(), sizes.size()});
  if (!s) {
    fail("output '" + out.name + "' has " + std::to_string(sizes.size()) +
         " dimensions, more than servekit's " + std::to_string(shape::max_rank));
  }
  return *s;
}

/// Result `result` into output `out` of requests [first, last): split along dimension 0 by the
/// requests' rows when the model batches, whole otherwise.
inline void scatter_result(batch& b, std::size_t first, std::size_t last, const bound_tensor& out,
                           at::Tensor result, const model_file& model) {
  if (result.scalar_type() != out.scalar) {
    fail("forward() returned output '" + out.name + "' as " +
         std::string{c10::toString(result.scalar_type())} + " but the config declares " +
         std::string{to_config_string(out.type)});
  }
  if (!result.device().is_cpu()) {
    result = result.cpu();
  }
  result = result.contiguous();
  shape s = shape_of(result, out);
  const auto* at_byte = static_cast<const std::byte*>(result.data_ptr());
  if (!model.batched) {
    if (out.always || b.request(first).wants_output(out.name)) {
      tensor& t = b.response(first).add_output(out.name, out.type, s);
      if (!t.data.empty()) {
        std::memcpy(t.data.data(), at_byte, t.data.size());
      }
    }
    return;
  }
  std::int64_t rows = 0;
  for (std::size_t i = first; i < last; ++i) {
    rows += b.request_batch_size(i);
  }
  if (s.rank() == 0 || s[0] != rows) {
    fail("forward() returned output '" + out.name + "' with " +
         (s.rank() == 0 ? std::string{"no dimensions"} : std::to_string(s[0]) + " rows") +
         " for a batch of " + std::to_string(rows) +
         " (a batching model's outputs keep dimension 0, the batch)");
  }
  const std::size_t row_bytes =
      static_cast<std::size_t>(s.without_batch().element_count()) * byte_size(out.type);
  for (std::size_t i = first; i < last; ++i) {
    const std::int64_t n = b.request_batch_size(i);
    const std::size_t bytes = static_cast<std::size_t>(n) * row_bytes;
    if (out.always || b.request(i).wants_output(out.name)) {
      s[0] = n;
      tensor& t = b.response(i).add_output(out.name, out.type, s);
      if (bytes != 0) {
        std::memcpy(t.data.data(), at_byte, bytes);
      }
    }
    at_byte += bytes;
  }
}

/// forward() once over requests [first, last).
inline void run(instance_module& m, batch& b, std::size_t first, std::size_t last) {
  const model_file& model = m.model;
  const c10::InferenceMode inference{model.inference_mode};
  const c10::NoGradGuard no_grad;
  m.arguments.clear();
  for (const bound_tensor& in : model.inputs) {
    at::Tensor t = input_tensor(b, first, last, in);
    if (in.control && model.batched) {
      // The sequence batcher gives a control one value per request; Triton's PyTorch backend
      // hands it to forward() as [batch, 1] (the control's dims [1] after the batch), and
      // models written for Triton expect that. A view: no copy.
      t = t.unsqueeze(1);
    }
    m.arguments.emplace_back(std::move(t));
  }
  const c10::IValue returned = m.module.forward(m.arguments);
  m.arguments.clear();
  std::vector<at::Tensor> results;
  if (returned.isTensor()) {
    results.push_back(returned.toTensor());
  } else if (returned.isTuple()) {
    for (const c10::IValue& element : returned.toTupleRef().elements()) {
      if (!element.isTensor()) {
        fail("forward() returned a tuple holding a " + element.tagKind() + ", not only Tensors");
      }
      results.push_back(element.toTensor());
    }
  } else {
    fail("forward() returned a " + returned.tagKind() + ", not a Tensor or a tuple");
  }
  for (const bound_tensor& out : model.outputs) {
    if (out.position >= results.size()) {
      fail("output '" + out.name + "' reads result " + std::to_string(out.position) +
           " but forward() returned " + std::to_string(results.size()));
    }
    scatter_result(b, first, last, out, results[out.position], model);
  }
}

} // namespace detail

SERVEKIT_DECL backend::backend(const instance_context& context, model_state& model)
    : module_{std::make_unique<detail::instance_module>(model.loaded(),
                                                        detail::load_module(model.loaded()))} {
  (void)context; // the model state read everything the instance needs
}

SERVEKIT_DECL backend::~backend() = default;

SERVEKIT_DECL void backend::execute(batch& b) {
  detail::instance_module& m = *module_;
  const detail::model_file& model = m.model;
  if (b.empty()) {
    return;
  }
  try {
    // OpenMP keeps the intra-op thread count per calling thread: set it on this instance's.
    if (model.intra_op_threads > 0 && at::get_num_threads() != model.intra_op_threads) {
      at::set_num_threads(model.intra_op_threads);
    }
    if (model.batched) {
      detail::run(m, b, 0, b.size());
    } else {
      for (std::size_t i = 0; i < b.size(); ++i) {
        detail::run(m, b, i, i + 1);
      }
    }
  } catch (const detail::execute_error&) {
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error("LibTorch failed in forward(): " + detail::torch_message(e));
  }
}

} // namespace servekit::libtorch
