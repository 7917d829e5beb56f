#pragma once
/// \file
/// What every threaded shell does with backend instances: build them, run `execute` catching
/// what it throws, and turn one execution into a statistics record.

#include <servekit/backend/backend.hpp>
#include <servekit/backend/batch.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/runtime/instance_group.hpp>
#include <servekit/runtime/model_options.hpp>
#include <servekit/runtime/resolved_config.hpp>

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace servekit::detail {

/// One backend instance and the thread that runs it.
template <class Backend>
struct backend_instance {
  instance_placement placement;
  instance_context context;
  std::optional<Backend> backend;
  std::thread thread;
};

/// Builds an instance per placement, calling each backend's constructor on this thread.
/// Throws config_error if one throws.
template <class Backend>
[[nodiscard]] std::vector<std::unique_ptr<backend_instance<Backend>>>
create_instances(const model_options& options, const resolved_config& config,
                 const std::vector<instance_placement>& placements) {
  std::vector<std::unique_ptr<backend_instance<Backend>>> out;
  out.reserve(placements.size());
  for (std::size_t i = 0; i < placements.size(); ++i) {
    auto in = std::make_unique<backend_instance<Backend>>();
    in->placement = placements[i];
    in->context.model_name = options.name;
    in->context.model_version = options.version;
    in->context.instance_name = in->placement.name;
    in->context.instance_index = i;
    in->context.kind = in->placement.kind;
    in->context.device_id = in->placement.device_id;
    in->context.max_batch_size = config.max_batch_size;
    in->context.inputs = config.inputs;
    in->context.outputs = config.outputs;
    in->context.parameters = &options.parameters;
    try {
      in->backend.emplace(std::as_const(in->context));
    } catch (const std::exception& e) {
      throw config_error(config_error_code::backend_error, "/instance_group",
                         "instance '" + in->placement.name + "' of model '" + options.name +
                             "' failed to initialize: " + e.what());
    }
    out.push_back(std::move(in));
  }
  return out;
}

/// Runs the backend on `b`. Returns what it threw ("" when it returned normally), so that one
/// failing execution fails its requests, not the instance.
template <class Backend>
[[nodiscard]] std::optional<std::string> run_backend(Backend& backend, batch& b) noexcept {
  try {
    backend.execute(b);
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string{e.what()};
  } catch (...) {
    return std::string{"unknown exception"};
  }
}

/// The statistics record of one execution from `start` to `end`, before its requests are
/// counted (the shell adds each request's outcome).
[[nodiscard]] inline model_statistics::execution
execution_record(std::size_t instance, const batch& b, time_point start, time_point end,
                 std::int64_t elements, std::size_t requests, batch_close_reason reason) noexcept {
  model_statistics::execution e;
  e.instance = instance;
  e.batch_size = static_cast<std::uint64_t>(elements);
  e.requests = requests;
  e.padding_elements = static_cast<std::uint64_t>(b.padding());
  e.reason = reason;
  e.backend_failed = true;
  const time_point input_end =
      b.compute_input_end() == time_point{} ? start : b.compute_input_end();
  const time_point output_start =
      b.compute_output_start() == time_point{} ? end : b.compute_output_start();
  e.compute_input_ns = elapsed_ns(start, input_end);
  e.compute_infer_ns = elapsed_ns(input_end, output_start);
  e.compute_output_ns = elapsed_ns(output_start, end);
  return e;
}

/// Tells the client where the request's time went (ensembles aggregate it per step).
inline void stamp_timing(response& r, const request& req, time_point start,
                         const model_statistics::execution& e) noexcept {
  r.timing = {elapsed_ns(req.arrival, start), e.compute_input_ns, e.compute_infer_ns,
              e.compute_output_ns};
}

/// Counts one request's outcome into `e`.
inline void count_request(model_statistics::execution& e, const request& r, std::int64_t elements,
                          bool ok, time_point start, time_point end) noexcept {
  const std::uint64_t duration_ns = elapsed_ns(r.arrival, end);
  if (ok) {
    ++e.ok_requests;
    e.ok_elements += static_cast<std::uint64_t>(elements);
    e.queue_ns += elapsed_ns(r.arrival, start);
    e.request_ok_ns += duration_ns;
  } else {
    e.request_fail_ns += duration_ns;
  }
}

} // namespace servekit::detail
