#!/usr/bin/env python3
"""ctest example.server.grpc_python: servekit-server driven over gRPC by a Python client.

    test_grpc_python.py SERVER_BINARY MODEL_REPOSITORY STUBS_DIR

The client is Debian's python3-grpcio with the stubs generated at build time from the project's
.proto files (protoc --python_out --grpc_python_out, into STUBS_DIR): the raw stubs that Triton's
Python gRPC client (tritonclient.grpc) wraps, used the way it uses them. The server runs on free
ports over MODEL_REPOSITORY (examples/models) in explicit model control mode with a few models
loaded, and is asked: ServerLive, ServerReady, grpc.health.v1 Check, ModelReady, ServerMetadata,
ModelMetadata, ModelConfig, ModelInfer (add_sub with raw contents, identity_delay with typed
contents), ModelStreamInfer (repeat_int32: every response with triton_final_response),
ModelStatistics, RepositoryIndex, RepositoryModelUnload and Load, errors (NOT_FOUND,
INVALID_ARGUMENT), and cancellation from the network (a deadline that passes while the request
is queued: DEADLINE_EXCEEDED, and the request never executes; a stream the client cancels stops
its decoupled model), the sequence id read from the metadata key a proxy hashes on
(--sequence-id-header), and a drain: SIGTERM with --drain-grace-secs 1 turns ServerReady false at
once, requests are still answered and a new sequence refused, then the server exits 0.

Skipped (77) where the Python gRPC package is missing. Every wait is bounded; about 3 s.
"""

import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time

try:
    import grpc
except ImportError:
    print("SKIP: this python3 has no grpc module (Debian: apt-get install python3-grpcio)")
    sys.exit(77)

if len(sys.argv) != 4:
    sys.exit(__doc__)
SERVER, REPOSITORY, STUBS = sys.argv[1:]
sys.path.insert(0, STUBS)

from servekit.grpc import grpc_service_pb2 as pb  # noqa: E402
from servekit.grpc import grpc_service_pb2_grpc as pb_grpc  # noqa: E402
from servekit.grpc import health_pb2  # noqa: E402
from servekit.grpc import health_pb2_grpc  # noqa: E402

LOADED = ["add_sub", "identity_delay", "repeat_int32", "accumulate"]
TIMEOUT_S = 10.0  # every call's deadline, unless a test sets a short one


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)


def expect_error(code, call, *args, **kwargs):
    """Runs a call that must fail with `code`; returns the error's details."""
    try:
        call(*args, timeout=kwargs.pop("timeout", TIMEOUT_S), **kwargs)
    except grpc.RpcError as e:
        check(e.code() == code, f"expected {code}, got {e.code()}: {e.details()}")
        return e.details()
    raise Failure(f"expected {code}, the call succeeded")


def wait_until(predicate, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise Failure(f"timed out waiting for {what}")
        time.sleep(0.02)


# ---- the server process ------------------------------------------------------------------------


class Server:
    def __init__(self, workdir):
        self.stdout_path = os.path.join(workdir, "server.stdout")
        self.stderr_path = os.path.join(workdir, "server.stderr")
        flags = ["--model-control-mode", "explicit"]
        for m in LOADED:
            flags += ["--load-model", m]
        self.proc = subprocess.Popen(
            [SERVER, "--model-repository", REPOSITORY, "--http-port", "0", "--grpc-port", "0",
             "--grpc-infer-thread-count", "2", "--sequence-id-header", "X-Sequence-Id",
             "--drain-grace-secs", "1", *flags],
            stdout=open(self.stdout_path, "wb"),
            stderr=open(self.stderr_path, "wb"),
        )
        self.grpc_port = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(self.stdout_path) as f:
                out = f.read()
            grpc_line = re.search(r"^GRPC listening on (.*):(\d+)$", out, re.M)
            # The HTTP line comes once both servers run (main.cpp).
            if grpc_line and re.search(r"^HTTP listening on ", out, re.M):
                self.grpc_port = int(grpc_line.group(2))
                break
            if self.proc.poll() is not None:
                raise Failure(f"the server exited ({self.proc.returncode}) before listening\n"
                              f"{self.logs()}")
            time.sleep(0.05)
        if self.grpc_port is None:
            raise Failure(f"no 'GRPC listening on' line within 30 s\n{self.logs()}")

    def logs(self):
        out = []
        for path in (self.stdout_path, self.stderr_path):
            with open(path, errors="replace") as f:
                out.append(f"--- {os.path.basename(path)}\n" + f.read()[-4000:])
        return "\n".join(out)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Failure(f"the server did not exit within 15 s of SIGTERM\n{self.logs()}")
        check(code == 0, f"the server exited {code}\n{self.logs()}")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# ---- requests, as tritonclient.grpc builds them ------------------------------------------------


def infer_input(name, datatype, shape):
    t = pb.ModelInferRequest.InferInputTensor()
    t.name = name
    t.datatype = datatype
    t.shape.extend(shape)
    return t


def add_sub_request(a, b):
    """add_sub with raw_input_contents, as tritonclient.grpc sends numpy inputs."""
    r = pb.ModelInferRequest(model_name="add_sub", id="add-sub-1")
    r.inputs.extend([infer_input("INPUT0", "FP32", [1, 16]), infer_input("INPUT1", "FP32", [1, 16])])
    r.raw_input_contents.append(struct.pack("<16f", *a))
    r.raw_input_contents.append(struct.pack("<16f", *b))
    return r


def floats(raw):
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def repeat_request(values, delays_ms, request_id):
    r = pb.ModelInferRequest(model_name="repeat_int32", id=request_id)
    n = len(values)
    r.inputs.extend([infer_input("IN", "INT32", [n]), infer_input("DELAY", "UINT32", [n]),
                     infer_input("WAIT", "UINT32", [1])])
    r.raw_input_contents.append(struct.pack(f"<{n}i", *values))
    r.raw_input_contents.append(struct.pack(f"<{n}I", *delays_ms))
    r.raw_input_contents.append(struct.pack("<I", 0))
    return r


def final_flag(response):
    p = response.infer_response.parameters
    check("triton_final_response" in p, f"no triton_final_response in {response}")
    return p["triton_final_response"].bool_param


def statistics(stub, model):
    s = stub.ModelStatistics(pb.ModelStatisticsRequest(name=model), timeout=TIMEOUT_S)
    check(len(s.model_stats) == 1, f"statistics of {model}: {s}")
    return s.model_stats[0]


# ---- the checks --------------------------------------------------------------------------------


def check_health_and_metadata(stub, health):
    check(stub.ServerLive(pb.ServerLiveRequest(), timeout=TIMEOUT_S).live, "ServerLive")
    check(stub.ServerReady(pb.ServerReadyRequest(), timeout=TIMEOUT_S).ready, "ServerReady")
    h = health.Check(health_pb2.HealthCheckRequest(), timeout=TIMEOUT_S)
    check(h.status == health_pb2.HealthCheckResponse.SERVING, f"health: {h}")
    for m in LOADED:
        check(stub.ModelReady(pb.ModelReadyRequest(name=m), timeout=TIMEOUT_S).ready,
              f"ModelReady {m}")

    meta = stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=TIMEOUT_S)
    check(meta.name == "servekit" and meta.version, f"ServerMetadata: {meta}")
    check("model_repository" in meta.extensions, f"extensions: {list(meta.extensions)}")

    m = stub.ModelMetadata(pb.ModelMetadataRequest(name="add_sub"), timeout=TIMEOUT_S)
    check(m.name == "add_sub" and list(m.versions) == ["1"], f"ModelMetadata: {m}")
    check([(i.name, i.datatype, list(i.shape)) for i in m.inputs] ==
          [("INPUT0", "FP32", [-1, 16]), ("INPUT1", "FP32", [-1, 16])], f"inputs: {m.inputs}")
    check([o.name for o in m.outputs] == ["OUTPUT0", "OUTPUT1"], f"outputs: {m.outputs}")

    c = stub.ModelConfig(pb.ModelConfigRequest(name="repeat_int32"), timeout=TIMEOUT_S).config
    check(c.name == "repeat_int32" and c.backend == "repeat", f"ModelConfig: {c}")
    check(c.model_transaction_policy.decoupled, "ModelConfig: repeat_int32 is decoupled")
    check([i.name for i in c.input] == ["IN", "DELAY", "WAIT"], f"ModelConfig inputs: {c.input}")


def check_infer(stub):
    a = [float(i) for i in range(16)]
    b = [1.0] * 16
    r = stub.ModelInfer(add_sub_request(a, b), timeout=TIMEOUT_S)
    check(r.model_name == "add_sub" and r.id == "add-sub-1", f"ModelInfer: {r}")
    outputs = {o.name: i for i, o in enumerate(r.outputs)}
    check(set(outputs) == {"OUTPUT0", "OUTPUT1"}, f"outputs: {r.outputs}")
    check(len(r.raw_output_contents) == 2, "raw_output_contents, one per output")
    check(floats(r.raw_output_contents[outputs["OUTPUT0"]]) == [x + y for x, y in zip(a, b)],
          "OUTPUT0 = INPUT0 + INPUT1")
    check(floats(r.raw_output_contents[outputs["OUTPUT1"]]) == [x - y for x, y in zip(a, b)],
          "OUTPUT1 = INPUT0 - INPUT1")
    check(list(r.outputs[outputs["OUTPUT0"]].shape) == [1, 16], f"shape: {r.outputs}")

    # Typed contents (InferTensorContents), one requested output; the answer comes raw.
    q = pb.ModelInferRequest(model_name="identity_delay")
    t = infer_input("INPUT0", "FP32", [1, 3])
    t.contents.fp32_contents.extend([1.5, -2.0, 3.25])
    q.inputs.append(t)
    q.outputs.append(pb.ModelInferRequest.InferRequestedOutputTensor(name="OUTPUT0"))
    r = stub.ModelInfer(q, timeout=TIMEOUT_S)
    check(floats(r.raw_output_contents[0]) == [1.5, -2.0, 3.25], f"identity_delay: {r}")

    # A sequence: accumulate keeps a running sum per sequence_id (parameters, as Triton reads).
    total = 0
    for v in (3, 4, 5):
        total += v
        q = pb.ModelInferRequest(model_name="accumulate")
        t = infer_input("INPUT", "INT32", [1, 1])
        t.contents.int_contents.append(v)
        q.inputs.append(t)
        q.parameters["sequence_id"].int64_param = 42
        q.parameters["sequence_start"].bool_param = v == 3
        q.parameters["sequence_end"].bool_param = v == 5
        r = stub.ModelInfer(q, timeout=TIMEOUT_S)
        check(struct.unpack("<i", r.raw_output_contents[0]) == (total,), f"accumulate: {r}")


def accumulate_request(value, start=False, end=False, sequence_id=None):
    q = pb.ModelInferRequest(model_name="accumulate")
    t = infer_input("INPUT", "INT32", [1, 1])
    t.contents.int_contents.append(value)
    q.inputs.append(t)
    if sequence_id is not None:
        q.parameters["sequence_id"].string_param = sequence_id
    q.parameters["sequence_start"].bool_param = start
    q.parameters["sequence_end"].bool_param = end
    return q


def check_routing_metadata(stub):
    # --sequence-id-header X-Sequence-Id: the id in the metadata key x-sequence-id (gRPC keys
    # are lower case), as a proxy hashing on it would see it.
    metadata = (("x-sequence-id", "grpc-7"),)
    total = 0
    for v, start, end in ((2, True, False), (3, False, False), (4, False, True)):
        total += v
        r = stub.ModelInfer(accumulate_request(v, start, end), metadata=metadata,
                            timeout=TIMEOUT_S)
        check(struct.unpack("<i", r.raw_output_contents[0]) == (total,),
              f"accumulate by metadata: {r}")
    # Metadata and parameter disagreeing: INVALID_ARGUMENT naming both.
    details = expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.ModelInfer,
                           accumulate_request(1, True, sequence_id="grpc-8"), metadata=metadata)
    check("the sequence id of header 'x-sequence-id' (grpc-7) and of the request's parameters "
          "(grpc-8) disagree" in details, f"disagreeing ids: {details}")


def check_drain(server, stub):
    # SIGTERM with --drain-grace-secs 1: ServerReady turns false at once, requests are still
    # answered, a new sequence is refused naming the drain, then the server exits 0.
    server.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: not stub.ServerReady(pb.ServerReadyRequest(), timeout=TIMEOUT_S).ready,
               "ServerReady false after SIGTERM", timeout=0.9)
    r = stub.ModelInfer(add_sub_request([1.0] * 16, [2.0] * 16), timeout=TIMEOUT_S)
    check(floats(r.raw_output_contents[0]) == [3.0] * 16, f"add_sub while draining: {r}")
    details = expect_error(grpc.StatusCode.UNAVAILABLE, stub.ModelInfer,
                           accumulate_request(1, True, sequence_id="late"))
    check("the server is draining (SIGTERM)" in details, f"new sequence: {details}")
    code = server.proc.wait(timeout=15)
    check(code == 0, f"the server exited {code} after draining")


def check_stream(stub):
    requests = [repeat_request([10, 20, 30], [0, 0, 0], "first"),
                repeat_request([7], [0], "second")]
    requests[1].parameters["triton_enable_empty_final_response"].bool_param = True
    got = {}
    finals = {}
    for response in stub.ModelStreamInfer(iter(requests), timeout=TIMEOUT_S):
        check(response.error_message == "", f"stream error: {response.error_message}")
        r = response.infer_response
        if final_flag(response):
            finals[r.id] = len(r.outputs)
            continue
        out = {o.name: i for i, o in enumerate(r.outputs)}
        got.setdefault(r.id, []).append(struct.unpack("<i", r.raw_output_contents[out["OUT"]])[0])
    check(got == {"first": [10, 20, 30], "second": [7]}, f"stream values: {got}")
    # The flag-only final comes only where asked for, flagged final, with no outputs.
    check(finals == {"second": 0}, f"final responses: {finals}")

    # An error answers its request on the stream, which goes on.
    bad = pb.ModelInferRequest(model_name="no_such_model", id="bad")
    responses = list(stub.ModelStreamInfer(iter([bad, repeat_request([1], [0], "after")]),
                                           timeout=TIMEOUT_S))
    errors = [r for r in responses if r.error_message]
    check(len(errors) == 1 and "no_such_model" in errors[0].error_message and
          errors[0].infer_response.id == "bad", f"stream error responses: {responses}")
    check([r.infer_response.id for r in responses if not r.error_message] == ["after"],
          f"the stream went on: {responses}")


def text_request(model, text, max_tokens, stream, request_id):
    """A generative request as Triton's LLM clients send it: BYTES text_input, max_tokens and
    stream as request parameters."""
    r = pb.ModelInferRequest(model_name=model, id=request_id)
    r.inputs.extend([infer_input("text_input", "BYTES", [1])])
    data = text.encode()
    r.raw_input_contents.append(struct.pack("<I", len(data)) + data)
    r.parameters["max_tokens"].int64_param = max_tokens
    r.parameters["stream"].bool_param = stream
    return r


def text_output(response):
    out = {o.name: i for i, o in enumerate(response.outputs)}
    raw = response.raw_output_contents[out["text_output"]]
    (n,) = struct.unpack("<I", raw[:4])
    return raw[4:4 + n].decode()


def check_llm_stream(stub):
    """tiny_lm (the iteration batcher over LibTorch) streams one response per token over
    ModelStreamInfer, the last one final; the tokens are the ones its one-response answer
    (stream false) holds."""
    try:
        stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="tiny_lm"),
                                 timeout=TIMEOUT_S)
    except grpc.RpcError as e:
        if "causal_lm" in e.details():
            print("skip: check_llm_stream (no causal_lm backend: a build without LibTorch)")
            return
        raise
    try:
        check_tiny_lm_stream(stub)
    finally:
        stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="tiny_lm"),
                                   timeout=TIMEOUT_S)


def check_tiny_lm_stream(stub):
    # A decoupled model takes no ModelInfer (as Triton): stream false gives one final response.
    unary = {}
    for prompt in ("Hello", "Once upon a time"):
        responses = list(stub.ModelStreamInfer(
            iter([text_request("tiny_lm", prompt, 12, False, prompt)]), timeout=TIMEOUT_S))
        check(len(responses) == 1 and final_flag(responses[0]), f"one response: {responses}")
        r = responses[0].infer_response
        unary[prompt] = text_output(r)
        check(len(unary[prompt]) == 12, f"tiny_lm's answer: {unary[prompt]!r}")
        check(r.parameters["finish_reason"].string_param == "length", f"{r.parameters}")
    requests = [text_request("tiny_lm", p, 12, True, p) for p in unary]
    streamed = {}
    finals = {}
    for response in stub.ModelStreamInfer(iter(requests), timeout=TIMEOUT_S):
        check(response.error_message == "", f"stream error: {response.error_message}")
        r = response.infer_response
        streamed.setdefault(r.id, []).append(text_output(r))
        if final_flag(response):
            finals[r.id] = r.parameters["completion_tokens"].int64_param
    check(all(len(tokens) == 12 and all(len(t) == 1 for t in tokens)
              for tokens in streamed.values()), f"one token per response: {streamed}")
    check({k: "".join(v) for k, v in streamed.items()} == unary,
          f"streamed {streamed} against unary {unary}")
    check(finals == {p: 12 for p in unary}, f"final responses: {finals}")


def check_errors(stub):
    details = expect_error(grpc.StatusCode.NOT_FOUND, stub.ModelInfer,
                           pb.ModelInferRequest(model_name="no_such_model"))
    check("no_such_model" in details, details)
    expect_error(grpc.StatusCode.NOT_FOUND, stub.ModelMetadata,
                 pb.ModelMetadataRequest(name="no_such_model"))
    expect_error(grpc.StatusCode.NOT_FOUND, stub.ModelReady,
                 pb.ModelReadyRequest(name="no_such_model"))
    # A wrong shape: add_sub's inputs are [16] per batch row.
    q = add_sub_request([0.0] * 16, [0.0] * 16)
    del q.inputs[:]
    q.inputs.extend([infer_input("INPUT0", "FP32", [1, 8]), infer_input("INPUT1", "FP32", [1, 8])])
    q.raw_input_contents[0] = struct.pack("<8f", *[0.0] * 8)
    q.raw_input_contents[1] = struct.pack("<8f", *[0.0] * 8)
    expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.ModelInfer, q)
    # A decoupled model over ModelInfer.
    details = expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.ModelInfer,
                           repeat_request([1], [0], "unary"))
    check("ModelStreamInfer" in details, details)
    expect_error(grpc.StatusCode.UNIMPLEMENTED, stub.SystemSharedMemoryStatus,
                 pb.SystemSharedMemoryStatusRequest())


def check_cancellation(stub):
    # identity_delay batches for up to 100 ms before it executes: a call whose 40 ms deadline
    # passes there is cancelled in the queue. The client sees DEADLINE_EXCEEDED; the server
    # answers the request `cancelled` (a failure in the statistics) and never executes it.
    # On a slow machine (a sanitizer build) the deadline may pass before the server has queued
    # the request at all, or gRPC may tell the server that the call ended only after the 100 ms
    # (then the request has started, and an executing request finishes normally); either way it
    # is not cancelled in the queue, and the attempt is made again. A request that was cancelled
    # must never execute.
    queued_and_cancelled = False
    for attempt in range(5):
        before = statistics(stub, "identity_delay")
        q = pb.ModelInferRequest(model_name="identity_delay")
        t = infer_input("INPUT0", "FP32", [1, 1])
        t.contents.fp32_contents.append(99.0 + attempt)  # not a cached answer
        q.inputs.append(t)
        expect_error(grpc.StatusCode.DEADLINE_EXCEEDED, stub.ModelInfer, q, timeout=0.04)
        try:
            wait_until(lambda: statistics(stub, "identity_delay").inference_stats.fail.count ==
                       before.inference_stats.fail.count + 1,
                       "the queued request of the expired call to be cancelled", timeout=3.0)
            queued_and_cancelled = True
        except Failure:
            pass
        time.sleep(0.3)  # past when it would have executed
        after = statistics(stub, "identity_delay")
        if queued_and_cancelled:
            check(after.execution_count == before.execution_count and
                  after.inference_count == before.inference_count,
                  f"the cancelled request executed: {before} -> {after}")
            break
        # Not cancelled: it was never queued, or it executed because the call's end reached the
        # server after its queue delay; one or the other, never both cancelled and executed.
        check(after.inference_count - before.inference_count in (0, 1),
              f"an uncancelled attempt executed more than once: {before} -> {after}")
    check(queued_and_cancelled,
          "in 5 attempts the expired call's request was never queued and cancelled")

    # A stream cancelled after its first response stops its decoupled model at the next one
    # (a final `cancelled` error, counted in response_stats), instead of sending the rest.
    def sent(kind):
        stats = statistics(stub, "repeat_int32").response_stats
        return sum(getattr(s, kind).count for s in stats.values())

    failed_before = sent("fail")
    sent_before = sent("success")
    call = stub.ModelStreamInfer(iter([repeat_request([1, 2, 3, 4], [0, 300, 300, 300], "c")]),
                                 timeout=TIMEOUT_S)
    first = next(call)
    check(first.error_message == "" and not final_flag(first), f"first response: {first}")
    call.cancel()
    check(call.code() == grpc.StatusCode.CANCELLED, f"cancelled stream: {call.code()}")
    wait_until(lambda: sent("fail") == failed_before + 1, "the cancelled stream's model to stop")
    check(sent("success") - sent_before < 4,
          f"the model sent {sent('success') - sent_before} responses: not cancelled")


def check_statistics_and_repository(stub):
    s = statistics(stub, "add_sub")
    check(s.name == "add_sub" and s.version == "1", f"statistics: {s}")
    check(s.inference_count >= 1 and s.inference_stats.success.count >= 1, f"statistics: {s}")
    every = stub.ModelStatistics(pb.ModelStatisticsRequest(), timeout=TIMEOUT_S)
    check(sorted(m.name for m in every.model_stats) == sorted(LOADED),
          f"statistics of every ready model: {[m.name for m in every.model_stats]}")

    index = stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=TIMEOUT_S)
    states = {m.name: m.state for m in index.models}
    # check_llm_stream loaded and unloaded tiny_lm (where the build serves it): listed, unloaded.
    check(states.pop("tiny_lm", "UNAVAILABLE") == "UNAVAILABLE", f"RepositoryIndex: {states}")
    check(states == {m: "READY" for m in LOADED}, f"RepositoryIndex: {states}")

    stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="add_sub"),
                               timeout=TIMEOUT_S)
    # Known and not ready: ModelReady false, an inference UNAVAILABLE, listed as such.
    check(not stub.ModelReady(pb.ModelReadyRequest(name="add_sub"), timeout=TIMEOUT_S).ready,
          "add_sub unloaded")
    details = expect_error(grpc.StatusCode.UNAVAILABLE, stub.ModelInfer,
                           add_sub_request([0.0] * 16, [0.0] * 16))
    check("not ready" in details, details)
    index = stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=TIMEOUT_S)
    states = {m.name: m.state for m in index.models}
    check(states["add_sub"] != "READY", f"RepositoryIndex after the unload: {states}")
    ready = stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True), timeout=TIMEOUT_S)
    check(sorted(m.name for m in ready.models) == sorted(set(LOADED) - {"add_sub"}),
          f"ready index: {ready}")
    stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="add_sub"),
                             timeout=TIMEOUT_S)
    check(stub.ModelReady(pb.ModelReadyRequest(name="add_sub"), timeout=TIMEOUT_S).ready,
          "add_sub loaded again")
    r = stub.ModelInfer(add_sub_request([2.0] * 16, [1.0] * 16), timeout=TIMEOUT_S)
    check(floats(r.raw_output_contents[0]) == [3.0] * 16, "add_sub serves again")
    expect_error(grpc.StatusCode.NOT_FOUND, stub.RepositoryModelLoad,
                 pb.RepositoryModelLoadRequest(model_name="no_such_model"))


def main():
    with tempfile.TemporaryDirectory(prefix="servekit-grpc-python-") as workdir:
        server = Server(workdir)
        try:
            with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
                stub = pb_grpc.GRPCInferenceServiceStub(channel)
                health = health_pb2_grpc.HealthStub(channel)
                for step in (check_health_and_metadata, check_infer, check_stream,
                             check_llm_stream, check_errors, check_cancellation,
                             check_statistics_and_repository, check_routing_metadata,
                             check_drain):
                    if step is check_health_and_metadata:
                        step(stub, health)
                    elif step is check_drain:
                        step(server, stub)
                    else:
                        step(stub)
                    print(f"ok: {step.__name__}")
        except Failure as e:
            server.kill()
            print(f"FAIL: {e}\n{server.logs()}")
            return 1
        except grpc.RpcError as e:
            server.kill()
            print(f"FAIL: unexpected {e.code()}: {e.details()}\n{server.logs()}")
            return 1
        finally:
            server.kill()
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
