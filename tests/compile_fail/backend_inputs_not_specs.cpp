// expect: a backend.s `inputs` must be
// names: names_only
#include <servekit/runtime/model.hpp>

struct names_only {
  static constexpr const char* inputs[] = {"INPUT0"};
  explicit names_only(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

[[maybe_unused]] constexpr auto size = sizeof(servekit::model<names_only>);
