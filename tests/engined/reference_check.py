#!/usr/bin/python3
"""engined against the independent numpy reference (tests/reference/k3_ref.py).

1. Exactness: on two different mkmodel configurations, `engined score
   --dense-bits 32` (float expert kernel) must match the float64 reference
   with relative L2 <= 1e-4 at every position and the same argmax.
2. Quantized paths, on a well-conditioned configuration (2 layers, top-k =
   all experts, so no routing choice): mean KL and relative L2 of the logits
   against f32, for int8-per-row and int4-g64 dense weights and for the
   int8-activation expert kernel, must sit near the figures a correct
   quantizer gives (issue 3) and are printed as JSON lines.

Usage: reference_check.py BUILD_BIN_DIR SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

BIN, SRC = sys.argv[1], sys.argv[2]
REF = os.path.join(SRC, "tests", "reference", "k3_ref.py")
failures = []


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    return r


def mkmodel(out, *flags):
    run([f"{BIN}/k3ctl", "mkmodel", "--out", out, "--log-level", "warn", *flags])
    with open(os.path.join(out, "config.json")) as f:
        return json.load(f)["text_config"]["vocab_size"]


def score(model, ids, out, *flags):
    run([f"{BIN}/engined", "score", "--model", model, "--ids", ",".join(map(str, ids)),
         "--out", out, "--log-level", "warn", *flags])
    return np.fromfile(out, dtype="<f4")


def reference(model, ids, out):
    run([sys.executable, REF, "--model", model, "--ids", ",".join(map(str, ids)), "--out", out])
    return np.fromfile(out, dtype="<f4")


def rel_l2(a, b):
    return np.linalg.norm(a - b, axis=-1) / np.linalg.norm(b, axis=-1)


def kl(p_logits, q_logits):
    """Mean KL(p || q) over positions, p = reference."""
    def logsoftmax(x):
        x = x - x.max(axis=-1, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
    lp, lq = logsoftmax(p_logits.astype(np.float64)), logsoftmax(q_logits.astype(np.float64))
    return float((np.exp(lp) * (lp - lq)).sum(axis=-1).mean())


def check(name, ok, detail):
    print(json.dumps({"check": name, "ok": bool(ok), **detail}))
    if not ok:
        failures.append(name)


with tempfile.TemporaryDirectory() as tmp:
    rng = np.random.default_rng(7)
    configs = {
        "tiny": [],
        # Different hidden size, layer count, block size and head counts.
        "alt": ["--hidden", "384", "--layers", "7", "--block-size", "3", "--kda-heads", "6",
                "--kda-head-dim", "32", "--mla-heads", "3", "--experts", "12", "--top-k", "3",
                "--latent", "160", "--expert-inter", "96", "--seed", "5"],
    }
    for name, flags in configs.items():
        model = os.path.join(tmp, name)
        vocab = mkmodel(model, *flags)
        ids = rng.integers(0, vocab, size=24).tolist()
        ours = score(model, ids, os.path.join(tmp, f"{name}.eng"), "--dense-bits", "32")
        ref = reference(model, ids, os.path.join(tmp, f"{name}.ref"))
        ours, ref = ours.reshape(len(ids), vocab), ref.reshape(len(ids), vocab)
        r = rel_l2(ours, ref)
        same = (ours.argmax(-1) == ref.argmax(-1)).all()
        check(f"f32_vs_reference_{name}", r.max() <= 1e-4 and same,
              {"max_rel_l2": float(r.max()), "argmax_identical": bool(same), "positions": len(ids)})

    # Well-conditioned configuration: 2 layers, every expert selected.
    model = os.path.join(tmp, "wc")
    vocab = mkmodel(model, "--layers", "2", "--experts", "8", "--top-k", "8", "--seed", "11")
    ids = rng.integers(0, vocab, size=32).tolist()
    base = score(model, ids, os.path.join(tmp, "wc32"), "--dense-bits", "32").reshape(-1, vocab)
    ref = reference(model, ids, os.path.join(tmp, "wcref")).reshape(-1, vocab)
    check("wc_f32_vs_reference", rel_l2(base, ref).max() <= 1e-4,
          {"max_rel_l2": float(rel_l2(base, ref).max())})
    # (flags, max mean KL, max mean rel-L2). Measured on this seeded model with
    # round-to-nearest: int8 KL 1.3e-4 / rel-L2 0.016, int4-g64 0.030 / 0.24,
    # int8 activations rel-L2 0.0065. The same code with truncation instead of
    # rounding gives 4.9e-4 / 0.030, 0.082 / 0.39 and 0.011: the bounds sit
    # between the two, so a quantizer that truncates (or is otherwise coarser)
    # fails here.
    cases = {
        "dense_int8": (["--dense-bits", "8", "--mla-bits", "8", "--head-bits", "8",
                        "--expert-kernel", "float"], 2.5e-4, 0.022),
        "dense_int4": (["--dense-bits", "4", "--mla-bits", "4", "--head-bits", "4",
                        "--expert-kernel", "float"], 0.05, 0.31),
        "expert_int8_activations": (["--dense-bits", "32", "--expert-kernel", "int8"], 4e-5, 0.0085),
    }
    for name, (flags, max_kl, max_rel) in cases.items():
        q = score(model, ids, os.path.join(tmp, name), *flags).reshape(-1, vocab)
        k, r = kl(base, q), float(rel_l2(q, base).mean())
        agree = float((q.argmax(-1) == base.argmax(-1)).mean())
        check(f"quantized_{name}", k <= max_kl and r <= max_rel,
              {"mean_kl": k, "mean_rel_l2": r, "argmax_agreement": agree,
               "bounds": {"kl": max_kl, "rel_l2": max_rel}})

print(f"{len(failures)} failed" if failures else "reference_check: all passed")
sys.exit(1 if failures else 0)
