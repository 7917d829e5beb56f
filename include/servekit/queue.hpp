#pragma once
/// \file
/// The queue layer: priority levels, queue policies and the lock-free intake.

#include <servekit/queue/intake.hpp>
#include <servekit/queue/pending_request.hpp>
#include <servekit/queue/queue_policy.hpp>
#include <servekit/queue/request_queue.hpp>
