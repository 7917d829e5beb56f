// expect: a servable needs `servekit::statistics_snapshot statistics.. const`
// names: forwarding_model
#include "archetypes/minimal_backend.hpp"

#include <servekit/repository/any_model.hpp>
#include <servekit/runtime/model.hpp>

/// A hand-written servable that forwards to a model but forgot statistics().
struct forwarding_model {
  using traits = servekit::backend_traits<archetypes::minimal_backend>;
  servekit::model<archetypes::minimal_backend> inner;

  servekit::status submit(servekit::request&& r, servekit::response_sink sink) {
    return inner.submit(std::move(r), std::move(sink));
  }
  void cancel(servekit::cancellation_source& source) { inner.cancel(source); }
  [[nodiscard]] std::string_view name() const { return inner.name(); }
  [[nodiscard]] std::int64_t version() const { return inner.version(); }
  [[nodiscard]] std::int32_t max_batch_size() const { return inner.max_batch_size(); }
  [[nodiscard]] std::span<const servekit::tensor_config> inputs() const { return inner.inputs(); }
  [[nodiscard]] std::span<const servekit::tensor_config> outputs() const { return inner.outputs(); }
};

[[maybe_unused]] inline servekit::any_model make_it() {
  return servekit::any_model::make<forwarding_model>();
}
