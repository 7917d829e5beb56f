#pragma once
/// \file
/// The gRPC front end (servekit::grpc, an optional component: SERVEKIT_GRPC, docs/grpc.md).

#include <servekit/grpc/server.hpp>
#include <servekit/grpc/server_options.hpp>
