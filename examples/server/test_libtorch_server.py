#!/usr/bin/env python3
"""ctest example.server.libtorch: servekit-server serving TorchScript models from a Triton layout.

    test_libtorch_server.py SERVER_BINARY TEST_MODELS

Builds a model repository in a temporary folder as a Triton user has it, from the models
tests/libtorch/make_models.cpp wrote into TEST_MODELS:

  classifier/config.pbtxt    platform "pytorch_libtorch" (no backend named), dynamic batching
  classifier/1/model.pt
  pair/config.pbtxt          backend "pytorch", default_model_filename "traced.pt"
  pair/1/traced.pt

starts servekit-server on a free port over it, and checks over HTTP (KServe v2 JSON) that both
load, that the classifier's scores are those of the same network computed here in plain Python
(the seeded weights of tests/libtorch/reference_models.hpp), that the metadata reports the
platform, and that a request torch fails on is answered 500 while the server goes on.

Only the standard library.
"""

import http.client
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


# --- reference_models.hpp in Python --------------------------------------------------------------


class SeededValues:
    """The 64-bit LCG of reference_models::seeded_values: values uniform in [-0.5, 0.5)."""

    def __init__(self, seed):
        self.state = seed

    def next(self):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        top = self.state >> 40
        return top / float(1 << 24) - 0.5

    def take(self, n):
        return [self.next() for _ in range(n)]


def classifier_scores(image):
    """reference_models::classifier::forward: conv 3x3 (padding 1) to 4 channels, ReLU, 2x2 max
    pooling, linear 64 -> 10."""
    values = SeededValues(20261127)
    conv_w, conv_b = values.take(4 * 9), values.take(4)
    fc_w, fc_b = values.take(10 * 64), values.take(10)
    conv = [[[0.0] * 8 for _ in range(8)] for _ in range(4)]
    for c in range(4):
        for y in range(8):
            for x in range(8):
                s = conv_b[c]
                for ky in range(3):
                    for kx in range(3):
                        iy, ix = y + ky - 1, x + kx - 1
                        if 0 <= iy < 8 and 0 <= ix < 8:
                            s += conv_w[c * 9 + ky * 3 + kx] * image[iy * 8 + ix]
                conv[c][y][x] = max(0.0, s)
    features = []
    for c in range(4):
        for y in range(4):
            for x in range(4):
                features.append(max(conv[c][2 * y + dy][2 * x + dx] for dy in (0, 1) for dx in (0, 1)))
    return [fc_b[k] + sum(fc_w[k * 64 + f] * features[f] for f in range(64)) for k in range(10)]


# --- the repository and the server ---------------------------------------------------------------

CLASSIFIER = """
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1, 8, 8 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 10 ] } ]
dynamic_batching { }
instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
"""

PAIR = """
backend: "pytorch"
default_model_filename: "traced.pt"
input [ { name: "a" data_type: TYPE_FP32 dims: [ -1 ] },
        { name: "b" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "difference" data_type: TYPE_FP32 dims: [ -1 ] },
         { name: "sum" data_type: TYPE_FP32 dims: [ -1 ] } ]
parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
"""


def make_repository(root, models):
    for name, config, source, file in (
        ("classifier", CLASSIFIER, "classifier.pt", "model.pt"),
        ("pair", PAIR, "pair.pt", "traced.pt"),
    ):
        os.makedirs(os.path.join(root, name, "1"))
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(config)
        shutil.copy(os.path.join(models, source), os.path.join(root, name, "1", file))


def post(address, path, body):
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, json.loads(response.read() or b"null")


def get(address, path):
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, json.loads(response.read() or b"null")


def run(address, log):
    for model in ("classifier", "pair"):
        check(f"model '{model}' version 1: READY" in log, f"model {model} not READY:\n{log}")

    status, metadata = get(address, "/v2/models/classifier")
    check(status == 200, f"classifier metadata: {status}")
    check(metadata["platform"] == "pytorch_libtorch", f"classifier platform: {metadata}")

    images = [SeededValues(seed).take(64) for seed in (5, 6)]
    status, body = post(
        address,
        "/v2/models/classifier/infer",
        {"inputs": [{"name": "INPUT__0", "shape": [2, 1, 8, 8], "datatype": "FP32",
                     "data": images[0] + images[1]}]},
    )
    check(status == 200, f"classifier infer: {status} {body}")
    out = body["outputs"][0]
    check(out["name"] == "OUTPUT__0" and out["shape"] == [2, 10] and out["datatype"] == "FP32",
          f"classifier output: {out}")
    for k, image in enumerate(images):
        expected = classifier_scores(image)
        got = out["data"][k * 10 : (k + 1) * 10]
        for c in range(10):
            check(math.isclose(got[c], expected[c], abs_tol=1e-4),
                  f"image {k} class {c}: got {got[c]}, expected {expected[c]}")

    status, body = post(
        address,
        "/v2/models/pair/infer",
        {"inputs": [{"name": "b", "shape": [2], "datatype": "FP32", "data": [2, 1]},
                    {"name": "a", "shape": [2], "datatype": "FP32", "data": [5, 5]}]},
    )
    check(status == 200, f"pair infer: {status} {body}")
    outputs = {o["name"]: o["data"] for o in body["outputs"]}
    check(outputs == {"difference": [3, 4], "sum": [9, 7]}, f"pair outputs: {outputs}")

    # Shapes torch cannot subtract: the request fails, naming the model; the next one is served.
    status, body = post(
        address,
        "/v2/models/pair/infer",
        {"inputs": [{"name": "a", "shape": [2], "datatype": "FP32", "data": [1, 2]},
                    {"name": "b", "shape": [3], "datatype": "FP32", "data": [1, 2, 3]}]},
    )
    check(status == 500 and "model 'pair'" in body.get("error", ""), f"torch error: {status} {body}")
    status, body = post(
        address,
        "/v2/models/pair/infer",
        {"inputs": [{"name": "a", "shape": [1], "datatype": "FP32", "data": [1]},
                    {"name": "b", "shape": [1], "datatype": "FP32", "data": [1]}]},
    )
    check(status == 200, f"after the torch error: {status} {body}")
    return 0


def serve_and_run(server_args, work, run, startup_seconds=30):
    """Starts servekit-server with `server_args` (its output in `work`), waits for `HTTP listening
    on`, calls run(address, log) and stops the server; returns run's result, or 1 with the
    server's stderr when a check fails. test_real_models.py uses it too."""
    stdout_path = os.path.join(work, "stdout")
    with open(stdout_path, "wb") as stdout, open(os.path.join(work, "stderr"), "wb") as stderr:
        server = subprocess.Popen(server_args, stdout=stdout, stderr=stderr)
    try:
        address = None
        deadline = time.monotonic() + startup_seconds
        while address is None and time.monotonic() < deadline and server.poll() is None:
            with open(stdout_path) as f:
                m = re.search(r"^HTTP listening on (\S+)$", f.read(), re.M)
            if m:
                address = m.group(1)
            else:
                time.sleep(0.1)
        check(address is not None, "the server never printed 'HTTP listening on'")
        with open(stdout_path) as f:
            log = f.read()
        return run(address, log)
    except Failure as e:
        with open(os.path.join(work, "stderr")) as f:
            print(f"FAILED: {e}\nserver stderr:\n{f.read()}", file=sys.stderr)
        return 1
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(timeout=30)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    server_bin, models = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        repository = os.path.join(work, "models")
        make_repository(repository, models)
        return serve_and_run(
            [server_bin, "--model-repository", repository, "--http-port", "0", "--grpc-port", "0"],
            work, run)


if __name__ == "__main__":
    sys.exit(main())
