// expect: a backend.s `execute_on_any_thread` must be
// names: anywhere_backend
#include <servekit/runtime/model.hpp>

struct anywhere_backend {
  static constexpr int execute_on_any_thread = 1;
  explicit anywhere_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

[[maybe_unused]] constexpr auto size = sizeof(servekit::model<anywhere_backend>);
