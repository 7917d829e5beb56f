// expect: a backend needs a public constructor `explicit B.const servekit::instance_context&.`
// names: default_constructed_only
#include <servekit/runtime/model.hpp>

struct default_constructed_only {
  default_constructed_only() = default;
  void execute(servekit::batch&) {}
};

[[maybe_unused]] constexpr auto size = sizeof(servekit::model<default_constructed_only>);
