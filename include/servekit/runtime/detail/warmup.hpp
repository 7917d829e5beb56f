#pragma once
/// \file
/// model_warmup: builds each warmup sample's request (zero, random or file data) and runs it
/// on one backend instance before the model serves, as Triton does. A failure is a
/// config_error at "/model_warmup/<k>" naming the sample and the instance.

#include <servekit/backend/backend.hpp>
#include <servekit/backend/batch.hpp>
#include <servekit/backend/instance_context.hpp>
#include <servekit/backend/sequence_controls.hpp>
#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/runtime/model_options.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace servekit::detail {

/// The pointer of warmup sample `k`: "/model_warmup/<k>".
[[nodiscard]] SERVEKIT_DECL std::string warmup_path(std::size_t k);

/// An input name as a JSON pointer token (RFC 6901: '~' is "~0", '/' is "~1").
[[nodiscard]] SERVEKIT_DECL std::string warmup_pointer_token(std::string_view name);

/// "warmup sample 'name' (model_warmup[k])".
[[nodiscard]] SERVEKIT_DECL std::string warmup_sample_label(const model_warmup_options& sample,
                                                            std::size_t k);

/// The request of warmup sample `k`: every input of `batch_size` rows (each row the sample's
/// data) when the model batches, or the bare dims when it does not (max_batch_size 0). Zero,
/// random (reproducible: seeded by `k`) or file data (`<model folder>/warmup/<file>`), as Triton
/// makes it. Throws config_error at the sample's field for a sample the model cannot take.
[[nodiscard]] SERVEKIT_DECL request
make_warmup_request(const model_warmup_options& sample, std::size_t k, std::int32_t max_batch_size,
                    std::span<const tensor_config> declared_inputs,
                    std::span<const std::string> sequence_inputs, const std::string& directory);

/// Runs every sample of `options.model_warmup` (each `count` times, 0 meaning once; samples of
/// batch_size 0 skipped, as Triton does) on `backend`. Each execution is recorded into `stats`
/// when given. Throws config_error on the first failure: the backend threw, or a response
/// (final or partial) is an error.
template <class Backend>
void run_warmup(Backend& backend, const instance_context& context, const model_options& options,
                std::int32_t max_batch_size, std::span<const tensor_config> declared_inputs,
                model_statistics* stats) {
  // Under the sequence batcher a sample may list the control inputs and the implicit-state
  // inputs as well, as Triton requires of warmup samples for sequence models.
  std::vector<std::string> sequence_inputs;
  if (options.sequence_batching) {
    for (const auto& control : options.sequence_batching->control_input) {
      sequence_inputs.push_back(control.name);
    }
    for (const auto& state : options.sequence_batching->state) {
      sequence_inputs.push_back(state.input_name);
    }
  }
  for (std::size_t k = 0; k < options.model_warmup.size(); ++k) {
    const auto& sample = options.model_warmup[k];
    if (sample.batch_size == 0) {
      continue;
    }
    const std::string where = warmup_sample_label(sample, k) + " failed on instance '" +
                              std::string{context.instance_name} + "' of model '" + options.name +
                              "': ";
    const std::uint32_t runs = sample.count == 0 ? 1 : sample.count;
    for (std::uint32_t run = 0; run < runs; ++run) {
      request r = make_warmup_request(sample, k, max_batch_size, declared_inputs, sequence_inputs,
                                      options.directory);
      std::optional<status> partial_error;
      response_sink sink{[&partial_error](response&& partial) {
        if (!partial.ok() && !partial_error) {
          partial_error = partial.status;
        }
      }};
      const sequence_controls controls{true, true, true, 0};
      batch b;
      b.bind(context, backend_traits<Backend>::decoupled);
      if (options.sequence_batching) {
        b.bind_sequence(&controls);
      }
      const std::int64_t elements = max_batch_size > 0 ? sample.batch_size : 1;
      b.add(r, elements, sink);
      const time_point start = clock::now();
      std::optional<std::string> thrown;
      try {
        backend.execute(b);
      } catch (const std::exception& e) {
        thrown = e.what();
      } catch (...) {
        thrown = "unknown exception";
      }
      if (stats != nullptr) {
        stats->record_warmup(elapsed_ns(start, clock::now()));
      }
      if (thrown) {
        throw config_error(config_error_code::backend_error, warmup_path(k), where + *thrown);
      }
      if (partial_error) {
        throw config_error(config_error_code::backend_error, warmup_path(k),
                           where + partial_error->message());
      }
      if (!b.response(0).ok()) {
        throw config_error(config_error_code::backend_error, warmup_path(k),
                           where + b.response(0).status.message());
      }
    }
  }
}

} // namespace servekit::detail

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/runtime/impl/warmup.ipp>
#endif
