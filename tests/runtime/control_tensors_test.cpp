// The control inputs the sequence batcher writes into each request: one [1] tensor per
// configured control, in the configured encoding.
#include <servekit/runtime/detail/control_tensors.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace control_tensors_test {

using servekit::control_kind;
using servekit::data_type;

servekit::control_input control(const char* name, control_kind kind) {
  servekit::control_input input;
  input.name = name;
  input.control.emplace_back();
  input.control.back().kind = kind;
  return input;
}

servekit::sequence_batching_options with_corrid(data_type type) {
  servekit::sequence_batching_options o;
  o.control_input.push_back(control("CORRID", control_kind::sequence_corrid));
  o.control_input.back().control[0].data_type = type;
  return o;
}

TEST(control_tensors, boolean_controls_use_their_false_true_pairs) {
  servekit::sequence_batching_options o;
  o.control_input.push_back(control("START", control_kind::sequence_start));
  o.control_input.back().control[0].int32_false_true = {5, 7};
  o.control_input.push_back(control("END", control_kind::sequence_end));
  o.control_input.back().control[0].fp32_false_true = {-1.0F, 2.5F};
  o.control_input.push_back(control("READY", control_kind::sequence_ready));
  o.control_input.back().control[0].bool_false_true = {true, false}; // inverted on purpose
  const servekit::detail::control_tensors controls{o};

  servekit::request r;
  controls.write(r, {true, false, true, 3}, std::uint64_t{9});
  ASSERT_EQ(r.inputs.size(), 3U);
  EXPECT_EQ(r.inputs[0].name, "START");
  EXPECT_EQ(r.inputs[0].type, data_type::int32);
  EXPECT_EQ(r.inputs[0].shape, servekit::shape{1});
  EXPECT_EQ(r.inputs[0].values<std::int32_t>()[0], 7);
  EXPECT_EQ(r.inputs[1].type, data_type::fp32);
  EXPECT_EQ(r.inputs[1].values<float>()[0], -1.0F);
  EXPECT_EQ(r.inputs[2].type, data_type::boolean);
  EXPECT_EQ(r.inputs[2].values<std::uint8_t>()[0], 0); // ready, encoded as the "true" value
}

TEST(control_tensors, corrid_takes_the_configured_integer_width) {
  const std::uint64_t id = 0x1'0000'0005ULL;
  for (const auto type : {data_type::uint64, data_type::int64}) {
    servekit::request r;
    servekit::detail::control_tensors{with_corrid(type)}.write(r, {}, id);
    ASSERT_EQ(r.inputs.size(), 1U);
    EXPECT_EQ(r.inputs[0].data.size(), 8U);
    EXPECT_EQ(r.inputs[0].values<std::uint64_t>()[0], id);
  }
  for (const auto type : {data_type::uint32, data_type::int32}) {
    servekit::request r;
    servekit::detail::control_tensors{with_corrid(type)}.write(r, {}, id);
    EXPECT_EQ(r.inputs[0].data.size(), 4U);
    EXPECT_EQ(r.inputs[0].values<std::uint32_t>()[0], 5U); // the low 32 bits, as Triton
  }
}

TEST(control_tensors, string_corrid_is_one_bytes_element) {
  const servekit::detail::control_tensors controls{with_corrid(data_type::bytes)};
  for (const auto& [id, text] :
       {std::pair<servekit::correlation_id, std::string>{"session-7", "session-7"},
        {std::uint64_t{42}, "42"}}) {
    servekit::request r;
    controls.write(r, {}, id);
    ASSERT_EQ(r.inputs.size(), 1U);
    const auto elements = servekit::decode_bytes(r.inputs[0].data.bytes());
    ASSERT_TRUE(elements.has_value());
    ASSERT_EQ(elements->size(), 1U);
    EXPECT_EQ((*elements)[0], text);
  }
}

} // namespace control_tensors_test
