#pragma once
/// \file
/// batch: the view of one execution that a backend's `execute(batch&)` receives.

#include <servekit/backend/instance_context.hpp>
#include <servekit/backend/response_sender.hpp>
#include <servekit/backend/sequence_controls.hpp>
#include <servekit/core/assert.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace servekit {

/// The requests of one execution and one response slot per request. The backend reads
/// `request(i)` (it may move tensors out of it: the request is its until execute returns) and
/// fills `response(i)`; the model sends every response as final after execute returns. A
/// decoupled backend may also `send_partial(i, ...)` during execute, or `take_sender(i)` to
/// answer request i itself, from any thread, after execute returned.
///
/// Optional timing marks split the execution into Triton's compute_input, compute_infer and
/// compute_output statistics; without them the whole execution counts as compute_infer.
class batch {
public:
  batch() = default;
  batch(const batch&) = delete;
  batch& operator=(const batch&) = delete;

  /// Number of requests in the batch.
  [[nodiscard]] std::size_t size() const noexcept { return requests_.size(); }
  [[nodiscard]] bool empty() const noexcept { return requests_.empty(); }

  /// Sum of the requests' batch dimensions (each request counts 1 when the model does not batch).
  [[nodiscard]] std::int64_t batch_size() const noexcept { return total_elements_; }

  /// The batch dimension of request `i` (1 when the model does not batch).
  [[nodiscard]] std::int64_t request_batch_size(std::size_t i) const noexcept {
    return elements_[i];
  }

  [[nodiscard]] servekit::request& request(std::size_t i) noexcept { return *requests_[i]; }
  [[nodiscard]] const servekit::request& request(std::size_t i) const noexcept {
    return *requests_[i];
  }
  [[nodiscard]] servekit::response& response(std::size_t i) noexcept { return responses_[i]; }

  [[nodiscard]] const instance_context& instance() const noexcept { return *instance_; }

  /// Under the sequence batcher: the control values of entry `i` (START, END, READY, its
  /// slot), the same values the configured control inputs carry. An entry whose `ready` is
  /// false is padding: its request is a stand-in and its response is discarded.
  [[nodiscard]] const sequence_controls& sequence(std::size_t i) const noexcept {
    SERVEKIT_ASSERT(sequence_ != nullptr, "sequence() needs a model run by the sequence batcher");
    return sequence_[i];
  }
  /// Whether the batch comes from the sequence batcher (sequence() is available).
  [[nodiscard]] bool has_sequences() const noexcept { return sequence_ != nullptr; }
  /// The correlation id of entry `i` (empty for padding).
  [[nodiscard]] const correlation_id& correlation(std::size_t i) const noexcept {
    return requests_[i]->sequence_id;
  }

  /// Sends a non-final response of request `i` now (decoupled backends only). Not ok when the
  /// request already has its final response (e.g. its final_response_timeout passed).
  status send_partial(std::size_t i, servekit::response&& r) {
    SERVEKIT_ASSERT(decoupled_, "send_partial() needs a backend whose traits say decoupled");
    if (i < decoupled_requests_.size() && decoupled_requests_[i] != nullptr) {
      return decoupled_requests_[i]->send(std::move(r), false);
    }
    r.final = false;
    if (r.id.empty()) {
      r.id = requests_[i]->id;
    }
    sinks_[i]->send(std::move(r));
    return {};
  }

  /// Takes over answering request `i` (decoupled backends only, once per request): the model
  /// will not send `response(i)`; the backend sends through the sender, from any thread, until
  /// the final response. Read (or move out) what the request holds before execute returns.
  [[nodiscard]] response_sender take_sender(std::size_t i) {
    SERVEKIT_ASSERT(decoupled_, "take_sender() needs a backend whose traits say decoupled");
    SERVEKIT_ASSERT(i < decoupled_requests_.size() && decoupled_requests_[i] != nullptr,
                    "take_sender() needs a request run by a model (not a stand-in)");
    SERVEKIT_ASSERT(!taken_[i], "take_sender() called twice for one request");
    taken_[i] = true;
    return response_sender{decoupled_requests_[i]->shared_from_this()};
  }

  /// Whether the backend took request `i`'s sender.
  [[nodiscard]] bool sender_taken(std::size_t i) const noexcept {
    return i < taken_.size() && taken_[i];
  }

  /// Reports that the backend ran `elements` rows of padding beyond batch_size(), e.g. to
  /// replay a CUDA graph captured for a larger size. Statistics count it (padding_elements,
  /// padded_executions); the inference counts stay those of the requests.
  void record_padding(std::int64_t elements) noexcept {
    SERVEKIT_ASSERT(elements >= 0, "record_padding() with a negative count");
    padding_ += elements;
  }
  /// Padding rows reported for this execution.
  [[nodiscard]] std::int64_t padding() const noexcept { return padding_; }

  /// Marks the end of input preparation (gather, host-to-device copies).
  void mark_compute_input_end() noexcept { input_end_ = clock::now(); }
  /// Marks the start of output handling (device-to-host copies, scatter).
  void mark_compute_output_start() noexcept { output_start_ = clock::now(); }

  // -- used by the shells that run backends -------------------------------------------------

  /// Empties the batch for reuse, keeping capacity (no allocation in steady state).
  void clear() noexcept {
    requests_.clear();
    elements_.clear();
    responses_.clear();
    sinks_.clear();
    decoupled_requests_.clear();
    taken_.clear();
    total_elements_ = 0;
    padding_ = 0;
    sequence_ = nullptr;
    input_end_ = {};
    output_start_ = {};
  }
  void bind(const instance_context& instance, bool decoupled) noexcept {
    instance_ = &instance;
    decoupled_ = decoupled;
  }
  /// One control entry per request, kept alive by the caller until clear().
  void bind_sequence(const sequence_controls* controls) noexcept { sequence_ = controls; }
  void add(servekit::request& r, std::int64_t elements, response_sink& sink) {
    requests_.push_back(&r);
    elements_.push_back(elements);
    sinks_.push_back(&sink);
    responses_.emplace_back();
    total_elements_ += elements;
  }
  /// Decoupled models: entry `i` answers through `state` (null for a padding entry). Call for
  /// every entry, in order, after add().
  void bind_decoupled(std::shared_ptr<detail::response_channel> state) {
    decoupled_requests_.push_back(std::move(state));
    taken_.push_back(false);
  }
  /// Entry `i`'s state, as bound.
  [[nodiscard]] detail::response_channel* decoupled_state(std::size_t i) const noexcept {
    return decoupled_requests_[i].get();
  }
  [[nodiscard]] time_point compute_input_end() const noexcept { return input_end_; }
  [[nodiscard]] time_point compute_output_start() const noexcept { return output_start_; }

private:
  std::vector<servekit::request*> requests_;
  std::vector<std::int64_t> elements_;
  std::vector<servekit::response> responses_;
  std::vector<response_sink*> sinks_;
  std::vector<std::shared_ptr<detail::response_channel>> decoupled_requests_; // decoupled only
  std::vector<bool> taken_;
  std::int64_t total_elements_ = 0;
  std::int64_t padding_ = 0;
  const instance_context* instance_ = nullptr;
  const sequence_controls* sequence_ = nullptr;
  bool decoupled_ = false;
  time_point input_end_{};
  time_point output_start_{};
};

} // namespace servekit
