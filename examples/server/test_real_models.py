#!/usr/bin/env python3
"""ctest example.server.real_models: servekit-server serving the bundled repository as
scripts/demo.sh serves it, and its real models (TorchScript and ONNX) answering over HTTP.

    test_real_models.py SERVER_BINARY EXAMPLES_MODELS

Checks that every bundled model loads READY, and then, with KServe v2 JSON requests like the ones
demo.sh prints:
  image_classifier       (TorchScript, 2 instances, dynamic batching): the scores of the network
                         computed here in plain Python from the same seeded weights
  image_classifier_onnx  (ONNX): its config completed from the graph, the same scores
  image_ensemble         (UINT8 image -> image_preprocess -> image_classifier_onnx): the scores of
                         the preprocessed image
  gru_sequence           (a GRU cell with implicit state): the hidden state carries from one
                         request of a sequence to the next, and a new sequence starts afresh
  tiny_lm                (a TorchScript transformer under the iteration batcher): the same
                         tokens through /generate, /generate_stream (one event per token),
                         /v1/completions and its stream, several prompts at once

Only the standard library.
"""

import http.client
import json
import math
import os
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_libtorch_server import (  # noqa: E402
    SeededValues, check, classifier_scores, get, post, serve_and_run)

REAL_MODELS = ("image_classifier", "image_classifier_onnx", "image_preprocess", "image_ensemble",
               "gru_sequence", "tiny_lm")


def expect_scores(got, images, what):
    for k, image in enumerate(images):
        expected = classifier_scores(image)
        row = got[k * 10 : (k + 1) * 10]
        for c in range(10):
            check(math.isclose(row[c], expected[c], abs_tol=1e-4),
                  f"{what}: image {k} class {c}: got {row[c]}, expected {expected[c]}")


def gru_step(address, sequence_id, x, start=False, end=False):
    parameters = {"sequence_id": sequence_id}
    if start:
        parameters["sequence_start"] = True
    if end:
        parameters["sequence_end"] = True
    status, body = post(
        address,
        "/v2/models/gru_sequence/infer",
        {"parameters": parameters,
         "inputs": [{"name": "INPUT__0", "shape": [1, 3], "datatype": "FP32", "data": x}]},
    )
    check(status == 200, f"gru_sequence infer: {status} {body}")
    out = body["outputs"]
    check(len(out) == 1 and out[0]["name"] == "OUTPUT__0" and out[0]["shape"] == [1, 4],
          f"gru_sequence outputs (the state stays in the server): {out}")
    return out[0]["data"]


def run(address, log):
    for model in REAL_MODELS:
        check(f"model '{model}' version 1: READY" in log, f"model {model} not READY:\n{log}")

    images = [SeededValues(seed).take(64) for seed in (11, 12, 13)]
    status, body = post(
        address,
        "/v2/models/image_classifier/infer",
        {"inputs": [{"name": "INPUT__0", "shape": [3, 1, 8, 8], "datatype": "FP32",
                     "data": images[0] + images[1] + images[2]}]},
    )
    check(status == 200, f"image_classifier infer: {status} {body}")
    expect_scores(body["outputs"][0]["data"], images, "image_classifier")

    status, config = get(address, "/v2/models/image_classifier_onnx/config")
    check(status == 200, f"image_classifier_onnx config: {status} {config}")
    check([(i["name"], i["data_type"], i["dims"]) for i in config["input"]]
          == [("image", "TYPE_FP32", [1, 8, 8])], f"auto-completed input: {config['input']}")
    check([(o["name"], o["dims"]) for o in config["output"]] == [("scores", [10])],
          f"auto-completed output: {config['output']}")
    status, body = post(
        address,
        "/v2/models/image_classifier_onnx/infer",
        {"inputs": [{"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32",
                     "data": images[0]}]},
    )
    check(status == 200, f"image_classifier_onnx infer: {status} {body}")
    expect_scores(body["outputs"][0]["data"], images[:1], "image_classifier_onnx")

    pixels = [(i * 37 + 11) % 256 for i in range(64)]
    status, body = post(
        address,
        "/v2/models/image_ensemble/infer",
        {"inputs": [{"name": "IMAGE", "shape": [1, 8, 8], "datatype": "UINT8", "data": pixels}]},
    )
    check(status == 200, f"image_ensemble infer: {status} {body}")
    out = body["outputs"][0]
    check(out["name"] == "SCORES" and out["shape"] == [1, 10], f"image_ensemble output: {out}")
    # image_preprocess in float32, as torch computes it: p / 255 - 0.5
    expect_scores(out["data"], [[p / 255.0 - 0.5 for p in pixels]], "image_ensemble")

    x = [0.25, -0.5, 0.75]
    first = gru_step(address, 7, x, start=True)
    second = gru_step(address, 7, x)
    check(any(abs(a - b) > 1e-6 for a, b in zip(first, second)),
          f"the same input twice in a sequence gave the same state: {first}")
    gru_step(address, 7, x, end=True)
    again = gru_step(address, 8, x, start=True, end=True)
    check(all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(first, again)),
          f"a new sequence did not start from a zero state: {again} vs {first}")
    check_tiny_lm(address)
    return 0


def stream_events(address, path, body):
    """The data of each server-sent event of a streamed POST."""
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    check(response.status == 200, f"{path}: {response.status}")
    text = response.read().decode()
    return [e[len("data: "):] for e in text.split("\n\n") if e.startswith("data: ")]


def check_tiny_lm(address):
    prompts = ["Hello", "Once upon a time", "The quick brown fox"]
    texts = {}

    def generate(prompt):
        status, body = post(address, "/v2/models/tiny_lm/generate",
                            {"text_input": prompt, "max_tokens": 16})
        check(status == 200, f"tiny_lm generate: {status} {body}")
        texts[prompt] = body["text_output"]
        check(body["finish_reason"] == "length" and body["completion_tokens"] == 16, f"{body}")

    threads = [threading.Thread(target=generate, args=(p,)) for p in prompts]  # batched together
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(len(texts) == 3, f"tiny_lm answered {texts}")
    for prompt, text in texts.items():
        check(len(text) == 16 and all(c == "\n" or 32 <= ord(c) < 127 for c in text),
              f"tiny_lm's text for {prompt!r}: {text!r}")
        events = stream_events(address, "/v2/models/tiny_lm/generate_stream",
                               {"text_input": prompt, "max_tokens": 16, "stream": True})
        streamed = "".join(json.loads(e)["text_output"] for e in events)
        check(len(events) == 16 and streamed == text, f"streamed {streamed!r} vs {text!r}")
        status, body = post(address, "/v1/completions",
                            {"model": "tiny_lm", "prompt": prompt, "max_tokens": 16})
        check(status == 200 and body["choices"][0]["text"] == text, f"/v1/completions: {body}")
        chunks = stream_events(address, "/v1/completions",
                               {"model": "tiny_lm", "prompt": prompt, "max_tokens": 16,
                                "stream": True})
        check(chunks[-1] == "[DONE]", f"the stream ends with [DONE]: {chunks[-1]}")
        joined = "".join(json.loads(c)["choices"][0]["text"] for c in chunks[:-1])
        check(joined == text, f"/v1/completions stream {joined!r} vs {text!r}")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    server_bin, repository = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        # demo.sh's flags: the bundled models use the rate limiter and the response cache.
        return serve_and_run(
            [server_bin, "--model-repository", repository, "--http-port", "0", "--grpc-port", "0",
             "--rate-limit", "execution_count", "--cache-config", "local,size=16777216"],
            work, run, startup_seconds=60)


if __name__ == "__main__":
    sys.exit(main())
