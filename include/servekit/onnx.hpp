#pragma once
/// \file
/// The ONNX backend (servekit::onnx target): ONNX models run by OpenCV's DNN module, their graph
/// signature for auto-complete, ONNX test-set tensors, and a writer of small graphs. Not part of
/// servekit/servekit.hpp: it needs OpenCV and libprotobuf (link servekit::onnx).

#include <servekit/onnx/graph_builder.hpp>
#include <servekit/onnx/onnx_backend.hpp>
#include <servekit/onnx/onnx_graph.hpp>
