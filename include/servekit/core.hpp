#pragma once
/// \file
/// The core layer: vocabulary types every other layer speaks. Knows no threads.

#include <servekit/core/assert.hpp>
#include <servekit/core/batch_close_reason.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/cancellation.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/fixed_string.hpp>
#include <servekit/core/parameters.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/request_builder.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/response_sink.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
