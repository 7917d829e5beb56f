// expect: a batching scheduler needs a backend that allows batching
// names: one_at_a_time dynamic_batcher
#include <servekit/runtime/model.hpp>

struct one_at_a_time {
  static constexpr bool batching = false;
  explicit one_at_a_time(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

[[maybe_unused]] constexpr auto size =
    sizeof(servekit::model<one_at_a_time, servekit::dynamic_batcher<>>);
