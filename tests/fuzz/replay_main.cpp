/// \file
/// A main() for the libFuzzer targets in builds without libFuzzer (g++, the dev, asan and tsan
/// presets): feeds every file named on the command line, and every regular file of every folder
/// named (recursively, in sorted order), to LLVMFuzzerTestOneInput. The empty input runs first,
/// as libFuzzer does, so a target with no corpus still runs once. A finding aborts (the target's
/// own checks, a sanitizer, or an exception escaping); the exit status is then non-zero.
///
///     servekit.fuzz.model_config tests/fuzz/corpus/model_config [more files or folders]

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

bool read_file(const std::filesystem::path& path, std::vector<std::uint8_t>& out) {
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    return false;
  }
  out.assign(std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{});
  return !in.bad();
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg{argv[i]};
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator{arg}) {
        if (entry.is_regular_file()) {
          inputs.push_back(entry.path());
        }
      }
    } else if (std::filesystem::is_regular_file(arg, ec)) {
      inputs.push_back(arg);
    } else {
      std::fprintf(stderr, "replay: %s: no such file or folder\n", argv[i]);
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());

  // libFuzzer calls with a null pointer for the empty input too.
  LLVMFuzzerTestOneInput(nullptr, 0);

  std::vector<std::uint8_t> bytes;
  for (const auto& path : inputs) {
    if (!read_file(path, bytes)) {
      std::fprintf(stderr, "replay: %s: cannot read\n", path.c_str());
      return 2;
    }
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
    // data() of an empty vector may be null, as libFuzzer's empty input is.
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::fprintf(stderr, "replay: %zu inputs (and the empty one) passed\n", inputs.size());
  return 0;
}
