#pragma once
/// \file
/// infer(): `submit` as a future, shared by models and ensembles.

#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/status.hpp>

#include <future>
#include <memory>
#include <string>
#include <utility>

namespace servekit::detail {

/// Calls `submit(request&&, response_sink)` and returns the final response as a future; a
/// rejected request's future holds the failed response.
template <class Submit>
[[nodiscard]] std::future<response> infer_with(Submit&& submit, request&& r) {
  auto promise = std::make_shared<std::promise<response>>();
  std::future<response> future = promise->get_future();
  std::string id = r.id;
  status s = submit(std::move(r), [promise](response&& out) {
    if (out.final) {
      promise->set_value(std::move(out));
    }
  });
  if (!s.ok()) {
    promise->set_value(response::failure(std::move(s), std::move(id)));
  }
  return future;
}

} // namespace servekit::detail
