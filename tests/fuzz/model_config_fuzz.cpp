/// \file
/// libFuzzer target for servekit::load_model_config (config/model_config_json.hpp): arbitrary
/// bytes as a model's config.json.
///
/// The contract checked: the loader either returns model_options or throws config_error; any
/// other exception escapes this function and is a finding (libFuzzer reports the abort). A config
/// that loads must survive save_model_config -> load_model_config unchanged (the header's
/// documented round trip), both as a JSON value and as text, and saving it again must write the
/// same JSON. A mismatch aborts with both documents printed.
///
/// Built with -fsanitize=fuzzer by the fuzz preset; other builds link tests/fuzz/replay_main.cpp
/// and replay corpus/model_config/ (see tests/fuzz/CMakeLists.txt).

#include <servekit/config/model_config_json.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void fail(const char* what, const nlohmann::json& first,
                       const nlohmann::json& second) {
  std::fprintf(stderr, "model_config_fuzz: %s\n--- saved:\n%s\n--- saved again:\n%s\n", what,
               first.dump(2).c_str(), second.dump(2).c_str());
  std::abort();
}

/// Loads a document save_model_config wrote; it must load.
servekit::model_options reload(const nlohmann::json& saved) {
  try {
    return servekit::load_model_config(saved);
  } catch (const servekit::config_error& e) {
    std::fprintf(stderr, "model_config_fuzz: a saved config does not load: %s\n", e.what());
    fail("save_model_config wrote a config load_model_config refuses", saved, nlohmann::json{});
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text{reinterpret_cast<const char*>(data), size};

  servekit::model_options options;
  try {
    options = servekit::load_model_config(text);
  } catch (const servekit::config_error&) {
    return 0; // refused, with a JSON pointer: what most inputs should get
  }

  const nlohmann::json saved = servekit::save_model_config(options);

  const servekit::model_options from_json = reload(saved);
  if (!(from_json == options)) {
    fail("load(save(x)) != x", saved, servekit::save_model_config(from_json));
  }
  if (const nlohmann::json saved_again = servekit::save_model_config(from_json);
      saved_again != saved) {
    fail("save(load(save(x))) != save(x)", saved, saved_again);
  }

  // Through text, as a model repository reads it: dump() then the text overload.
  const std::string saved_text = saved.dump();
  servekit::model_options from_text;
  try {
    from_text = servekit::load_model_config(saved_text);
  } catch (const servekit::config_error& e) {
    std::fprintf(stderr, "model_config_fuzz: saved text does not load: %s\n", e.what());
    fail("the dumped text of save_model_config does not load", saved, nlohmann::json{});
  }
  if (!(from_text == options)) {
    fail("load(dump(save(x))) != x", saved, servekit::save_model_config(from_text));
  }
  return 0;
}
