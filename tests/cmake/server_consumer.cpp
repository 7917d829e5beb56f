// A user of servekit::server, the compiled server tier (the consumer projects beside this file
// build it): reads a Triton model config, writes it back, and reads that again, as JSON and as
// config.pbtxt; and uses the generated inference::ModelConfig (servekit::model_config_proto, whose
// header an install carries). Fails (exit 1) unless the readings agree.
#include <servekit/config/model_config.pb.h>
#include <servekit/config/model_config_json.hpp>
#include <servekit/config/model_config_pbtxt.hpp>
#include <servekit/http/server.hpp>

#include <cstdio>

int main() {
  const servekit::model_options first = servekit::load_model_config(
      R"({"name": "add_sub", "backend": "add_sub", "max_batch_size": 8,
          "dynamic_batching": {"preferred_batch_size": [4]}})");
  const servekit::model_options second =
      servekit::load_model_config(servekit::save_model_config(first));
  if (second.name != "add_sub" || second.max_batch_size != 8 || !second.dynamic_batching) {
    std::puts("server_consumer: the config did not survive a round trip");
    return 1;
  }
  const servekit::model_options third =
      servekit::load_model_config_pbtxt(servekit::save_model_config_pbtxt(first));
  if (!(third == first)) {
    std::puts("server_consumer: the config did not survive a round trip through config.pbtxt");
    return 1;
  }
  inference::ModelConfig message;
  message.set_max_batch_size(8);
  if (message.max_batch_size() != 8) {
    std::puts("server_consumer: inference::ModelConfig does not hold a field");
    return 1;
  }
  std::puts("server_consumer: ok");
  return 0;
}
