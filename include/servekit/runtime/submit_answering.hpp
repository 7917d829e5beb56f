#pragma once
/// \file
/// submit_answering_refusals: a submit whose every outcome reaches one callback. A servable's
/// `submit` answers an accepted request through its sink and a refused one (bad input, full
/// queue, shutting down) by its return value, so a client that keeps count has two places to
/// look; this puts the refusal through the callback too.

#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/status.hpp>

#include <concepts>
#include <string>
#include <utility>

namespace servekit {

/// Submits `r` to `m` (a model<>, an ensemble, a model_ref: anything with
/// `status submit(request&&, response_sink)`). Accepted: `on_response` gets the responses, as a
/// sink would (once, or a decoupled model's stream, the final one last). Refused: `on_response`
/// gets one final response carrying the refusal's status and the request's id, on this thread,
/// before this returns. Returns what submit returned, for a client that wants it anyway.
/// `on_response` is copied (one copy goes into the sink), so make it cheap to copy: capture a
/// shared_ptr, not the state itself.
template <class Servable, class F>
  requires std::copy_constructible<F> && std::invocable<F&, response&&>
      status submit_answering_refusals(Servable& m, request&& r, F on_response) {
    std::string id = r.id; // the request is gone once submitted
    status s = m.submit(std::move(r), response_sink{on_response});
    if (!s.ok()) {
      on_response(response::failure(s, std::move(id)));
    }
    return s;
  }

} // namespace servekit
