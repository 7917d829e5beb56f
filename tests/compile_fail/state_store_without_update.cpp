// expect: a state store needs `servekit::status update.std::size_t slot, servekit::request&
// names: store_without_update
#include "archetypes/minimal_backend.hpp"

#include <servekit/runtime/model.hpp>

/// A state store without update(): the state would never advance.
struct store_without_update {
  static constexpr bool supports_growable_memory = false;
  explicit store_without_update(const servekit::state_store_config&) {}
  servekit::status bind(std::size_t, bool, servekit::request&) { return servekit::ok_status(); }
  void release(std::size_t) {}
  [[nodiscard]] std::size_t live_sequences() const { return 0; }
  [[nodiscard]] std::size_t bytes_in_use() const { return 0; }
};

[[maybe_unused]] constexpr auto size =
    sizeof(servekit::model<archetypes::minimal_backend,
                           servekit::sequence_batcher<servekit::direct, store_without_update>>);
