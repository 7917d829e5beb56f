// expect: a backend.s `max_batch_size` must be
// names: fractional_batches
#include <servekit/runtime/model.hpp>

struct fractional_batches {
  static constexpr double max_batch_size = 8.5;
  explicit fractional_batches(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

[[maybe_unused]] constexpr auto size = sizeof(servekit::model<fractional_batches>);
