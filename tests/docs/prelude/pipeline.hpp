#pragma once
// Prelude of README.md's ensemble block: the composing models of examples/pipeline.
#include "pipeline/backends.hpp"

using preprocess =
    servekit::model<pipeline_example::preprocess_backend, servekit::dynamic_batcher<>>;
using classify = servekit::model<pipeline_example::classify_backend, servekit::dynamic_batcher<>,
                                 servekit::instance_group<2>>;
using segment = servekit::model<pipeline_example::segment_backend, servekit::dynamic_batcher<>>;
