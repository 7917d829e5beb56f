#pragma once
// The models the in-process fuzz targets serve (http_server, grpc_infer_request): copies of the
// bundled add_sub, accumulate and repeat_int32 (examples/models), a BYTES identity model `text`,
// with the example server's backends, and a generative model `llm` (tests/archetypes/hash_llm:
// the iteration batcher with a small KV cache, so the generate and OpenAI endpoints reach it). A
// fresh folder per process, because the HTTP target loads and unloads them.

#include <servekit/repository/backend_list.hpp>

#include "archetypes/hash_llm.hpp"

#include "backends/accumulate.hpp"
#include "backends/add_sub.hpp"
#include "backends/identity.hpp"
#include "repeat/repeat_backend.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

namespace servekit_fuzz {

using backends = servekit::backend_list<
    servekit::named_backend<"add_sub", servekit_server::add_sub_backend>,
    servekit::named_backend<"identity", servekit_server::identity_backend>,
    servekit::named_backend<"accumulate", servekit_server::accumulate_backend>,
    servekit::named_backend<"repeat", repeat::backend>,
    servekit::named_backend<"hash_llm", hash_llm_test::hash_llm>>;

/// A new repository folder under the temporary directory, named after `target` and the process.
inline std::filesystem::path make_repository(std::string_view target) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() /
                        ("servekit-" + std::string{target} + "-fuzz-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const fs::path models = fs::path{SERVEKIT_SOURCE_DIR} / "examples" / "models";
  for (const char* name : {"add_sub", "accumulate", "repeat_int32"}) {
    fs::copy(models / name, root / name, fs::copy_options::recursive);
  }
  fs::create_directories(root / "text");
  std::ofstream{root / "text" / "config.json"} << R"({"name": "text", "backend": "identity",
    "max_batch_size": 4, "dynamic_batching": {},
    "input": [{"name": "text_input", "data_type": "TYPE_STRING", "dims": [-1]}],
    "output": [{"name": "text_output", "data_type": "TYPE_STRING", "dims": [-1]}]})";
  fs::create_directories(root / "llm");
  std::ofstream{root / "llm" / "config.pbtxt"} << R"(backend: "hash_llm"
sequence_batching { iterative_sequence: true }
parameters { key: "num_gpu_blocks" value: { string_value: "32" } }
parameters { key: "block_size" value: { string_value: "4" } }
parameters { key: "max_model_len" value: { string_value: "96" } }
parameters { key: "max_num_seqs" value: { string_value: "4" } }
parameters { key: "end_token" value: { string_value: "true" } }
)";
  return root;
}

} // namespace servekit_fuzz
