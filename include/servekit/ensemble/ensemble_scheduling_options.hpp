#pragma once
/// \file
/// Forwarding header: `ensemble_scheduling_options` is plain data that `model_options` holds, so
/// it lives in schedule/ beside the other scheduling choices' options.

#include <servekit/schedule/ensemble_scheduling_options.hpp>
