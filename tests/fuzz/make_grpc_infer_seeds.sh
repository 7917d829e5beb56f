#!/usr/bin/env bash
# Writes the seed corpus of the grpc_infer_request fuzz target (tests/fuzz/corpus/
# grpc_infer_request/): each seed is an inference.ModelInferRequest in protobuf's binary wire
# format, encoded by protoc from the text-format request below. Run it after changing one:
#   bash tests/fuzz/make_grpc_infer_seeds.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=tests/fuzz/corpus/grpc_infer_request
mkdir -p "$out"
rm -f "$out"/*.bin

seed() { # seed NAME TEXT: encodes TEXT as $out/NAME.bin
  printf '%s\n' "$2" | protoc --encode=inference.ModelInferRequest -Iproto \
    proto/servekit/grpc/grpc_service.proto > "$out/$1.bin"
}

sixteen_floats='fp32_contents: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]'
# 16 FP32 values as raw little-endian bytes (64 bytes): 1.0f repeated.
raw_ones=$(printf '\\000\\000\\200\\077%.0s' $(seq 16))

seed add_sub_typed "model_name: 'add_sub' id: 'typed'
inputs { name: 'INPUT0' datatype: 'FP32' shape: [1, 16] contents { $sixteen_floats } }
inputs { name: 'INPUT1' datatype: 'FP32' shape: [1, 16] contents { $sixteen_floats } }"

seed add_sub_raw "model_name: 'add_sub' model_version: '1'
inputs { name: 'INPUT0' datatype: 'FP32' shape: [1, 16] }
inputs { name: 'INPUT1' datatype: 'FP32' shape: [1, 16] }
raw_input_contents: '$raw_ones' raw_input_contents: '$raw_ones'
outputs { name: 'OUTPUT1' }"

seed add_sub_batch_of_two "model_name: 'add_sub'
inputs { name: 'INPUT0' datatype: 'FP32' shape: [2, 16] }
inputs { name: 'INPUT1' datatype: 'FP32' shape: [2, 16] }
raw_input_contents: '$raw_ones$raw_ones' raw_input_contents: '$raw_ones$raw_ones'
parameters { key: 'priority' value { uint64_param: 1 } }
parameters { key: 'timeout' value { int64_param: 1000000 } }"

seed add_sub_cancelled "model_name: 'add_sub' id: 'cancel-me'
inputs { name: 'INPUT0' datatype: 'FP32' shape: [1, 16] contents { $sixteen_floats } }
inputs { name: 'INPUT1' datatype: 'FP32' shape: [1, 16] contents { $sixteen_floats } }"

seed add_sub_wrong_type "model_name: 'add_sub'
inputs { name: 'INPUT0' datatype: 'INT32' shape: [1, 16] contents { int_contents: [1, 2] } }
inputs { name: 'INPUT1' datatype: 'FP32' shape: [1, 16] }
raw_input_contents: '' raw_input_contents: '$raw_ones'
outputs { name: 'NOPE' }"

seed accumulate_sequence_start "model_name: 'accumulate' id: 'seq'
parameters { key: 'sequence_id' value { int64_param: 42 } }
parameters { key: 'sequence_start' value { bool_param: true } }
inputs { name: 'INPUT' datatype: 'INT32' shape: [1, 1] contents { int_contents: [5] } }"

seed accumulate_sequence_end "model_name: 'accumulate'
parameters { key: 'sequence_id' value { string_param: 'corr-7' } }
parameters { key: 'sequence_start' value { bool_param: true } }
parameters { key: 'sequence_end' value { bool_param: true } }
parameters { key: 'custom' value { double_param: 0.5 } }
inputs { name: 'INPUT' datatype: 'INT32' shape: [1, 1] }
raw_input_contents: '\\007\\000\\000\\000'"

seed text_bytes "model_name: 'text'
inputs { name: 'text_input' datatype: 'BYTES' shape: [1, 2]
         contents { bytes_contents: ['hello', 'w\\303\\266rld'] } }"

seed text_raw_bytes "model_name: 'text'
inputs { name: 'text_input' datatype: 'BYTES' shape: [1, 1] }
raw_input_contents: '\\005\\000\\000\\000hello'"

seed repeat_decoupled "model_name: 'repeat_int32'
inputs { name: 'IN' datatype: 'INT32' shape: [2] contents { int_contents: [1, 2] } }"

seed unknown_model "model_name: 'nope' model_version: '3'"
seed bad_version "model_name: 'add_sub' model_version: '-2'"

ls "$out"
