#pragma once
/// \file
/// The http layer: the KServe v2 codec, route parsing, the server's flags and the Beast front
/// end over a model repository, and the statistics' JSON and Prometheus text (needs Boost.Beast,
/// nlohmann-json and fmt: link servekit::server).

#include <servekit/http/decoded_infer_request.hpp>
#include <servekit/http/endpoints.hpp>
#include <servekit/http/generate_codec.hpp>
#include <servekit/http/kserve_codec.hpp>
#include <servekit/http/kserve_metadata.hpp>
#include <servekit/http/kserve_request.hpp>
#include <servekit/http/kserve_response.hpp>
#include <servekit/http/prometheus.hpp>
#include <servekit/http/routes.hpp>
#include <servekit/http/server.hpp>
#include <servekit/http/server_flags.hpp>
#include <servekit/http/server_options.hpp>
#include <servekit/http/statistics_json.hpp>
