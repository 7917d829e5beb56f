// The CUDA runtime layer: error mapping and argument checks run on any machine (CI has nvcc and
// no GPU); everything that touches a device runs in the gpu_* suites, which skip without one.

#include <servekit/backend/batch.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/cuda/device.hpp>
#include <servekit/cuda/error.hpp>
#include <servekit/cuda/event.hpp>
#include <servekit/cuda/graph_cache.hpp>
#include <servekit/cuda/memory.hpp>
#include <servekit/cuda/staging.hpp>
#include <servekit/cuda/stream.hpp>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cuda_runtime_test {

namespace sk = servekit;
namespace skc = servekit::cuda;

// -- errors: no device needed ---------------------------------------------------------------

TEST(cuda_error, success_is_ok) { EXPECT_TRUE(skc::to_status(cudaSuccess, "cudaFree(p)").ok()); }

TEST(cuda_error, out_of_memory_is_resource_exhausted_and_names_the_call) {
  const sk::status s = skc::to_status(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)");
  EXPECT_EQ(s.code(), sk::status_code::resource_exhausted);
  EXPECT_EQ(s.message(), std::string{"CUDA call 'cudaMalloc(&p, n)' failed: "
                                     "cudaErrorMemoryAllocation ("} +
                             cudaGetErrorString(cudaErrorMemoryAllocation) + ")");
}

TEST(cuda_error, a_missing_device_or_driver_is_unavailable) {
  for (const cudaError_t err :
       {cudaErrorNoDevice, cudaErrorInsufficientDriver, cudaErrorDevicesUnavailable}) {
    const sk::status s = skc::to_status(err, "cudaSetDevice(0)");
    EXPECT_EQ(s.code(), sk::status_code::unavailable) << s.message();
    EXPECT_NE(s.message().find(cudaGetErrorName(err)), std::string::npos) << s.message();
  }
}

TEST(cuda_error, anything_else_is_internal) {
  const sk::status s = skc::to_status(cudaErrorInvalidValue, "cudaMemcpyAsync(d, h, n, k, s)");
  EXPECT_EQ(s.code(), sk::status_code::internal);
  EXPECT_NE(s.message().find("'cudaMemcpyAsync(d, h, n, k, s)' failed: cudaErrorInvalidValue"),
            std::string::npos)
      << s.message();
}

TEST(cuda_error, throw_on_error_throws_the_status) {
  EXPECT_NO_THROW(skc::throw_on_error(cudaSuccess, "cudaFree(p)"));
  try {
    skc::throw_on_error(cudaErrorMemoryAllocation, "cudaHostAlloc(&p, n, f)");
    FAIL() << "expected cuda_error";
  } catch (const skc::cuda_error& e) {
    EXPECT_EQ(e.error().code(), sk::status_code::resource_exhausted);
    EXPECT_EQ(std::string{e.what()}, e.error().message());
    EXPECT_NE(e.error().message().find("cudaHostAlloc(&p, n, f)"), std::string::npos);
  }
}

sk::status returns_through_the_macro(cudaError_t err, bool& reached_end) {
  SERVEKIT_CUDA_RETURN(err);
  reached_end = true;
  return sk::ok_status();
}

TEST(cuda_error, macros_name_the_call_text) {
  bool reached_end = false;
  const sk::status failed = returns_through_the_macro(cudaErrorInvalidValue, reached_end);
  EXPECT_FALSE(reached_end);
  EXPECT_EQ(failed.code(), sk::status_code::internal);
  EXPECT_NE(failed.message().find("'err'"), std::string::npos) << failed.message();
  EXPECT_TRUE(returns_through_the_macro(cudaSuccess, reached_end).ok());
  EXPECT_TRUE(reached_end);

  EXPECT_THROW(SERVEKIT_CUDA_THROW(cudaErrorInvalidValue), skc::cuda_error);
}

TEST(cuda_device, device_count_never_fails_and_leaves_no_error_behind) {
  const int count = skc::device_count();
  EXPECT_GE(count, 0);
  EXPECT_EQ(skc::device_count(), count);
  if (count > 0) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
}

TEST(cuda_device, without_a_device_constructors_throw_cuda_error) {
  if (skc::device_count() != 0) {
    GTEST_SKIP() << "a CUDA device is visible; this case checks the no-device path";
  }
  EXPECT_THROW(static_cast<void>(skc::device_name(0)), skc::cuda_error);
  EXPECT_THROW(skc::stream{0}, skc::cuda_error);
  EXPECT_THROW(static_cast<void>(skc::allocate_device(0, 256)), skc::cuda_error);
}

// -- a batch like the backend tests build ---------------------------------------------------

sk::request with_input(std::string name, sk::shape s, float first) {
  sk::request r;
  auto t = sk::make_tensor(std::move(name), sk::data_type::fp32, s);
  for (auto& v : t.values<float>()) {
    v = first++;
  }
  r.inputs.push_back(std::move(t));
  return r;
}

/// Two requests of input X, [2,3] (0..5) and [1,3] (6..8), in a model with max_batch_size 8.
class two_request_batch {
public:
  two_request_batch() {
    context_.max_batch_size = 8;
    requests_.push_back(with_input("X", {2, 3}, 0.0F));
    requests_.push_back(with_input("X", {1, 3}, 6.0F));
    batch_.bind(context_, false);
    for (auto& r : requests_) {
      batch_.add(r, r.inputs[0].shape[0], sink_);
    }
  }
  sk::batch& get() noexcept { return batch_; }
  sk::request& request(std::size_t i) noexcept { return requests_[i]; }
  static constexpr std::size_t bytes = 9 * sizeof(float);

private:
  sk::instance_context context_;
  std::vector<sk::request> requests_;
  sk::response_sink sink_ = [](sk::response&&) {};
  sk::batch batch_;
};

TEST(cuda_staging, gather_names_a_request_without_the_input_before_touching_the_device) {
  two_request_batch b;
  std::array<std::byte, two_request_batch::bytes> staging{};
  b.request(1).inputs[0].name = "Y";
  const sk::status s = skc::gather_to_device(b.get(), "X", staging, nullptr, nullptr);
  EXPECT_EQ(s.code(), sk::status_code::invalid_argument);
  EXPECT_EQ(s.message(), "gather_to_device: request 1 has no input 'X'");
}

TEST(cuda_staging, gather_refuses_a_staging_buffer_too_small_for_the_batch) {
  two_request_batch b;
  std::array<std::byte, two_request_batch::bytes - 1> staging{};
  const sk::status s = skc::gather_to_device(b.get(), "X", staging, nullptr, nullptr);
  EXPECT_EQ(s.code(), sk::status_code::invalid_argument);
  EXPECT_NE(s.message().find("too small for input 'X' (36 bytes over the batch)"),
            std::string::npos)
      << s.message();
}

// -- graph_cache paths that run no CUDA call -------------------------------------------------

TEST(cuda_graph_cache, a_disabled_cache_runs_eagerly_and_never_pads) {
  skc::graph_cache cache{skc::graph_batch_sizes{{4, 8}, true}, /*enabled=*/false};
  EXPECT_EQ(cache.choose(3), (skc::graph_batch_sizes::choice{3, 0, false}));
  int calls = 0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(cache
                    .run(nullptr, 3,
                         [&](cudaStream_t) {
                           ++calls;
                           return sk::ok_status();
                         })
                    .ok());
  }
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(cache.captures(), 0U);
  EXPECT_EQ(cache.size(), 0U);
}

TEST(cuda_graph_cache, sizes_without_a_graph_run_eagerly_and_return_the_record_status) {
  skc::graph_cache cache{skc::graph_batch_sizes{{4, 8}}};
  EXPECT_EQ(cache.choose(4), (skc::graph_batch_sizes::choice{4, 0, true}));
  const sk::status s =
      cache.run(nullptr, 5, [](cudaStream_t) { return sk::internal_error("record failed"); });
  EXPECT_EQ(s, sk::internal_error("record failed"));
  EXPECT_EQ(cache.captures(), 0U);
}

// -- on a GPU --------------------------------------------------------------------------------

/// Skips its cases on machines without a visible CUDA device.
class on_gpu : public ::testing::Test {
protected:
  void SetUp() override {
    if (skc::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device visible (servekit::cuda::device_count() == 0)";
    }
  }
};

using gpu_device = on_gpu;
using gpu_stream = on_gpu;
using gpu_memory = on_gpu;
using gpu_staging = on_gpu;
using gpu_graph_cache = on_gpu;

cudaMemoryType memory_type(const void* p) {
  cudaPointerAttributes attributes{};
  skc::throw_on_error(cudaPointerGetAttributes(&attributes, p), "cudaPointerGetAttributes");
  return attributes.type;
}

TEST_F(gpu_device, names_the_device_and_guards_the_current_one) {
  EXPECT_FALSE(skc::device_name(0).empty());
  int before = -1;
  ASSERT_EQ(cudaGetDevice(&before), cudaSuccess);
  {
    const skc::device_guard on{skc::device_count() - 1};
    int now = -1;
    ASSERT_EQ(cudaGetDevice(&now), cudaSuccess);
    EXPECT_EQ(now, skc::device_count() - 1);
  }
  int after = -1;
  ASSERT_EQ(cudaGetDevice(&after), cudaSuccess);
  EXPECT_EQ(after, before);
}

TEST_F(gpu_stream, events_time_work_queued_on_a_stream) {
  skc::stream s{0};
  EXPECT_EQ(s.device(), 0);
  skc::event start{0};
  skc::event end{0};
  sk::buffer d = skc::allocate_device(0, 1 << 20);

  ASSERT_TRUE(start.record(s.get()).ok());
  ASSERT_EQ(cudaMemsetAsync(d.data(), 0, d.size(), s.get()), cudaSuccess);
  ASSERT_TRUE(end.record(s.get()).ok());
  ASSERT_TRUE(end.synchronize().ok());
  float ms = -1.0F;
  ASSERT_TRUE(skc::event::elapsed_ms(start, end, ms).ok());
  EXPECT_GE(ms, 0.0F);

  skc::stream moved = std::move(s);
  EXPECT_TRUE(moved.synchronize().ok());
}

TEST_F(gpu_stream, elapsed_time_of_an_untimed_event_is_an_error_status) {
  skc::stream s{0};
  skc::event start{0, cudaEventDisableTiming};
  skc::event end{0, cudaEventDisableTiming};
  ASSERT_TRUE(start.record(s.get()).ok());
  ASSERT_TRUE(end.record(s.get()).ok());
  ASSERT_TRUE(s.synchronize().ok());
  float ms = 0.0F;
  const sk::status st = skc::event::elapsed_ms(start, end, ms);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cudaEventElapsedTime"), std::string::npos) << st.message();
  static_cast<void>(cudaGetLastError());
}

TEST_F(gpu_memory, device_and_pinned_buffers_say_where_they_live) {
  const sk::buffer d = skc::allocate_device(0, 1000);
  EXPECT_EQ(d.size(), 1000U);
  EXPECT_EQ(d.location(), sk::memory_location::gpu(0));
  EXPECT_EQ(memory_type(d.data()), cudaMemoryTypeDevice);

  sk::buffer p = skc::allocate_pinned(100);
  EXPECT_EQ(p.size(), 100U);
  EXPECT_EQ(p.location(), sk::memory_location::cpu_pinned());
  EXPECT_EQ(memory_type(p.data()), cudaMemoryTypeHost);
  p.bytes()[99] = std::byte{1}; // host-accessible

  EXPECT_TRUE(skc::allocate_device(0, 0).empty());
  EXPECT_EQ(skc::allocate_device(0, 0).location(), sk::memory_location::gpu(0));
}

TEST_F(gpu_memory, pools_allocate_nothing_in_steady_state) {
  skc::device_pool device{skc::device_allocator{0}};
  skc::pinned_pool pinned;
  for (int i = 0; i < 50; ++i) {
    const sk::buffer d = device.acquire(3000);
    const sk::buffer p = pinned.acquire(3000);
    EXPECT_EQ(d.location(), sk::memory_location::gpu(0));
    EXPECT_EQ(p.location(), sk::memory_location::cpu_pinned());
  }
  EXPECT_EQ(device.counters().allocations, 1U);
  EXPECT_EQ(device.counters().reuses, 49U);
  EXPECT_EQ(device.counters().bytes_reserved, 4096U);
  EXPECT_EQ(pinned.counters().allocations, 1U);
  device.trim();
  EXPECT_EQ(device.counters().bytes_reserved, 0U);
}

TEST_F(gpu_memory, an_impossible_allocation_is_resource_exhausted) {
  try {
    static_cast<void>(skc::allocate_device(0, std::size_t{1} << 60));
    FAIL() << "expected cuda_error";
  } catch (const skc::cuda_error& e) {
    EXPECT_EQ(e.error().code(), sk::status_code::resource_exhausted) << e.what();
  }
  static_cast<void>(cudaGetLastError());
}

/// Gathers input X to the device, copies it back and scatters it as output Y.
void round_trip(sk::batch& b) {
  skc::stream s{0};
  skc::pinned_pool pinned;
  const std::size_t bytes = sk::gathered_size(b, "X");
  sk::buffer in = pinned.acquire(bytes);
  sk::buffer out = pinned.acquire(bytes);
  sk::buffer d = skc::allocate_device(0, bytes);

  ASSERT_TRUE(skc::gather_to_device(b, "X", in.bytes(), d.data(), s.get()).ok());
  ASSERT_TRUE(skc::copy_to_host_async(d.data(), out.bytes(), s.get()).ok());
  ASSERT_TRUE(s.synchronize().ok());
  ASSERT_TRUE(skc::scatter_from_pinned(b, "Y", sk::data_type::fp32, {3}, out.bytes()).ok());

  float expected = 0.0F;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const sk::tensor* y = b.response(i).find_output("Y");
    ASSERT_NE(y, nullptr);
    EXPECT_EQ(y->shape, sk::shape({b.request_batch_size(i), 3}));
    EXPECT_EQ(y->data.location(), sk::memory_location::cpu());
    for (const float v : y->values<float>()) {
      EXPECT_EQ(v, expected++);
    }
  }
  EXPECT_EQ(expected, 9.0F);
}

TEST_F(gpu_staging, host_inputs_round_trip_through_the_device) {
  two_request_batch b;
  round_trip(b.get());
}

TEST_F(gpu_staging, inputs_already_on_the_device_are_copied_into_place) {
  two_request_batch b;
  // Move request 0's input to the GPU, as a client or an upstream step would have.
  sk::tensor& x = b.request(0).inputs[0];
  sk::buffer on_device = skc::allocate_device(0, x.data.size());
  ASSERT_EQ(cudaMemcpy(on_device.data(), x.data.data(), x.data.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  x.data = std::move(on_device);
  round_trip(b.get());
}

TEST_F(gpu_graph_cache, the_first_run_of_a_size_captures_and_later_runs_replay) {
  skc::stream s{0};
  sk::buffer d = skc::allocate_device(0, 256);
  sk::buffer h = skc::allocate_pinned(256);
  std::byte* device = d.data();
  // Kernel-free work: fill the device buffer, copy it to pinned memory (both capturable).
  const auto record = [&](cudaStream_t stream) -> sk::status {
    SERVEKIT_CUDA_RETURN(cudaMemsetAsync(device, 0x5A, 256, stream));
    SERVEKIT_CUDA_RETURN(cudaMemcpyAsync(h.data(), device, 256, cudaMemcpyDeviceToHost, stream));
    return sk::ok_status();
  };

  skc::graph_cache cache;
  constexpr int runs = 5;
  for (int i = 0; i < runs; ++i) {
    std::memset(h.data(), 0, 256);
    ASSERT_TRUE(cache.run(s.get(), 8, record).ok());
    ASSERT_TRUE(s.synchronize().ok());
    EXPECT_EQ(h.bytes()[0], std::byte{0x5A}) << "run " << i;
    EXPECT_EQ(h.bytes()[255], std::byte{0x5A}) << "run " << i;
  }
  EXPECT_EQ(cache.captures(), 1U);
  EXPECT_EQ(cache.replays(), static_cast<std::size_t>(runs - 1));
  EXPECT_EQ(cache.size(), 1U);

  ASSERT_TRUE(cache.run(s.get(), 16, record).ok());
  ASSERT_TRUE(s.synchronize().ok());
  EXPECT_EQ(cache.captures(), 2U);
  EXPECT_EQ(cache.size(), 2U);
}

TEST_F(gpu_graph_cache, a_failed_capture_is_discarded_and_leaves_the_stream_usable) {
  skc::stream s{0};
  sk::buffer d = skc::allocate_device(0, 256);
  std::byte* device = d.data();
  skc::graph_cache cache;

  // record's own failure.
  EXPECT_EQ(cache.run(s.get(), 1, [](cudaStream_t) { return sk::internal_error("nope"); }),
            sk::internal_error("nope"));
  // A call that capture forbids: synchronising the capturing stream.
  const sk::status forbidden = cache.run(s.get(), 1, [&](cudaStream_t stream) -> sk::status {
    SERVEKIT_CUDA_RETURN(cudaMemsetAsync(device, 0, 256, stream));
    SERVEKIT_CUDA_RETURN(cudaStreamSynchronize(stream));
    return sk::ok_status();
  });
  EXPECT_FALSE(forbidden.ok());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // An exception.
  EXPECT_THROW(
      static_cast<void>(cache.run(
          s.get(), 1, [](cudaStream_t) -> sk::status { throw std::runtime_error{"backend bug"}; })),
      std::runtime_error);

  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusActive;
  ASSERT_EQ(cudaStreamIsCapturing(s.get(), &capturing), cudaSuccess);
  EXPECT_EQ(capturing, cudaStreamCaptureStatusNone);
  EXPECT_EQ(cache.size(), 0U);
  EXPECT_EQ(cache.captures(), 0U);

  // The size is captured on the next good run.
  EXPECT_TRUE(cache
                  .run(s.get(), 1,
                       [&](cudaStream_t stream) -> sk::status {
                         SERVEKIT_CUDA_RETURN(cudaMemsetAsync(device, 1, 256, stream));
                         return sk::ok_status();
                       })
                  .ok());
  EXPECT_TRUE(s.synchronize().ok());
  EXPECT_EQ(cache.captures(), 1U);
}

TEST_F(gpu_graph_cache, padded_sizes_share_a_graph) {
  skc::stream s{0};
  sk::buffer d = skc::allocate_device(0, 1024);
  std::byte* device = d.data();
  skc::graph_cache cache{skc::graph_batch_sizes{{4, 8}, /*pad=*/true}};
  for (const std::int64_t n : {1, 2, 3, 4, 5, 8}) {
    const auto c = cache.choose(n);
    ASSERT_TRUE(c.graph);
    ASSERT_TRUE(cache
                    .run(s.get(), c.run_size,
                         [&](cudaStream_t stream) -> sk::status {
                           SERVEKIT_CUDA_RETURN(cudaMemsetAsync(
                               device, 0, static_cast<std::size_t>(c.run_size) * 128, stream));
                           return sk::ok_status();
                         })
                    .ok());
  }
  ASSERT_TRUE(s.synchronize().ok());
  EXPECT_EQ(cache.captures(), 2U);
  EXPECT_EQ(cache.replays(), 4U);
}

} // namespace cuda_runtime_test
