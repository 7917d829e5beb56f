// Triton's PyTorch-backend naming rules (libtorch/tensor_naming.hpp): forward() argument names,
// then <name>__<index>, then the config's order for inputs; <name>__<index>, then the config's
// order for outputs; and the mismatches refused at load.
#include <servekit/libtorch/tensor_naming.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace tensor_naming_test {

using servekit::libtorch::bind_inputs;
using servekit::libtorch::bind_outputs;
using servekit::libtorch::named_index;
using servekit::libtorch::naming_convention;
using names = std::vector<std::string>;
using positions = std::vector<std::size_t>;

/// The message bind_inputs or bind_outputs throws ("" when it does not).
template <class F>
std::string error_of(F&& f) {
  try {
    (void)f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(TensorNaming, NamedIndexIsTheDigitsAfterTheFirstDoubleUnderscore) {
  EXPECT_EQ(named_index("INPUT__0"), 0U);
  EXPECT_EQ(named_index("OUTPUT__12"), 12U);
  EXPECT_EQ(named_index("__3"), 3U);
  EXPECT_FALSE(named_index("INPUT0"));
  EXPECT_FALSE(named_index("INPUT__"));
  EXPECT_FALSE(named_index("INPUT__1x"));
  EXPECT_FALSE(named_index("A__B__1")); // Triton reads after the first "__": "B__1"
  EXPECT_FALSE(named_index("INPUT__-1"));
  EXPECT_FALSE(named_index("INPUT__12345678901")); // no forward() has that many arguments
}

TEST(TensorNaming, InputsNamedAsForwardArgumentsGoToThoseArguments) {
  const auto b = bind_inputs(names{"scale", "image"}, names{"image", "scale"});
  EXPECT_EQ(b.convention, naming_convention::forward_argument);
  EXPECT_EQ(b.positions, (positions{1, 0}));
}

TEST(TensorNaming, ForwardArgumentNamesWinOverIndices) {
  // forward(self, x__1, x__0): the names are arguments, so their digits are not positions.
  const auto b = bind_inputs(names{"x__0", "x__1"}, names{"x__1", "x__0"});
  EXPECT_EQ(b.convention, naming_convention::forward_argument);
  EXPECT_EQ(b.positions, (positions{1, 0}));
}

TEST(TensorNaming, InputsNamedWithAnIndexGoToThatPosition) {
  const auto b = bind_inputs(names{"INPUT__1", "INPUT__0", "OTHER__2"}, names{"a", "b", "c"});
  EXPECT_EQ(b.convention, naming_convention::named_index);
  EXPECT_EQ(b.positions, (positions{1, 0, 2}));
}

TEST(TensorNaming, OtherInputNamesFollowTheConfigsOrder) {
  // One name without an index is enough to fall back to the config's order.
  const auto b = bind_inputs(names{"INPUT__1", "second"}, names{"a", "b"});
  EXPECT_EQ(b.convention, naming_convention::config_order);
  EXPECT_EQ(b.positions, (positions{0, 1}));
}

TEST(TensorNaming, InputCountMustEqualForwardsArity) {
  const auto e = error_of([] { return bind_inputs(names{"a"}, names{"a", "b"}); });
  EXPECT_EQ(e, "the config declares 1 input(s) (a) but forward() takes 2 (a, b)");
  EXPECT_NE(error_of([] { return bind_inputs(names{"a", "b", "c"}, names{"a", "b"}); }), "");
  EXPECT_NE(error_of([] { return bind_inputs(names{}, names{"x"}); }).find("(none)"),
            std::string::npos);
}

TEST(TensorNaming, InputIndicesMustBeDistinctAndInRange) {
  EXPECT_EQ(error_of([] {
              return bind_inputs(names{"IN__0", "IN__2"}, names{"a", "b"});
            }),
            "input 'IN__2' names index 2 but forward() has 2 arguments");
  EXPECT_EQ(error_of([] {
              return bind_inputs(names{"IN__1", "X__1"}, names{"a", "b"});
            }),
            "inputs 'IN__1' and 'X__1' both name index 1");
}

TEST(TensorNaming, OutputsNamedWithAnIndexReadThatResult) {
  const auto b = bind_outputs(names{"OUTPUT__1", "OUTPUT__0"}, 2);
  EXPECT_EQ(b.convention, naming_convention::named_index);
  EXPECT_EQ(b.positions, (positions{1, 0}));
  // A config may read fewer results than forward() returns.
  EXPECT_EQ(bind_outputs(names{"OUTPUT__2"}, 3).positions, (positions{2}));
}

TEST(TensorNaming, OtherOutputNamesReadTheResultsInTheConfigsOrder) {
  const auto b = bind_outputs(names{"difference", "sum"}, 2);
  EXPECT_EQ(b.convention, naming_convention::config_order);
  EXPECT_EQ(b.positions, (positions{0, 1}));
}

TEST(TensorNaming, OutputsBeyondForwardsResultsAreRefused) {
  EXPECT_EQ(error_of([] { return bind_outputs(names{"OUTPUT__2"}, 2); }),
            "output 'OUTPUT__2' names index 2 but forward() has 2 results");
  EXPECT_EQ(error_of([] {
              return bind_outputs(names{"OUT__0", "OUT__0x"}, 1);
            }),
            "the config declares 2 outputs (OUT__0, OUT__0x) but forward() returns 1 tensor(s); "
            "outputs not named <name>__<index> are read in the config's order");
  EXPECT_EQ(error_of([] {
              return bind_outputs(names{"A__0", "B__0"}, 2);
            }),
            "outputs 'A__0' and 'B__0' both name index 0");
}

TEST(TensorNaming, ConventionsHaveNames) {
  EXPECT_EQ(to_string(naming_convention::forward_argument), "forward_argument");
  EXPECT_EQ(to_string(naming_convention::named_index), "named_index");
  EXPECT_EQ(to_string(naming_convention::config_order), "config_order");
}

} // namespace tensor_naming_test
