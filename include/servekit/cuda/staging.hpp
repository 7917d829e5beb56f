#pragma once
/// \file
/// Staging between the requests of a batch and device memory, through one contiguous pinned
/// buffer: the inputs of all requests travel in one host-to-device copy, the batched output in
/// one device-to-host copy, both asynchronous on the instance's stream.

#include <servekit/backend/batch.hpp>
#include <servekit/backend/batch_io.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>
#include <servekit/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace servekit::cuda {

/// Queues input `input` of every request, in batch order, into `device` (which must hold
/// gathered_size(b, input) bytes) on stream `s`. Host inputs are copied into `pinned` at their
/// place in the batch, then ONE cudaMemcpyAsync moves the whole range to `device`; inputs already
/// in device memory (a client or an upstream ensemble step put them there) are then copied
/// device to device over their place, after that copy in stream order.
///
/// `pinned` must hold at least gathered_size(b, input) bytes (a staging buffer sized for the
/// largest batch is fine) and, like the requests' device inputs, stay untouched until the stream
/// has passed these copies. Fails, before queueing anything, when a request lacks the input or
/// `pinned` is too small.
[[nodiscard]] inline status gather_to_device(const batch& b, std::string_view input,
                                             std::span<std::byte> pinned, std::byte* device,
                                             cudaStream_t s) {
  const std::size_t total = gathered_size(b, input);
  if (pinned.size() < total) {
    return invalid_argument("gather_to_device: staging buffer of " + std::to_string(pinned.size()) +
                            " bytes is too small for input '" + std::string{input} + "' (" +
                            std::to_string(total) + " bytes over the batch)");
  }
  // Host parts into the pinned buffer (and every request checked) before any copy is queued.
  bool any_on_host = false;
  bool any_on_device = false;
  std::size_t at = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const tensor* t = b.request(i).find_input(input);
    if (t == nullptr) {
      return invalid_argument("gather_to_device: request " + std::to_string(i) + " has no input '" +
                              std::string{input} + "'");
    }
    if (t->data.empty()) {
      continue;
    }
    if (t->data.location().host_accessible()) {
      std::memcpy(pinned.data() + at, t->data.data(), t->data.size());
      any_on_host = true;
    } else {
      any_on_device = true;
    }
    at += t->data.size();
  }
  if (any_on_host) {
    // One copy of the whole range: the places of device inputs carry stale pinned bytes until
    // the copies below, which the stream runs after this one, overwrite them.
    SERVEKIT_CUDA_RETURN(cudaMemcpyAsync(device, pinned.data(), total, cudaMemcpyHostToDevice, s));
  }
  if (!any_on_device) {
    return ok_status();
  }
  at = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const buffer& data = b.request(i).find_input(input)->data;
    if (!data.location().host_accessible() && !data.empty()) {
      // cudaMemcpyDefault: the input may sit on another GPU; unified addressing lets the runtime
      // see where each pointer lives and route a peer copy.
      const cudaError_t err =
          cudaMemcpyAsync(device + at, data.data(), data.size(), cudaMemcpyDefault, s);
      if (err != cudaSuccess) {
        return to_status(err, "cudaMemcpyAsync of device input '" + std::string{input} +
                                  "' of request " + std::to_string(i));
      }
    }
    at += data.size();
  }
  return ok_status();
}

/// Queues a copy of `pinned.size()` bytes from `device` into `pinned` on stream `s`. The bytes
/// are there once the stream is synchronised (then scatter_from_pinned hands them out).
[[nodiscard]] inline status copy_to_host_async(const std::byte* device, std::span<std::byte> pinned,
                                               cudaStream_t s) {
  SERVEKIT_CUDA_RETURN(
      cudaMemcpyAsync(pinned.data(), device, pinned.size(), cudaMemcpyDeviceToHost, s));
  return ok_status();
}

/// Splits the batched output in `pinned` (`item` shape per batch element, `type` elements) into
/// one host output tensor per request, shaped [request_batch_size, item...] when the model
/// batches. Call it after the stream has been synchronised. Rows past the batch (padding up to a
/// CUDA graph size) are ignored.
[[nodiscard]] inline status scatter_from_pinned(batch& b, std::string_view output, data_type type,
                                                const shape& item,
                                                std::span<const std::byte> pinned) {
  // Each request gets its own host tensor: the pinned buffer is reused by the next batch while
  // the responses may still be in flight to their clients.
  return scatter_output(b, output, type, item, pinned);
}

} // namespace servekit::cuda
