#!/usr/bin/python3
"""End-to-end check of the gateway's gRPC API (k3serve.v1.Gateway).

    /usr/bin/python3 tests/e2e/grpc_client.py [HOST:PORT | grpc=HOST:PORT ...]

The address comes from the argument or env K3_GRPC (the fields of
run-local.sh's READY line are accepted as they are); with env K3_API_KEY the
calls carry `authorization: Bearer KEY`. The Python stubs are generated at run
time from proto/ into a temporary directory. Needs Debian's python3-grpcio and
python3-protobuf, and protoc + grpc_python_plugin (protobuf-compiler,
protobuf-compiler-grpc) or python3-grpc-tools. The synthetic model writes
random text: only the API's shape is checked. Prints one line per check and
"N passed, N failed"; exits 1 on a failure.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import grpc
except ImportError:
    sys.exit("grpc_client.py: the grpc module is missing: run it with /usr/bin/python3 "
             "(Debian packages python3-grpcio python3-protobuf)")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RPC_TIMEOUT_S = float(os.environ.get("K3_E2E_TIMEOUT_S", "300"))


def grpc_address():
    addr = os.environ.get("K3_GRPC", "")
    for arg in sys.argv[1:]:
        if arg.startswith("grpc="):
            addr = arg[len("grpc="):]
        elif "=" not in arg:
            addr = arg
    if not addr:
        sys.exit("usage: grpc_client.py HOST:PORT   (or env K3_GRPC=HOST:PORT)")
    return addr


def generate_stubs(out_dir):
    """Compiles proto/k3serve/v1/*.proto into out_dir; returns nothing, exits on failure.

    Debian 12's grpc_tools bundles a protoc too old for proto3 `optional`, so
    the system protoc (the version of the installed protobuf runtime) with
    grpc_python_plugin comes first, grpc_tools second.
    """
    protos = sorted(glob.glob(os.path.join(REPO, "proto", "k3serve", "v1", "*.proto")))
    if not protos:
        sys.exit(f"grpc_client.py: no .proto files under {REPO}/proto/k3serve/v1")
    common = ["-I", os.path.join(REPO, "proto"), f"--python_out={out_dir}"] + protos
    attempts = []
    plugin = shutil.which("grpc_python_plugin")
    if shutil.which("protoc") and plugin:
        attempts.append(["protoc", f"--plugin=protoc-gen-grpc={plugin}", f"--grpc_out={out_dir}"]
                        + common)
    attempts.append([sys.executable, "-m", "grpc_tools.protoc", f"--grpc_python_out={out_dir}"]
                    + common)
    errors = []
    for cmd in attempts:
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode == 0:
            return
        errors.append(f"$ {' '.join(cmd[:3])} ...\n{r.stderr.strip()}")
    sys.exit("grpc_client.py: cannot generate the Python stubs (install protobuf-compiler and "
             "protobuf-compiler-grpc):\n" + "\n".join(errors))


class CheckError(Exception):
    pass


def check(cond, message):
    if not cond:
        raise CheckError(message)


class Runner:
    """Runs every check, prints PASS/FAIL lines and counts them."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def step(self, name, fn):
        try:
            fn()
            self.passed += 1
            print(f"PASS {name}", flush=True)
        except CheckError as e:
            self.failed += 1
            print(f"FAIL {name}: {e}", flush=True)
        except grpc.RpcError as e:
            self.failed += 1
            print(f"FAIL {name}: RPC failed: {e.code().name}: {e.details()}", flush=True)


def main():
    address = grpc_address()
    stub_dir = tempfile.mkdtemp(prefix="k3-grpc-stubs-")
    try:
        generate_stubs(stub_dir)
        sys.path.insert(0, stub_dir)
        return run_checks(address)
    finally:
        shutil.rmtree(stub_dir, ignore_errors=True)


def run_checks(address):
    # Generated at run time: imported only now.
    from k3serve.v1 import gateway_pb2 as pb
    from k3serve.v1 import gateway_pb2_grpc as pb_grpc
    from k3serve.v1 import health_pb2

    print(f"gateway: {address} (gRPC)", flush=True)
    channel = grpc.insecure_channel(address)
    try:
        grpc.channel_ready_future(channel).result(timeout=30)
    except grpc.FutureTimeoutError:
        print(f"FAIL cannot connect to {address} within 30 s")
        print("0 passed, 1 failed")
        return 1
    stub = pb_grpc.GatewayStub(channel)
    key = os.environ.get("K3_API_KEY")
    metadata = [("authorization", f"Bearer {key}")] if key else []
    opts = {"timeout": RPC_TIMEOUT_S, "metadata": metadata}
    state = {"model": "", "ids": []}
    run = Runner()
    hello = [pb.ChatMessage(role="user", content="Hello! Say something short.")]

    def health_serving():
        r = stub.Health(health_pb2.HealthRequest(), **opts)
        check(r.status == health_pb2.HealthResponse.SERVING,
              f"status {health_pb2.HealthResponse.ServingStatus.Name(r.status)}: {r.detail}")
        check(r.component == "gateway", f"component is {r.component!r}")

    def list_models():
        r = stub.ListModels(pb.ListModelsRequest(), **opts)
        check(len(r.models) == 1, f"expected one model, got {[m.id for m in r.models]}")
        check(r.models[0].id, "model id is empty")
        state["model"] = r.models[0].id
        print(f"     model: {r.models[0].id} (max_context {r.models[0].max_context})")

    def tokenize_round_trip():
        text = "Hello, world"
        ids = list(stub.Tokenize(pb.TokenizeRequest(model=state["model"], text=text), **opts).ids)
        check(ids, "Tokenize returned no ids")
        back = stub.Detokenize(pb.DetokenizeRequest(model=state["model"], ids=ids), **opts).text
        check(back == text, f"Detokenize(Tokenize({text!r})) = {back!r}")
        state["ids"] = ids
        print(f"     {text!r} -> {ids}")

    def check_done(done, max_tokens, where):
        check(done.finish_reason in ("stop", "length", "tool_calls"),
              f"{where}: finish_reason {done.finish_reason!r}")
        u = done.usage
        check(u.prompt_tokens > 0, f"{where}: usage.prompt_tokens is {u.prompt_tokens}")
        check(u.completion_tokens <= max_tokens,
              f"{where}: completion_tokens {u.completion_tokens} > max_tokens {max_tokens}")
        check(u.total_tokens == u.prompt_tokens + u.completion_tokens,
              f"{where}: total_tokens {u.total_tokens} != "
              f"{u.prompt_tokens} + {u.completion_tokens}")
        check(done.id, f"{where}: ChatDone has no request id")

    def chat_stream():
        req = pb.ChatRequest(model=state["model"], messages=hello, max_tokens=12)
        events = list(stub.Chat(req, **opts))
        kinds = [e.WhichOneof("event") for e in events]
        check(kinds and kinds[-1] == "done", f"the stream does not end with done: {kinds}")
        check(kinds.count("done") == 1, f"{kinds.count('done')} done events")
        # Progress events (queued, the prompt's reading, keep-alive) come
        # only before the first delta.
        lead = next((i for i, k in enumerate(kinds) if k != "progress"), len(kinds))
        check(all(k == "delta" for k in kinds[lead:-1]), f"unexpected events: {kinds}")
        check(kinds.count("delta") > 0, "no delta before done")
        check_done(events[-1].done, 12, "done")
        text = "".join(e.delta.reasoning_content + e.delta.content for e in events[lead:-1])
        print(f"     {len(events) - 1} deltas, {len(text)} characters, "
              f"finish_reason {events[-1].done.finish_reason}, "
              f"usage {events[-1].done.usage.prompt_tokens}+"
              f"{events[-1].done.usage.completion_tokens}")

    def complete_ids():
        ids = state["ids"] or [1, 2, 3]
        req = pb.CompleteRequest(model=state["model"], prompt_ids=ids, max_tokens=8)
        events = list(stub.Complete(req, **opts))
        kinds = [e.WhichOneof("event") for e in events]
        check(kinds and kinds[-1] == "done", f"the stream does not end with done: {kinds}")
        check(kinds.count("done") == 1, f"{kinds.count('done')} done events")
        lead = next((i for i, k in enumerate(kinds) if k != "progress"), len(kinds))
        check(all(k == "text" for k in kinds[lead:-1]), f"unexpected events: {kinds}")
        check_done(events[-1].done, 8, "done")
        check(events[-1].done.usage.prompt_tokens >= len(ids),
              f"prompt_tokens {events[-1].done.usage.prompt_tokens} < {len(ids)} prompt ids")

    def empty_messages_invalid():
        try:
            events = list(stub.Chat(pb.ChatRequest(model=state["model"], max_tokens=4), **opts))
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.INVALID_ARGUMENT,
                  f"expected INVALID_ARGUMENT, got {e.code().name}: {e.details()}")
            check(e.details(), "the error has no message")
            return
        raise CheckError(f"expected INVALID_ARGUMENT, got {len(events)} events")

    def cancel_long_chat():
        req = pb.ChatRequest(model=state["model"], messages=hello, max_tokens=2000)
        call = stub.Chat(req, **opts)
        first = next(call)
        check(first.WhichOneof("event") in ("delta", "done"), "odd first event")
        call.cancel()
        try:
            for _ in call:
                pass
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.CANCELLED,
                  f"after cancel(): {e.code().name}: {e.details()}")
        # The server took the cancellation in its stride.
        health_serving()
        events = list(stub.Chat(pb.ChatRequest(model=state["model"], messages=hello,
                                               max_tokens=4), **opts))
        check(events and events[-1].WhichOneof("event") == "done",
              "the chat after the cancel did not finish with done")
        check_done(events[-1].done, 4, "chat after cancel")

    run.step("Health is SERVING", health_serving)
    run.step("ListModels lists exactly one model", list_models)
    run.step("Tokenize/Detokenize round trip of 'Hello, world'", tokenize_round_trip)
    run.step("Chat (streamed, max_tokens 12): deltas, then one done with usage", chat_stream)
    run.step("Complete with prompt_ids (max_tokens 8)", complete_ids)
    run.step("Chat with no messages -> INVALID_ARGUMENT", empty_messages_invalid)
    run.step("cancel a long Chat after the first event; the server still serves",
             cancel_long_chat)
    channel.close()
    print(f"{run.passed} passed, {run.failed} failed")
    return 0 if run.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
