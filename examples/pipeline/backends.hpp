// examples/pipeline: the three composing models' backends, Triton's image-pipeline shape in
// miniature. An "image" is 16 UINT8 pixels, small enough to print.
//
//   preprocess: RAW_IMAGE UINT8 [16]       -> PREPROCESSED_OUTPUT FP32 [16]   (pixel / 255)
//   classify:   FORMATTED_IMAGE FP32 [16]  -> CLASSIFICATION_OUTPUT FP32 [4]  (sum per quarter)
//   segment:    FORMATTED_IMAGE FP32 [16]  -> SEGMENTATION_OUTPUT UINT8 [16]  (1 where > 0.5)
//
// Each backend declares its tensors with `static constexpr servekit::tensor_declaration`: servekit
// validates requests against them, and the compile-time ensemble checks its wiring (names,
// data types, dims) against them when main.cpp compiles.
#pragma once

#include <servekit/backend.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace pipeline_example {

inline constexpr std::int64_t pixels = 16;
inline constexpr std::int64_t classes = 4;

// Every tensor a request carries is [batch, dims...]: usually [1, 16] here, but a client may
// send several images in one request, so the backends loop over rows instead of assuming one.
inline std::int64_t rows(const servekit::tensor& t) { return t.shape[0]; }

struct preprocess_backend {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"RAW_IMAGE", servekit::data_type::uint8, {pixels}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"PREPROCESSED_OUTPUT", servekit::data_type::fp32, {pixels}}};

  explicit preprocess_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::tensor& in = b.request(i).input("RAW_IMAGE");
      const auto raw = in.values<std::uint8_t>();
      // Same shape as the input: normalising changes the element type, not the layout.
      auto& norm =
          b.response(i).add_output("PREPROCESSED_OUTPUT", servekit::data_type::fp32, in.shape);
      auto out = norm.values<float>();
      for (std::size_t k = 0; k < raw.size(); ++k) {
        out[k] = static_cast<float>(raw[k]) / 255.0F;
      }
    }
  }
};

struct classify_backend {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"FORMATTED_IMAGE", servekit::data_type::fp32, {pixels}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"CLASSIFICATION_OUTPUT", servekit::data_type::fp32, {classes}}};

  explicit classify_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::tensor& in = b.request(i).input("FORMATTED_IMAGE");
      const auto image = in.values<float>();
      auto& scores = b.response(i).add_output("CLASSIFICATION_OUTPUT", servekit::data_type::fp32,
                                              {rows(in), classes});
      auto out = scores.values<float>();
      std::ranges::fill(out, 0.0F); // add_output hands back uninitialised (pooled) memory
      // A stand-in for a network: class c's score is the brightness of the image's quarter c.
      // Pixel k of the flat [rows, 16] buffer lies in quarter k / 4 of the flat [rows, 4] one,
      // so one loop serves every row.
      constexpr auto quarter = static_cast<std::size_t>(pixels / classes);
      for (std::size_t k = 0; k < image.size(); ++k) {
        out[k / quarter] += image[k];
      }
    }
  }
};

struct segment_backend {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"FORMATTED_IMAGE", servekit::data_type::fp32, {pixels}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"SEGMENTATION_OUTPUT", servekit::data_type::uint8, {pixels}}};

  explicit segment_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::tensor& in = b.request(i).input("FORMATTED_IMAGE");
      const auto image = in.values<float>();
      auto& mask =
          b.response(i).add_output("SEGMENTATION_OUTPUT", servekit::data_type::uint8, in.shape);
      auto out = mask.values<std::uint8_t>();
      // A one-class mask: foreground where the pixel is brighter than half.
      for (std::size_t k = 0; k < image.size(); ++k) {
        out[k] = image[k] > 0.5F ? 1 : 0;
      }
    }
  }
};

} // namespace pipeline_example
