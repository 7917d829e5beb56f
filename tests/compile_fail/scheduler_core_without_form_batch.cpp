// expect: a scheduler core needs `bool form_batch.servekit::time_point now, servekit::batch_plan&
// names: no_form_batch_core my_scheduler
#include "archetypes/minimal_backend.hpp"

#include <servekit/runtime/model.hpp>

/// default_scheduler_core's members, less form_batch: it could queue requests but never run them.
struct no_form_batch_core {
  explicit no_form_batch_core(const servekit::scheduler_settings&) {}
  [[nodiscard]] std::uint32_t level_of(const servekit::request&) const { return 0; }
  [[nodiscard]] std::uint32_t max_queue_size(std::uint32_t) const { return 0; }
  [[nodiscard]] servekit::time_point deadline_of(const servekit::request&) const {
    return servekit::never;
  }
  [[nodiscard]] bool has_room(std::uint32_t) const { return true; }
  [[nodiscard]] std::size_t size() const { return 0; }
  void enqueue(servekit::pending_ptr) {}
  void expire(servekit::time_point, servekit::early_exits&) {}
  void collect_cancelled(servekit::early_exits&) {}
  void drain(servekit::early_exits&) {}
  void flush() {}
  [[nodiscard]] servekit::time_point next_timeout() const { return servekit::never; }
  [[nodiscard]] servekit::time_point next_deadline() const { return servekit::never; }
};

/// A scheduler policy whose core cannot form a batch.
struct my_scheduler {
  using policy_role = servekit::scheduler_role;
  using core_type = no_form_batch_core;
  static constexpr bool batches_requests = false;
};

[[maybe_unused]] constexpr auto size =
    sizeof(servekit::model<archetypes::minimal_backend, my_scheduler>);
