#!/usr/bin/env python3
"""ctest example.server.triton_examples: Triton's quick-start client examples against servekit-server.

    test_triton_examples.py SERVER_BINARY MODEL_REPOSITORY

Starts servekit-server on a free port over examples/models-triton, then replays, byte for byte
where it matters, what Triton's HTTP client examples (triton-inference-server/client,
src/python/examples and src/c++/examples) send through tritonclient, and checks what they check,
with the values of their own assertions:

  simple_http_infer_client (.py, .cc), simple_http_async_infer_client: model `simple`
  simple_http_string_infer_client (.py, .cc): `simple_string`, `simple_identity`
  simple_http_sequence_sync_infer_client (.py, .cc; with and without -d): `simple_sequence`,
      `simple_dyna_sequence`, `simple_string_dyna_sequence`
  simple_http_health_metadata (.py, .cc), less its check that the server is named "triton"

Only the standard library: the tensors are packed with struct as numpy would lay them out.
"""

import http.client
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


# --- the wire format of tritonclient.http -------------------------------------------------------


def serialize_bytes(elements):
    """tritonclient.utils.serialize_byte_tensor: 4-byte little-endian length, then the bytes."""
    return b"".join(struct.pack("<I", len(e)) + e for e in elements)


def deserialize_bytes(raw):
    out, at = [], 0
    while at < len(raw):
        (n,) = struct.unpack_from("<I", raw, at)
        out.append(raw[at + 4 : at + 4 + n])
        at += 4 + n
    return out


class Client:
    """What tritonclient.http.InferenceServerClient puts on the wire (and tc::InferenceServerHttpClient,
    which writes the same JSON without spaces and always with an "id")."""

    def __init__(self, address, cpp=False):
        host, port = address.rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)
        self.cpp = cpp

    def request(self, method, path, body=None, headers=None):
        self.conn.request(method, path, body=body, headers=headers or {})
        response = self.conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()

    def get_json(self, path):
        status, _, body = self.request("GET", path)
        return status, (json.loads(body) if body else None)

    def infer(self, model, inputs, outputs=None, parameters=None, query=""):
        """inputs: (name, shape, datatype, values, binary); outputs: (name, binary) or None.
        Returns (status, {output name: (datatype, shape, values)}) or (status, error text)."""
        request = {}
        if self.cpp:
            request["id"] = ""
        params = dict(parameters or {})
        tensors, raw = [], []
        for name, shape, datatype, values, binary in inputs:
            tensor = {"name": name, "shape": shape, "datatype": datatype}
            if binary:
                data = pack(datatype, values)
                tensor["parameters"] = {"binary_data_size": len(data)}
                raw.append(data)
            else:
                tensor["data"] = [v.decode("utf-8") if isinstance(v, bytes) else v for v in values]
            tensors.append(tensor)
        request["inputs"] = tensors
        if outputs:
            request["outputs"] = [
                {"name": name, "parameters": {"binary_data": binary}} for name, binary in outputs
            ]
        else:
            params["binary_data_output"] = True
        if params:
            request["parameters"] = params
        header = json.dumps(request, separators=(",", ":") if self.cpp else (", ", ": "))
        body = header.encode() + b"".join(raw)
        headers = {}
        if self.cpp:
            # libcurl's request: the JSON size always, and a content type for the body.
            headers["Inference-Header-Content-Length"] = str(len(header.encode()))
            headers["Content-Type"] = "application/octet-stream" if raw else "application/json"
        elif raw:
            headers["Inference-Header-Content-Length"] = str(len(header.encode()))
        status, response_headers, payload = self.request(
            "POST", f"/v2/models/{model}/infer{query}", body, headers
        )
        if status != 200:
            return status, json.loads(payload)["error"]
        # InferResult: the JSON, then each binary output's bytes in the order the JSON lists them.
        json_size = int(response_headers.get("Inference-Header-Content-Length", len(payload)))
        result = json.loads(payload[:json_size])
        at = json_size
        values = {}
        for output in result["outputs"]:
            size = output.get("parameters", {}).get("binary_data_size")
            if size is not None:
                data = unpack(output["datatype"], payload[at : at + size])
                at += size
            else:
                data = output["data"]
                if output["datatype"] == "BYTES":
                    data = [d.encode("utf-8") for d in data]
            values[output["name"]] = (output["datatype"], output["shape"], data)
        check(at == len(payload), f"{len(payload) - at} bytes after the last binary output")
        return status, values


def pack(datatype, values):
    if datatype == "BYTES":
        return serialize_bytes(values)
    check(datatype == "INT32", datatype)
    return struct.pack(f"<{len(values)}i", *values)


def unpack(datatype, raw):
    if datatype == "BYTES":
        return deserialize_bytes(raw)
    check(datatype == "INT32", datatype)
    return list(struct.unpack(f"<{len(raw) // 4}i", raw))


# --- the examples ---------------------------------------------------------------------------------


def simple_infer(client):
    """simple_http_infer_client.py: INPUT0 = 0..15 as JSON, INPUT1 = -1 as binary; OUTPUT0 binary
    and OUTPUT1 JSON; then no outputs (all binary); the statistics; an unknown model."""
    in0, in1 = list(range(16)), [-1] * 16
    inputs = [("INPUT0", [1, 16], "INT32", in0, False), ("INPUT1", [1, 16], "INT32", in1, True)]
    query = "?test_1=1&test_2=2"
    for outputs in ([("OUTPUT0", True), ("OUTPUT1", False)], None):
        status, out = client.infer("simple", inputs, outputs, query=query)
        check(status == 200, f"simple: {status} {out}")
        for name, expected in (
            ("OUTPUT0", [a + b for a, b in zip(in0, in1)]),
            ("OUTPUT1", [a - b for a, b in zip(in0, in1)]),
        ):
            datatype, shape, data = out[name]
            check((datatype, shape) == ("INT32", [1, 16]), f"simple {name}: {datatype} {shape}")
            check(data == expected, f"simple {name}: {data}, expected {expected}")
    status, stats = client.get_json("/v2/models/simple/stats")
    check(status == 200 and len(stats["model_stats"]) == 1, f"simple stats: {status} {stats}")
    status, error = client.infer("wrong_model_name", inputs, [("OUTPUT0", True)])
    check(status != 200 and error.startswith("Request for unknown model"), f"{status} {error}")


def simple_infer_cpp(client):
    """simple_http_infer_client.cc (and the async ones): both inputs binary (INPUT1 all ones), no
    outputs requested, so both come back binary, 64 bytes each."""
    in0, in1 = list(range(16)), [1] * 16
    inputs = [("INPUT0", [1, 16], "INT32", in0, True), ("INPUT1", [1, 16], "INT32", in1, True)]
    status, out = client.infer("simple", inputs)
    check(status == 200, f"simple: {status} {out}")
    check(out["OUTPUT0"][2] == [a + b for a, b in zip(in0, in1)], f"simple sum {out}")
    check(out["OUTPUT1"][2] == [a - b for a, b in zip(in0, in1)], f"simple difference {out}")


def simple_string(client, binary0, binary1):
    """simple_http_string_infer_client: the decimal strings of 0..15 and of 1, sum and difference
    read back with int()."""
    in0 = [str(i).encode() for i in range(16)]
    in1 = [b"1"] * 16
    inputs = [("INPUT0", [1, 16], "BYTES", in0, binary0), ("INPUT1", [1, 16], "BYTES", in1, binary1)]
    status, out = client.infer("simple_string", inputs, [("OUTPUT0", True), ("OUTPUT1", False)])
    check(status == 200, f"simple_string: {status} {out}")
    for i in range(16):
        check(int(out["OUTPUT0"][2][i]) == i + 1, f"simple_string sum {out['OUTPUT0']}")
        check(int(out["OUTPUT1"][2][i]) == i - 1, f"simple_string difference {out['OUTPUT1']}")
    check(out["OUTPUT0"][:2] == ("BYTES", [1, 16]), f"simple_string OUTPUT0 {out['OUTPUT0'][:2]}")


def simple_identity(client):
    """simple_http_string_infer_client.py: "he\\0llo" and the 4-byte blob 00 01 02 03, 16 of each,
    binary and JSON, come back unchanged."""
    for element in ("he\x00llo".encode("utf-8"), b"\x00\x01\x02\x03"):
        for binary in (True, False):
            data = [element] * 16
            status, out = client.infer(
                "simple_identity", [("INPUT0", [1, 16], "BYTES", data, binary)], [("OUTPUT0", binary)]
            )
            check(status == 200, f"simple_identity: {status} {out}")
            check(out["OUTPUT0"] == ("BYTES", [1, 16], data), f"simple_identity {binary}: {out}")


def sequence_sync(client, dyna, interleaved, int_ids, string_id):
    """simple_http_sequence_sync_infer_client (.py sends one sequence after the other, .cc
    interleaves them): INPUT [1, 1] binary, OUTPUT binary, and the examples' expected values."""
    values = [11, 7, 5, 3, 2, 0, 1]
    int_model = "simple_dyna_sequence" if dyna else "simple_sequence"
    string_model = "simple_string_dyna_sequence" if dyna else "simple_sequence"
    sequences = [
        (int_model, int_ids[0], [0] + values),
        (int_model, int_ids[1], [100] + [-v for v in values]),
        (string_model, string_id, [20] + [-v for v in values]),
    ]
    results = [[], [], []]

    def send(k, step):
        model, sequence_id, inputs = sequences[k]
        parameters = {
            "sequence_id": sequence_id,
            "sequence_start": step == 0,
            "sequence_end": step == len(inputs) - 1,
        }
        status, out = client.infer(
            model, [("INPUT", [1, 1], "INT32", [inputs[step]], True)], [("OUTPUT", True)], parameters
        )
        check(status == 200, f"{model} sequence {sequence_id} step {step}: {status} {out}")
        check(out["OUTPUT"][:2] == ("INT32", [1, 1]), f"{model}: {out}")
        results[k].append(out["OUTPUT"][2][0])

    steps = len(values) + 1
    if interleaved:
        for step in range(steps):
            for k in range(3):
                send(k, step)
    else:
        for k in range(3):
            for step in range(steps):
                send(k, step)

    for i in range(steps):
        int0 = 1 if i == 0 else values[i - 1]
        int1 = 101 if i == 0 else -values[i - 1]
        if i == 0:
            string0 = 20 if dyna else 21
        elif dyna:
            string0 = -values[i - 1] + results[2][i - 1]
        else:
            string0 = -values[i - 1]
        # "The dyna_sequence custom backend adds the correlation ID to the last request in a
        # sequence."
        if dyna and i != 0 and values[i - 1] == 1:
            int0 += int_ids[0]
            int1 += int_ids[1]
            string0 += int(string_id)
        got = (results[0][i], results[1][i], results[2][i])
        check(got == (int0, int1, string0), f"[{i}] {got}, expected {(int0, int1, string0)}")


def health_metadata(client):
    """simple_http_health_metadata (.py, .cc), less the server name."""
    status, _, _ = client.request("GET", "/v2/health/live?test_1=1&test_2=2")
    check(status == 200, f"live: {status}")
    status, _, _ = client.request("GET", "/v2/health/ready")
    check(status == 200, f"ready: {status}")
    status, _, _ = client.request("GET", "/v2/models/simple/ready")
    check(status == 200, f"simple ready: {status}")
    status, metadata = client.get_json("/v2")
    check(status == 200 and "name" in metadata, f"server metadata: {status} {metadata}")
    status, metadata = client.get_json("/v2/models/simple?test_1=1&test_2=2")
    check(status == 200 and metadata["name"] == "simple", f"model metadata: {status} {metadata}")
    status, config = client.get_json("/v2/models/simple/config")
    check(status == 200 and config["name"] == "simple", f"model config: {status} {config}")
    status, error = client.get_json("/v2/models/wrong_model_name")
    check(status != 200 and "Request for unknown model" in error["error"], f"{status} {error}")


# --- the server -------------------------------------------------------------------------------------


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    server_bin, repository = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        stdout_path = os.path.join(work, "stdout")
        with open(stdout_path, "wb") as stdout, open(os.path.join(work, "stderr"), "wb") as stderr:
            server = subprocess.Popen(
                [server_bin, "--model-repository", repository, "--http-port", "0",
                 "--grpc-port", "0"],
                stdout=stdout,
                stderr=stderr,
            )
        try:
            return run(server, stdout_path, work)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()


def run(server, stdout_path, work):
    address = None
    deadline = time.monotonic() + 60
    while address is None and time.monotonic() < deadline:
        with open(stdout_path) as f:
            m = re.search(r"^HTTP listening on (\S+)$", f.read(), re.M)
        if m:
            address = m.group(1)
        elif server.poll() is not None:
            break
        else:
            time.sleep(0.1)
    try:
        check(address is not None, "the server never printed 'HTTP listening on'")
        with open(stdout_path) as f:
            log = f.read()
        for model in (
            "simple",
            "simple_string",
            "simple_identity",
            "simple_sequence",
            "simple_dyna_sequence",
            "simple_string_dyna_sequence",
        ):
            check(f"model '{model}' version 1: READY" in log, f"model {model} not READY")
        py, cpp = Client(address), Client(address, cpp=True)
        health_metadata(py)
        simple_infer(py)
        simple_infer_cpp(cpp)
        simple_string(py, binary0=True, binary1=False)
        simple_string(cpp, binary0=True, binary1=True)
        simple_identity(py)
        # The Python example's ids (1000, 1001, a UUID or "1002"), then the C++ example's
        # (1, 2, "SEQ-3" or "3") with its interleaving; each example runs without and with -d.
        sequence_sync(py, False, False, (1000, 1001), "3f2504e0-4f89-41d3-9a0c-0305e82c3301")
        sequence_sync(py, True, False, (1000, 1001), "1002")
        sequence_sync(cpp, False, True, (1, 2), "SEQ-3")
        sequence_sync(cpp, True, True, (1, 2), "3")
        # Several clients at once, as the async examples send: simple's dynamic batcher and the
        # dyna models' two instances see concurrent requests.
        errors = []

        def concurrent(offset):
            try:
                c = Client(address, cpp=True)
                simple_infer_cpp(c)
                sequence_sync(c, True, True, (10 + 2 * offset, 11 + 2 * offset), str(100 + offset))
            except Exception as e:  # noqa: BLE001: reported below
                errors.append(f"client {offset}: {e}")

        threads = [threading.Thread(target=concurrent, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(not errors, "; ".join(errors))
        status, error = py.infer(
            "simple_string_dyna_sequence",
            [("INPUT", [1, 1], "INT32", [1], True)],
            [("OUTPUT", True)],
            {"sequence_id": "not-a-number", "sequence_start": True, "sequence_end": True},
        )
        check(status == 400 and "decodable into an integer" in error, f"{status} {error}")
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        print("--- server stdout", file=sys.stderr)
        with open(stdout_path) as f:
            print(f.read(), file=sys.stderr)
        print("--- server stderr", file=sys.stderr)
        with open(os.path.join(work, "stderr")) as f:
            print(f.read()[-4000:], file=sys.stderr)
        return 1
    server.terminate()
    check(server.wait(timeout=30) == 0, "the server did not exit 0 on SIGTERM")
    print("PASS: Triton's HTTP client examples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
