#!/usr/bin/python3
"""Prints engined's Stats (k3serve.v1.EngineService/Stats) as one JSON line.

    /usr/bin/python3 tests/web/engined_stats.py unix:/path/engined.sock

The browser test reads requests_cancelled from it: a Stop in the page must
reach engined as a cancelled request. Stubs are generated at run time as
tests/e2e/grpc_client.py does (Debian's python3-grpcio, protoc).
"""

import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e"))
import grpc_client  # noqa: E402  (generate_stubs; exits when grpc is missing)
import grpc  # noqa: E402


def plain(msg):
    """A message as JSON-ready values: numbers stay numbers (json_format would
    write 64-bit integers as strings), nested and repeated messages recurse."""
    out = {}
    for f in msg.DESCRIPTOR.fields:
        v = getattr(msg, f.name)
        if f.label == f.LABEL_REPEATED:
            out[f.name] = [plain(x) if f.message_type else x for x in v]
        elif f.message_type:
            out[f.name] = plain(v)
        else:
            out[f.name] = v
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: engined_stats.py unix:PATH | HOST:PORT")
    stub_dir = tempfile.mkdtemp(prefix="k3-engined-stats-")
    try:
        grpc_client.generate_stubs(stub_dir)
        sys.path.insert(0, stub_dir)
        from k3serve.v1 import engine_pb2 as pb
        from k3serve.v1 import engine_pb2_grpc as pb_grpc
        stub = pb_grpc.EngineServiceStub(grpc.insecure_channel(sys.argv[1]))
        stats = stub.Stats(pb.EngineStatsRequest(), timeout=10)
        print(json.dumps(plain(stats)))
    finally:
        shutil.rmtree(stub_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
