// expect: a pinned scheduler core needs `bool take_woken.std::size_t instance.`
// names: no_take_woken_core my_strategy
#include "archetypes/minimal_backend.hpp"

#include <servekit/runtime/model.hpp>
#include <servekit/state/host_state_store.hpp>

/// direct_sequence_core's members, less take_woken.
struct no_take_woken_core {
  explicit no_take_woken_core(const servekit::scheduler_settings&) {}
  servekit::routing enqueue(servekit::pending_ptr&, servekit::time_point) { return {}; }
  bool form_batch(std::size_t, servekit::time_point, servekit::batch_plan&,
                  servekit::early_exits&) {
    return false;
  }
  void batch_done(std::size_t, servekit::time_point, servekit::batch_plan&) {}
  void expire(servekit::time_point, servekit::early_exits&) {}
  void collect_cancelled(servekit::early_exits&) {}
  void drain(servekit::early_exits&) {}
  void flush() {}
  void close_instance(std::size_t, std::vector<servekit::sequence_end>&) {}
  [[nodiscard]] servekit::time_point next_deadline(std::size_t) const { return servekit::never; }
  [[nodiscard]] servekit::time_point next_timeout() const { return servekit::never; }
  [[nodiscard]] std::size_t size() const { return 0; }
  [[nodiscard]] std::size_t slots_per_instance() const { return 1; }
};

/// A sequence batcher strategy whose core is not a pinned_scheduler_core.
struct my_strategy {
  using core_type = no_take_woken_core;
  static constexpr servekit::sequence_strategy strategy = servekit::sequence_strategy::direct;
};

[[maybe_unused]] constexpr auto size =
    sizeof(servekit::model<archetypes::minimal_backend,
                           servekit::sequence_batcher<my_strategy, servekit::host_state_store>>);
