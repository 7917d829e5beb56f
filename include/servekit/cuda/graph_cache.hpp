#pragma once
/// \file
/// graph_cache: CUDA graphs keyed by batch size. The first execution of a size is captured into
/// a graph; later ones replay it with a single launch instead of one launch per kernel and copy,
/// which is where small, launch-bound models spend their time.

#include <servekit/core/status.hpp>
#include <servekit/cuda/error.hpp>
#include <servekit/cuda/graph_batch_sizes.hpp>

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <type_traits>
#include <utility>

namespace servekit::cuda {

namespace detail {

struct graph_deleter {
  void operator()(cudaGraph_t graph) const noexcept { static_cast<void>(cudaGraphDestroy(graph)); }
};
struct graph_exec_deleter {
  void operator()(cudaGraphExec_t exec) const noexcept {
    static_cast<void>(cudaGraphExecDestroy(exec));
  }
};
/// A captured graph, owned.
using unique_graph = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, graph_deleter>;
/// An instantiated, launchable graph, owned.
using unique_graph_exec =
    std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, graph_exec_deleter>;

} // namespace detail

namespace detail {

/// Can be called with the stream to record on.
template <class Record>
concept invocable_with_stream = std::invocable<Record&, cudaStream_t>;

/// Says through a status whether it could queue its work.
template <class Record>
concept returns_status = std::same_as<std::invoke_result_t<Record&, cudaStream_t>, status>;

} // namespace detail

/// Something that queues the work of one execution on a stream and says whether it could:
/// `record(s) -> status`.
template <class Record>
concept graph_record = detail::invocable_with_stream<Record> && detail::returns_status<Record>;

/// Runs a backend's per-batch work as CUDA graphs, one per batch size (policy:
/// graph_batch_sizes). Use it as:
///
///     const auto c = graphs.choose(b.batch_size());
///     b.record_padding(c.padding);
///     return graphs.run(stream.get(), c.run_size, [&](cudaStream_t s) { ... return status; });
///
/// A graph replays the exact calls captured, with the same pointers and sizes: everything
/// `record` touches must be at the same address on every execution of that size (buffers the
/// backend owns for its lifetime, sized for the largest batch; not per-batch pool buffers), and
/// only the bytes in them may change. `record` may only queue asynchronous work on the stream it
/// is given: no cudaMalloc, no synchronisation, no cudaMemcpy without Async while capturing, and
/// host memory it copies from or to must be pinned (a pageable copy cannot be captured).
///
/// One cache per backend instance (it is not thread-safe), used from that instance's thread.
class graph_cache {
public:
  /// `sizes` says which sizes get graphs (default: every size seen). With `enabled` false, every
  /// execution runs eagerly and nothing is padded: the same backend code with graphs off.
  explicit graph_cache(graph_batch_sizes sizes = graph_batch_sizes{}, bool enabled = true)
      : sizes_{std::move(sizes)}, enabled_{enabled} {}
  graph_cache(const graph_cache&) = delete;
  graph_cache& operator=(const graph_cache&) = delete;
  graph_cache(graph_cache&&) noexcept = default;
  graph_cache& operator=(graph_cache&&) noexcept = default;
  ~graph_cache() = default;

  /// How to run a batch of `batch_size` elements (see graph_batch_sizes::choose); always eager
  /// and unpadded when the cache is disabled.
  [[nodiscard]] graph_batch_sizes::choice choose(std::int64_t batch_size) const noexcept {
    if (!enabled_) {
      return {batch_size, 0, false};
    }
    return sizes_.choose(batch_size);
  }

  /// Runs the work `record` queues for `run_size` rows on stream `s` (a created stream, not the
  /// legacy default stream, which cannot be captured): replays the graph of `run_size`, or
  /// captures it on first use; runs `record(s)` eagerly when choose(run_size) says no graph.
  /// A failed capture is ended and discarded, and its status returned (the size is tried again
  /// next time). If `record` throws, the capture is ended before the exception propagates.
  template <graph_record Record>
  [[nodiscard]] status run(cudaStream_t s, std::int64_t run_size, Record&& record) {
    if (!choose(run_size).graph) {
      return record(s);
    }
    if (const auto it = graphs_.find(run_size); it != graphs_.end()) {
      SERVEKIT_CUDA_RETURN(cudaGraphLaunch(it->second.get(), s));
      ++replays_;
      return ok_status();
    }
    detail::unique_graph_exec exec;
    if (status captured = capture(s, record, exec); !captured.ok()) {
      return captured;
    }
    const cudaGraphExec_t launchable = exec.get();
    graphs_.emplace(run_size, std::move(exec));
    ++captures_;
    SERVEKIT_CUDA_RETURN(cudaGraphLaunch(launchable, s));
    return ok_status();
  }

  /// Graphs captured so far (including any since dropped by clear()).
  [[nodiscard]] std::size_t captures() const noexcept { return captures_; }
  /// Launches of an already captured graph.
  [[nodiscard]] std::size_t replays() const noexcept { return replays_; }
  /// Graphs held now.
  [[nodiscard]] std::size_t size() const noexcept { return graphs_.size(); }
  [[nodiscard]] bool enabled() const noexcept { return enabled_; }

  /// Drops every graph (the device memory they hold is freed); later runs capture again. For
  /// when the buffers `record` uses have been reallocated. The stream must be idle.
  void clear() noexcept { graphs_.clear(); }

private:
  /// Captures what `record` queues on `s` and instantiates it into `exec`.
  template <class Record>
  static status capture(cudaStream_t s, Record& record, detail::unique_graph_exec& exec) {
    // ThreadLocal: only this thread is barred from unsafe calls (cudaMalloc, synchronisation)
    // while it captures; other instances' threads keep allocating and synchronising freely.
    SERVEKIT_CUDA_RETURN(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    status recorded;
    try {
      recorded = record(s);
    } catch (...) {
      end_capture(s);
      throw;
    }
    cudaGraph_t raw_graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(s, &raw_graph);
    const detail::unique_graph graph{raw_graph}; // null when the capture was invalidated
    if (!recorded.ok()) {
      clear_capture_error();
      return recorded;
    }
    if (ended != cudaSuccess) {
      // The usual cause: `record` made a call that capture forbids, which failed (that call's
      // own error went to `record`, which should have returned it) and invalidated the capture.
      clear_capture_error();
      return to_status(ended, "cudaStreamEndCapture(s, &graph)");
    }
    cudaGraphExec_t raw_exec = nullptr;
    // CUDA 12+ form: flags, no error-node/log-buffer out-parameters.
    SERVEKIT_CUDA_RETURN(cudaGraphInstantiate(&raw_exec, graph.get(), 0ULL));
    exec.reset(raw_exec);
    return ok_status(); // the graph itself is no longer needed: the exec holds its own copy
  }

  /// Ends a capture whose outcome no longer matters, discarding the graph.
  static void end_capture(cudaStream_t s) noexcept {
    cudaGraph_t raw_graph = nullptr;
    static_cast<void>(cudaStreamEndCapture(s, &raw_graph));
    const detail::unique_graph graph{raw_graph};
    clear_capture_error();
  }

  /// A failed capture leaves its error as this thread's last error; it has been reported
  /// through the returned status, so it must not resurface in the next cudaGetLastError (the
  /// usual check after a kernel launch) and be blamed on an innocent kernel.
  static void clear_capture_error() noexcept { static_cast<void>(cudaGetLastError()); }

  graph_batch_sizes sizes_;
  bool enabled_;
  std::map<std::int64_t, detail::unique_graph_exec> graphs_;
  std::size_t captures_ = 0;
  std::size_t replays_ = 0;
};

} // namespace servekit::cuda
