#!/usr/bin/env python3
"""Independent float64 numpy reference of the Kimi K3 forward pass.

The numerical contract is shared/design/K3_MODEL.md; this file follows it
literally and shares no code with the C++ engine.  Everything is computed in
float64 (a gold reference for the f32 engine).

    /usr/bin/python3 tests/reference/k3_ref.py --model DIR --ids 1,2,3 --out FILE
        [--layers N] [--chunk N] [--kda recurrent|matrix|chunked] [--mla plain|absorbed]

writes every position's teacher-forced logits as raw little-endian float32
[T, vocab].  The defaults (token-by-token, recurrent KDA, plain MLA) are the
literal formulas of K3_MODEL.md; the other choices are algebraically equal
forms, cross-checked by selftest.py.

Shapes are written in braces: x {T,D} is T rows of width D.
"""

import argparse
import json
import os
import sys

import numpy as np

MXFP4_MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float64)
LATENT_NORM_EPS = 1e-6   # q_a_layernorm / kv_a_layernorm (K3_MODEL.md, gated MLA)
KDA_L2_EPS = 1e-6        # inside the sqrt of the q/k L2 norm
KDA_CHUNK = 16           # chunk length of the chunked (WY-form) delta rule


class RefError(Exception):
    """Bad input (config, checkpoint, ids): reported on stderr, exit code 1."""


# ----------------------------------------------------------------------------
# safetensors reader
# ----------------------------------------------------------------------------

_DTYPES = {"BF16": ("<u2", 2), "F16": ("<f2", 2), "F32": ("<f4", 4), "U8": ("u1", 1)}


def parse_safetensors_header(path):
    """Returns {name: (dtype, shape, absolute_begin, absolute_end)} of one file."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise RefError(f"{path}: shorter than the 8-byte header length")
            n = int.from_bytes(head, "little")
            if n > size - 8:
                raise RefError(f"{path}: header length {n} exceeds the file size {size}")
            header = json.loads(f.read(n).decode("utf-8"))
    except OSError as e:
        raise RefError(f"cannot read {path}: {e}")
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RefError(f"{path}: header is not valid JSON: {e}")
    if not isinstance(header, dict):
        raise RefError(f"{path}: header is not a JSON object")
    data_start = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise RefError(f"{path}: tensor {name}: malformed header entry")
        if dtype not in _DTYPES:
            raise RefError(f"{path}: tensor {name}: unsupported dtype {dtype}")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise RefError(f"{path}: tensor {name}: bad shape {shape}")
        nbytes = int(np.prod(shape, dtype=np.int64)) * _DTYPES[dtype][1]
        if not (isinstance(b, int) and isinstance(e, int) and 0 <= b <= e):
            raise RefError(f"{path}: tensor {name}: bad data_offsets")
        if e - b != nbytes or data_start + e > size:
            raise RefError(f"{path}: tensor {name}: data_offsets [{b},{e}) do not match "
                           f"{dtype}{shape} or run past the end of the file")
        out[name] = (dtype, tuple(shape), data_start + b, data_start + e)
    return out


class Checkpoint:
    """Tensor directory of a model folder (index + shards, or one file)."""

    def __init__(self, model_dir):
        self.dir = model_dir
        self.entries = {}  # name -> (path, dtype, shape, begin, end)
        index = os.path.join(model_dir, "model.safetensors.index.json")
        single = os.path.join(model_dir, "model.safetensors")
        if os.path.exists(index):
            try:
                with open(index) as f:
                    weight_map = json.load(f)["weight_map"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise RefError(f"{index}: cannot read weight_map: {e}")
            headers = {}
            for name, fname in weight_map.items():
                if not isinstance(fname, str) or "/" in fname or fname.startswith("."):
                    raise RefError(f"{index}: bad shard name for {name}")
                if fname not in headers:
                    headers[fname] = parse_safetensors_header(os.path.join(model_dir, fname))
                if name not in headers[fname]:
                    raise RefError(f"{index}: tensor {name} is not in {fname}")
                self.entries[name] = (os.path.join(model_dir, fname),) + headers[fname][name]
        elif os.path.exists(single):
            for name, e in parse_safetensors_header(single).items():
                self.entries[name] = (single,) + e
        else:
            raise RefError(f"{model_dir}: neither model.safetensors.index.json nor model.safetensors")

    def has(self, name):
        return name in self.entries

    def shape(self, name):
        return self.entries[name][2]

    def read(self, name):
        """Raw tensor: float64 for BF16/F16/F32, uint8 for U8, in its stored shape."""
        path, dtype, shape, b, e = self.entries[name]
        np_dtype, itemsize = _DTYPES[dtype]
        raw = np.fromfile(path, dtype=np_dtype, count=(e - b) // itemsize, offset=b)
        if dtype == "BF16":  # bf16 is the top half of an f32
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        if dtype != "U8":
            raw = raw.astype(np.float64)
        return raw.reshape(shape)


# ----------------------------------------------------------------------------
# config.json
# ----------------------------------------------------------------------------

class Config:
    """Validated text-model configuration (K3_MODEL.md, config.json)."""

    def __init__(self, root):
        c = root.get("text_config") or root
        if not isinstance(c, dict):
            raise RefError("config.json: text_config is not an object")
        self.raw = c

        def num(key, kind=int, lo=None, hi=None, default=None, required=True):
            v = c.get(key, None)
            if v is None:
                if default is not None or not required:
                    return default
                raise RefError(f"config.json: missing key {key}")
            if kind is int:
                ok = isinstance(v, int) and not isinstance(v, bool)
            else:
                ok = isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)
            if not ok or (lo is not None and v < lo) or (hi is not None and v > hi):
                raise RefError(f"config.json: {key} = {v!r} is out of range")
            return kind(v)

        self.D = num("hidden_size", lo=1)
        self.n_layers = num("num_hidden_layers", lo=1)
        self.V = num("vocab_size", lo=1)
        self.first_dense = num("first_k_dense_replace", lo=0, hi=self.n_layers)
        self.eps = num("rms_norm_eps", float, lo=1e-30, hi=1.0)
        self.block = num("attn_res_block_size", lo=1)
        self.b1 = num("activation_situ_beta", float, lo=1e-30)
        self.b2 = num("activation_situ_linear_beta", float, lo=1e-30)
        self.tie = bool(c.get("tie_word_embeddings", root.get("tie_word_embeddings", False)))
        for key in ("bos_token_id", "eos_token_id"):
            v = c.get(key, root.get(key))
            ids = v if isinstance(v, list) else ([] if v is None else [v])
            if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.V for i in ids):
                raise RefError(f"config.json: {key} = {v!r} is out of range")

        # layer kinds
        lac = c.get("linear_attn_config") or {}
        if not isinstance(lac, dict):
            raise RefError("config.json: linear_attn_config is not an object")
        kda = lac.get("kda_layers", [])
        if not (isinstance(kda, list) and all(isinstance(i, int) and 1 <= i <= self.n_layers for i in kda)
                and len(set(kda)) == len(kda)):
            raise RefError(f"config.json: linear_attn_config.kda_layers = {kda!r} is invalid")
        self.is_kda = [(L + 1) in kda for L in range(self.n_layers)]
        full = lac.get("full_attn_layers")
        if full is not None:
            expect = sorted(L + 1 for L in range(self.n_layers) if not self.is_kda[L])
            if not isinstance(full, list) or sorted(full) != expect:
                raise RefError("config.json: linear_attn_config.full_attn_layers is not the "
                               "complement of kda_layers")
        if any(self.is_kda):
            def lnum(key, lo, kind=int, hi=None):
                v = lac.get(key)
                ok = isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)
                if kind is int:
                    ok = ok and isinstance(v, int)
                if not ok or v < lo or (hi is not None and v > hi):
                    raise RefError(f"config.json: linear_attn_config.{key} = {v!r} is out of range")
                return kind(v)
            self.kda_heads = lnum("num_heads", 1)
            self.kda_dim = lnum("head_dim", 1)
            self.conv_k = lnum("short_conv_kernel_size", 1)
            self.gate_lb = lnum("gate_lower_bound", -1e6, float, hi=0.0)

        # MLA
        if not all(self.is_kda):
            self.mla_heads = num("num_attention_heads", lo=1)
            self.q_lora = num("q_lora_rank", lo=1)
            self.kv_lora = num("kv_lora_rank", lo=1)
            self.nope = num("qk_nope_head_dim", lo=0)
            self.rope = num("qk_rope_head_dim", lo=0)
            self.v_dim = num("v_head_dim", lo=1)
            if self.nope + self.rope < 1:
                raise RefError("config.json: qk_nope_head_dim + qk_rope_head_dim must be positive")

        # FFN
        if self.first_dense > 0:
            self.inter = num("intermediate_size", lo=1)
        if self.first_dense < self.n_layers:
            self.E = num("num_experts", lo=1)
            self.top_k = num("num_experts_per_token", lo=1, hi=self.E)
            self.I_e = num("moe_intermediate_size", lo=1)
            self.latent = num("routed_expert_hidden_size", lo=1)
            self.n_shared = num("num_shared_experts", lo=0)
            self.scaling = num("routed_scaling_factor", float, lo=1e-30, default=1.0)
            for key in ("I_e", "latent"):
                if getattr(self, key) % 32:
                    name = "moe_intermediate_size" if key == "I_e" else "routed_expert_hidden_size"
                    raise RefError(f"config.json: {name} must be a multiple of 32 (MXFP4 groups)")
            for key in ("n_group", "num_expert_group"):
                v = c.get(key)
                if v is not None and v != 1:
                    raise RefError(f"config.json: {key} = {v!r}: group-limited routing is not supported")


# ----------------------------------------------------------------------------
# numerics shared by the layers
# ----------------------------------------------------------------------------

def sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def rms_norm(x, w, eps):
    """x {..., n}, w {n}: x / sqrt(mean(x^2) + eps) * w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def situ(g, u, b1, b2):
    """SiTU(g, u) = b1 tanh(g/b1) sigma(g) * b2 tanh(u/b2)."""
    return b1 * np.tanh(g / b1) * sigmoid(g) * (b2 * np.tanh(u / b2))


def dequant_mxfp4(packed, scale):
    """packed {O, I/2} u8, scale {O, I/32} u8 -> w {O, I} f64 (exact).

    Low nibble = even column; bit 3 = sign; bits 0-2 index MXFP4_MAGNITUDES;
    ue8m0 scale per 32 columns: 2^(s-127); s = 255 gives NaN.
    """
    O, half = packed.shape
    codes = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(O, 2 * half)  # {O, I}
    vals = MXFP4_MAGNITUDES[codes & 7]
    vals = np.where(codes & 8, -vals, vals)
    s = scale.astype(np.int64)
    factor = np.ldexp(1.0, s - 127)
    factor = np.where(s == 255, np.nan, factor)  # {O, I/32}
    return vals * np.repeat(factor, 32, axis=1)


def attn_res_mix(v, bank, w, eps):
    """AttnRes mix. v {T,D}, bank: list of {T,D}, w {D} -> {T,D}.

    entries = bank + [v]; score_e = (entry_e . w) / sqrt(mean(entry_e^2) + eps);
    softmax over entries, per position; weighted sum of the raw entries.
    """
    entries = np.stack(list(bank) + [v])                                     # {N,T,D}
    score = (entries @ w) / np.sqrt(np.mean(entries * entries, axis=-1) + eps)  # {N,T}
    score = score - score.max(axis=0, keepdims=True)
    p = np.exp(score)
    p /= p.sum(axis=0, keepdims=True)
    return np.einsum("nt,ntd->td", p, entries)


def route(scores, bias, top_k, scaling):
    """LatentMoE routing for one token. scores {E} = sigma(router logits), bias {E}.

    Top-k of (scores + bias), ties -> lower expert id first (stable sort);
    weights are the raw scores renormalized over the selection, times scaling.
    Returns (ids {k}, weights {k}).
    """
    sel = np.argsort(-(scores + bias), kind="stable")[:top_k]
    w = scores[sel] / scores[sel].sum() * scaling
    return sel, w


# ----------------------------------------------------------------------------
# KDA delta rule: three algebraically equal forms
# ----------------------------------------------------------------------------
# q, k {T,H,d} (already normalized/scaled), v {T,H,d}, g {T,H,d} = log alpha,
# beta {T,H}, S0 {H,d,d} with S[k][v].  Return (o {T,H,d}, S_T {H,d,d}).

def delta_rule_recurrent(q, k, v, g, beta, S0):
    """Literal K3_MODEL.md: S <- Diag(a) S; S <- S + k ((v - k^T S) beta)^T; o = q^T S."""
    S = S0.copy()
    o = np.empty_like(v)
    alpha = np.exp(g)
    for t in range(q.shape[0]):
        S = alpha[t][:, :, None] * S                                   # scale row k
        kS = np.einsum("hk,hkv->hv", k[t], S)                          # {H,d}
        S = S + k[t][:, :, None] * ((v[t] - kS) * beta[t][:, None])[:, None, :]
        o[t] = np.einsum("hk,hkv->hv", q[t], S)
    return o, S


def delta_rule_matrix(q, k, v, g, beta, S0):
    """Equivalent form: S = (I - beta k k^T) Diag(alpha) S + beta k v^T."""
    H, d = S0.shape[0], S0.shape[1]
    S = S0.copy()
    o = np.empty_like(v)
    alpha = np.exp(g)
    eye = np.eye(d)
    for t in range(q.shape[0]):
        b = beta[t][:, None, None]
        A = eye[None] - b * np.einsum("hi,hj->hij", k[t], k[t])          # {H,d,d}
        S = A @ (alpha[t][:, :, None] * S) + b * np.einsum("hi,hj->hij", k[t], v[t])
        o[t] = np.einsum("hk,hkv->hv", q[t], S)
    return o, S


def delta_rule_chunked(q, k, v, g, beta, S0, chunk=KDA_CHUNK):
    """Chunkwise (WY / UT-transform) form, an independent algorithm.

    In a chunk with cumulative log decay G_t = sum_{r<=t} g_r (per key channel),
        S_t = Diag(e^{G_t}) (S0 + sum_{s<=t} (k_s e^{-G_s}) u_s^T),
        u_t = beta_t (v_t - (k_t e^{G_t})^T S0 - sum_{s<t} M_ts u_s),
        M_ts = sum_c k_t[c] k_s[c] e^{G_t[c]-G_s[c]},
    so U solves the unit lower-triangular system (I + diag(beta) tril(M, -1)) U = ...,
    and o_t = (q_t e^{G_t})^T S0 + sum_{s<=t} (sum_c q_t[c] k_s[c] e^{G_t[c]-G_s[c]}) u_s.
    """
    T = q.shape[0]
    S = S0.copy()
    o = np.empty_like(v)
    for c0 in range(0, T, chunk):
        c1 = min(T, c0 + chunk)
        C = c1 - c0
        qc, kc, vc, bc = q[c0:c1], k[c0:c1], v[c0:c1], beta[c0:c1]   # {C,H,d}, beta {C,H}
        G = np.cumsum(g[c0:c1], axis=0)                                 # {C,H,d}
        diff = G[:, None] - G[None, :]                                  # {C(t),C(s),H,d}
        causal = np.tril(np.ones((C, C), dtype=bool))                   # s <= t
        decay = np.exp(np.where(causal[:, :, None, None], diff, 0.0))
        M = np.einsum("thc,shc,tshc->hts", kc, kc, decay)                # {H,C,C}
        Qk = np.einsum("thc,shc,tshc->hts", qc, kc, decay) * causal      # {H,C,C}
        kG = kc * np.exp(G)                                              # {C,H,d}
        rhs = bc.T[:, :, None] * (vc.transpose(1, 0, 2) - np.einsum("thc,hcv->htv", kG, S))
        A = np.eye(C)[None] + bc.T[:, :, None] * np.tril(M, -1)          # {H,C,C}
        U = np.linalg.solve(A, rhs)                                      # {H,C,d}
        qG = qc * np.exp(G)
        o[c0:c1] = (np.einsum("thc,hcv->htv", qG, S) + Qk @ U).transpose(1, 0, 2)
        k_end = kc * np.exp(G[-1][None] - G)                             # {C,H,d}
        S = np.exp(G[-1])[:, :, None] * S + np.einsum("thc,htv->hcv", k_end, U)
    return o, S


DELTA_RULES = {"recurrent": delta_rule_recurrent, "matrix": delta_rule_matrix,
               "chunked": delta_rule_chunked}


# ----------------------------------------------------------------------------
# layers; every forward takes the RMSNorm-ed input x {T,D} of T new tokens
# and a per-layer state dict that carries history across calls
# ----------------------------------------------------------------------------

def causal_conv(pre, hist, w):
    """Depthwise causal conv over time. pre {T,P} new rows, hist {K-1,P} the
    previous pre-conv rows (zeros at sequence start), w {P,K}.
    out[t] = sum_j w[:, j] * x[t - (K-1) + j]: tap K-1 multiplies the current token.
    Returns (out {T,P}, new hist {K-1,P})."""
    T, K = pre.shape[0], w.shape[1]
    xs = np.concatenate([hist, pre], axis=0)                            # {K-1+T,P}
    out = sum(w[:, j] * xs[j:j + T] for j in range(K))                  # {T,P}
    return out, xs[xs.shape[0] - (K - 1):]


def kda_forward(p, cfg, x, state, algo="recurrent"):
    """Kimi Delta Attention. x {T,D} -> {T,D}. state: conv {3,K-1,P}, S {H,d,d}."""
    T = x.shape[0]
    H, d, K = cfg.kda_heads, cfg.kda_dim, cfg.conv_k
    P = H * d
    if not state:
        state["conv"] = np.zeros((3, K - 1, P))  # zero history at sequence start
        state["S"] = np.zeros((H, d, d))
    qkv = []
    for i, name in enumerate(("q", "k", "v")):
        pre = x @ p[name + "_proj"].T                                   # {T,P}
        out, state["conv"][i] = causal_conv(pre, state["conv"][i], p[name + "_conv1d"])
        qkv.append(silu(out).reshape(T, H, d))
    q, k, v = qkv                                                       # {T,H,d}
    q = q / np.sqrt(np.sum(q * q, axis=-1, keepdims=True) + KDA_L2_EPS) * d ** -0.5
    k = k / np.sqrt(np.sum(k * k, axis=-1, keepdims=True) + KDA_L2_EPS)
    z = ((x @ p["f_a_proj"].T) @ p["f_b_proj"].T + p["dt_bias"]).reshape(T, H, d)
    g = cfg.gate_lb * sigmoid(np.exp(p["A_log"])[None, :, None] * z)    # log alpha {T,H,d}
    beta = sigmoid(x @ p["b_proj"].T)                                   # {T,H}
    o, state["S"] = DELTA_RULES[algo](q, k, v, g, beta, state["S"])     # {T,H,d}
    gate = sigmoid(x @ p["g_proj"].T).reshape(T, H, d)
    o = rms_norm(o, p["o_norm"], cfg.eps) * gate
    return o.reshape(T, P) @ p["o_proj"].T


def mla_attend(q_nope, q_r, ckv, kr, w_kvb, n_past, nope, absorbed):
    """Causal attention of T new queries over the N cached positions.

    q_nope {T,H,nope}, q_r {T,H,rope}, ckv {N,kv_lora}, kr {N,rope},
    w_kvb {H,nope+v,kv_lora}; new query i sits at position n_past + i.
    Returns {T,H,v}.
    """
    T, H = q_nope.shape[0], q_nope.shape[1]
    N = ckv.shape[0]
    scale = (q_nope.shape[2] + q_r.shape[2]) ** -0.5
    w_k, w_v = w_kvb[:, :nope], w_kvb[:, nope:]                          # {H,nope,c}, {H,v,c}
    rope_score = np.einsum("thr,sr->hts", q_r, kr)                       # {H,T,N}
    if absorbed:
        q_lat = np.einsum("thn,hnc->thc", q_nope, w_k)                   # {T,H,c}
        score = np.einsum("thc,sc->hts", q_lat, ckv) + rope_score
    else:
        k_nope = np.einsum("sc,hnc->shn", ckv, w_k)                      # {N,H,nope}
        score = np.einsum("thn,shn->hts", q_nope, k_nope) + rope_score
    score = score * scale
    visible = np.arange(N)[None, :] <= (n_past + np.arange(T))[:, None]  # {T,N}
    score = np.where(visible[None], score, -np.inf)
    score -= score.max(axis=-1, keepdims=True)
    prob = np.exp(score)
    prob /= prob.sum(axis=-1, keepdims=True)                             # {H,T,N}
    if absorbed:
        lat = np.einsum("hts,sc->thc", prob, ckv)                        # {T,H,c}
        return np.einsum("thc,hvc->thv", lat, w_v)
    v = np.einsum("sc,hvc->shv", ckv, w_v)                               # {N,H,v}
    return np.einsum("hts,shv->thv", prob, v)


def mla_forward(p, cfg, x, state, absorbed=False):
    """Gated MLA, NoPE. x {T,D} -> {T,D}. state: ckv {N,kv_lora}, kr {N,rope}."""
    T = x.shape[0]
    H, nope, rope, vd, kvl = cfg.mla_heads, cfg.nope, cfg.rope, cfg.v_dim, cfg.kv_lora
    if not state:
        state["ckv"] = np.zeros((0, kvl))
        state["kr"] = np.zeros((0, rope))
    cq = rms_norm(x @ p["q_a_proj"].T, p["q_a_layernorm"], LATENT_NORM_EPS)  # {T,q_lora}
    q = (cq @ p["q_b_proj"].T).reshape(T, H, nope + rope)
    c = x @ p["kv_a_proj_with_mqa"].T                                    # {T,kvl+rope}
    ckv = rms_norm(c[:, :kvl], p["kv_a_layernorm"], LATENT_NORM_EPS)     # {T,kvl}
    n_past = state["ckv"].shape[0]
    state["ckv"] = np.concatenate([state["ckv"], ckv])
    state["kr"] = np.concatenate([state["kr"], c[:, kvl:]])              # raw, shared by heads
    w_kvb = p["kv_b_proj"].reshape(H, nope + vd, kvl)
    att = mla_attend(q[:, :, :nope], q[:, :, nope:], state["ckv"], state["kr"], w_kvb,
                     n_past, nope, absorbed)                             # {T,H,v}
    gate = sigmoid(x @ p["g_proj"].T)                                    # {T,H*v}
    return (att.reshape(T, H * vd) * gate) @ p["o_proj"].T


def dense_ffn_forward(p, cfg, x):
    """x {T,D} -> W_down SiTU(W_gate x, W_up x) {T,D}."""
    return situ(x @ p["gate_proj"].T, x @ p["up_proj"].T, cfg.b1, cfg.b2) @ p["down_proj"].T


def moe_forward(p, cfg, x, expert):
    """LatentMoE. x {T,D} -> {T,D}. expert(n) -> (w1 {I_e,lat}, w3 {I_e,lat}, w2 {lat,I_e})."""
    T = x.shape[0]
    scores = sigmoid(x @ p["gate"].T)                                    # {T,E}
    z = x @ p["routed_expert_down_proj"].T                               # {T,latent}
    routing = [route(scores[t], p["e_score_correction_bias"], cfg.top_k, cfg.scaling)
               for t in range(T)]
    u = np.zeros((T, cfg.latent))
    for n in sorted({int(i) for sel, _ in routing for i in sel}):        # ascending expert id
        rows, ws = [], []
        for t, (sel, w) in enumerate(routing):
            hit = np.nonzero(sel == n)[0]
            if hit.size:
                rows.append(t)
                ws.append(w[hit[0]])
        w1, w3, w2 = expert(n)
        zr = z[rows]                                                     # {r,latent}
        u[rows] += np.array(ws)[:, None] * (situ(zr @ w1.T, zr @ w3.T, cfg.b1, cfg.b2) @ w2.T)
    y = rms_norm(u, p["routed_expert_norm"], cfg.eps) @ p["routed_expert_up_proj"].T
    if cfg.n_shared:
        y = y + situ(x @ p["shared_experts.gate_proj"].T, x @ p["shared_experts.up_proj"].T,
                     cfg.b1, cfg.b2) @ p["shared_experts.down_proj"].T
    return y


# ----------------------------------------------------------------------------
# the model: weights bound by name with shape checks, then the AttnRes stack
# ----------------------------------------------------------------------------

class Model:
    def __init__(self, model_dir, n_layers=None):
        cfg_path = os.path.join(model_dir, "config.json")
        try:
            with open(cfg_path) as f:
                root = json.load(f)
        except (OSError, ValueError) as e:
            raise RefError(f"{cfg_path}: {e}")
        if not isinstance(root, dict):
            raise RefError(f"{cfg_path}: not a JSON object")
        self.cfg = cfg = Config(root)
        self.ckpt = Checkpoint(model_dir)
        self.prefix = ""
        if not self.ckpt.has("model.embed_tokens.weight"):
            if self.ckpt.has("language_model.model.embed_tokens.weight"):
                self.prefix = "language_model."
            else:
                raise RefError("missing tensor model.embed_tokens.weight")
        if n_layers is None:
            n_layers = cfg.n_layers
        if not 1 <= n_layers <= cfg.n_layers:
            raise RefError(f"--layers {n_layers}: the model has {cfg.n_layers} layers")
        self.n_layers = n_layers
        self._experts = {}

        D, V = cfg.D, cfg.V
        self.embed = self.tensor("model.embed_tokens.weight", (V, D))
        self.norm = self.tensor("model.norm.weight", (D,))
        self.out_sw = (self.tensor("model.output_attn_res_norm.weight", (D,))
                       * self.tensor("model.output_attn_res_proj.weight", (D,)))
        self.lm_head = self.embed if cfg.tie else self.tensor("lm_head.weight", (V, D))
        self.layers = [self.bind_layer(L) for L in range(n_layers)]

    def tensor(self, name, shape):
        """Dense tensor as f64 in `shape`. The name may omit/carry a `.weight`
        suffix; [1,D] / [P,1,K] stored shapes are accepted for {D} / {P,K}."""
        full = self.prefix + name
        cands = [full, full + ".weight"]
        if full.endswith(".weight"):
            cands.append(full[: -len(".weight")])
        for cand in cands:
            if self.ckpt.has(cand):
                break
        else:
            raise RefError(f"missing tensor {full}")
        dtype = self.ckpt.entries[cand][1]
        if dtype == "U8":
            raise RefError(f"tensor {cand}: dense tensors must be BF16, F16 or F32, not U8")
        got = self.ckpt.shape(cand)
        if int(np.prod(got)) != int(np.prod(shape)) or \
                [s for s in got if s != 1] != [s for s in shape if s != 1]:
            raise RefError(f"tensor {cand}: shape {list(got)}, expected {list(shape)}")
        return self.ckpt.read(cand).reshape(shape)

    def bind_layer(self, L):
        cfg, D = self.cfg, self.cfg.D
        pre = f"model.layers.{L}."
        t = lambda n, s: self.tensor(pre + n, s)
        lay = {"kind": "kda" if cfg.is_kda[L] else "mla", "ffn": "dense" if L < cfg.first_dense else "moe"}
        lay["input_layernorm"] = t("input_layernorm.weight", (D,))
        lay["post_attention_layernorm"] = t("post_attention_layernorm.weight", (D,))
        lay["asw"] = t("self_attention_res_norm.weight", (D,)) * t("self_attention_res_proj.weight", (D,))
        lay["msw"] = t("mlp_res_norm.weight", (D,)) * t("mlp_res_proj.weight", (D,))
        a = pre + "self_attn."
        ta = lambda n, s: self.tensor(a + n, s)
        if lay["kind"] == "kda":
            H, d, K = cfg.kda_heads, cfg.kda_dim, cfg.conv_k
            P = H * d
            at = {n: ta(n + ".weight", (P, D)) for n in ("q_proj", "k_proj", "v_proj", "g_proj")}
            at["o_proj"] = ta("o_proj.weight", (D, P))
            for n in ("q_conv1d", "k_conv1d", "v_conv1d"):
                at[n] = ta(n + ".weight", (P, K))
            at["f_a_proj"] = ta("f_a_proj.weight", (d, D))
            at["f_b_proj"] = ta("f_b_proj.weight", (P, d))
            at["b_proj"] = ta("b_proj.weight", (H, D))
            at["dt_bias"] = ta("dt_bias", (P,))
            at["o_norm"] = ta("o_norm.weight", (d,))
            name = self.prefix + a + "A_log"
            if not self.ckpt.has(name):
                raise RefError(f"missing tensor {name}")
            a_log = self.ckpt.read(name)
            if a_log.dtype == np.uint8 or a_log.size < H:
                raise RefError(f"tensor {name}: shape {list(a_log.shape)}, needs at least {H} entries")
            at["A_log"] = a_log.reshape(-1)[:H]   # stored zero-padded longer than heads
        else:
            H, nope, rope, vd = cfg.mla_heads, cfg.nope, cfg.rope, cfg.v_dim
            at = {"q_a_proj": ta("q_a_proj.weight", (cfg.q_lora, D)),
                  "q_a_layernorm": ta("q_a_layernorm.weight", (cfg.q_lora,)),
                  "q_b_proj": ta("q_b_proj.weight", (H * (nope + rope), cfg.q_lora)),
                  "kv_a_proj_with_mqa": ta("kv_a_proj_with_mqa.weight", (cfg.kv_lora + rope, D)),
                  "kv_a_layernorm": ta("kv_a_layernorm.weight", (cfg.kv_lora,)),
                  "kv_b_proj": ta("kv_b_proj.weight", (H * (nope + vd), cfg.kv_lora)),
                  "g_proj": ta("g_proj.weight", (H * vd, D)),
                  "o_proj": ta("o_proj.weight", (D, H * vd))}
        lay["attn"] = at
        if lay["ffn"] == "dense":
            m = pre + "mlp."
            lay["mlp"] = {"gate_proj": self.tensor(m + "gate_proj.weight", (cfg.inter, D)),
                          "up_proj": self.tensor(m + "up_proj.weight", (cfg.inter, D)),
                          "down_proj": self.tensor(m + "down_proj.weight", (D, cfg.inter))}
        else:
            m = pre + "block_sparse_moe."
            tm = lambda n, s: self.tensor(m + n, s)
            mp = {"gate": tm("gate.weight", (cfg.E, D)),
                  "e_score_correction_bias": tm("gate.e_score_correction_bias", (cfg.E,)),
                  "routed_expert_down_proj": tm("routed_expert_down_proj.weight", (cfg.latent, D)),
                  "routed_expert_up_proj": tm("routed_expert_up_proj.weight", (D, cfg.latent)),
                  "routed_expert_norm": tm("routed_expert_norm.weight", (cfg.latent,))}
            if cfg.n_shared:
                S = cfg.I_e * cfg.n_shared
                mp["shared_experts.gate_proj"] = tm("shared_experts.gate_proj.weight", (S, D))
                mp["shared_experts.up_proj"] = tm("shared_experts.up_proj.weight", (S, D))
                mp["shared_experts.down_proj"] = tm("shared_experts.down_proj.weight", (D, S))
            lay["mlp"] = mp
        return lay

    def expert(self, L, n):
        """Dequantized routed expert n of layer L: (w1, w3, w2), cached."""
        key = (L, n)
        if key not in self._experts:
            cfg = self.cfg
            base = f"{self.prefix}model.layers.{L}.block_sparse_moe.experts.{n}."
            mats = []
            for w, (O, I) in (("w1", (cfg.I_e, cfg.latent)), ("w3", (cfg.I_e, cfg.latent)),
                              ("w2", (cfg.latent, cfg.I_e))):
                packed, scale = base + w + ".weight_packed", base + w + ".weight_scale"
                for name, shape in ((packed, (O, I // 2)), (scale, (O, I // 32))):
                    if not self.ckpt.has(name):
                        raise RefError(f"missing tensor {name}")
                    if self.ckpt.entries[name][1] != "U8" or self.ckpt.shape(name) != shape:
                        raise RefError(f"tensor {name}: {self.ckpt.entries[name][1]}"
                                       f"{list(self.ckpt.shape(name))}, expected U8{list(shape)}")
                mats.append(dequant_mxfp4(self.ckpt.read(packed), self.ckpt.read(scale)))
            self._experts[key] = tuple(mats)
        return self._experts[key]

    # ------------------------------------------------------------------------

    def new_state(self):
        """Per-sequence recurrent state: one dict per layer (KDA or MLA cache)."""
        return [dict() for _ in range(self.n_layers)]

    def forward(self, ids, state, kda_algo="recurrent", mla_absorbed=False):
        """T new tokens ids {T} after the history in `state` -> logits {T,V}."""
        cfg = self.cfg
        stream = self.embed[np.asarray(ids)]                             # h0 {T,D}
        bank = []                                                        # AttnRes snapshots
        acc = None
        for L, lay in enumerate(self.layers):
            incoming = stream
            a_in = incoming if not bank else attn_res_mix(incoming, bank, lay["asw"], cfg.eps)
            if L % cfg.block == 0:
                bank.append(incoming)
                acc = np.zeros_like(incoming)
            else:
                acc = incoming
            x = rms_norm(a_in, lay["input_layernorm"], cfg.eps)
            if lay["kind"] == "kda":
                acc = acc + kda_forward(lay["attn"], cfg, x, state[L], kda_algo)
            else:
                acc = acc + mla_forward(lay["attn"], cfg, x, state[L], mla_absorbed)
            f_in = attn_res_mix(acc, bank, lay["msw"], cfg.eps)
            x = rms_norm(f_in, lay["post_attention_layernorm"], cfg.eps)
            if lay["ffn"] == "dense":
                stream = acc + dense_ffn_forward(lay["mlp"], cfg, x)
            else:
                stream = acc + moe_forward(lay["mlp"], cfg, x, lambda n, L=L: self.expert(L, n))
        out = attn_res_mix(stream, bank, self.out_sw, cfg.eps)
        return rms_norm(out, self.norm, cfg.eps) @ self.lm_head.T

    def score(self, ids, chunk=1, kda_algo="recurrent", mla_absorbed=False):
        """Teacher-forced logits {T,V} of every position, `chunk` tokens per call
        (chunk <= 0: the whole sequence in one causally masked call)."""
        for i in ids:
            if not 0 <= i < self.cfg.V:
                raise RefError(f"token id {i} is outside [0, {self.cfg.V})")
        state = self.new_state()
        step = max(1, len(ids)) if chunk <= 0 else chunk
        rows = [self.forward(ids[i:i + step], state, kda_algo, mla_absorbed)
                for i in range(0, len(ids), step)]
        return np.concatenate(rows)


def parse_ids(text):
    try:
        ids = [int(s) for s in text.split(",") if s.strip() != ""]
    except ValueError:
        raise RefError(f"--ids {text!r}: expected comma-separated integers")
    if not ids:
        raise RefError("--ids: no token ids")
    return ids


def main(argv=None):
    ap = argparse.ArgumentParser(description="Kimi K3 float64 numpy reference (teacher-forced logits)")
    ap.add_argument("--model", required=True, help="checkpoint folder (config.json + safetensors)")
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True, help="output: little-endian f32 [T, vocab]")
    ap.add_argument("--layers", type=int, default=None, help="run only the first N layers")
    ap.add_argument("--chunk", type=int, default=1,
                    help="tokens per forward call (1 = token by token, 0 = whole sequence)")
    ap.add_argument("--kda", choices=sorted(DELTA_RULES), default="recurrent",
                    help="delta-rule form (all equal up to rounding)")
    ap.add_argument("--mla", choices=["plain", "absorbed"], default="plain")
    args = ap.parse_args(argv)
    try:
        ids = parse_ids(args.ids)
        model = Model(args.model, args.layers)
        logits = model.score(ids, args.chunk, args.kda, args.mla == "absorbed")
        try:
            logits.astype("<f4").tofile(args.out)
        except OSError as e:
            raise RefError(f"cannot write {args.out}: {e}")
    except RefError as e:
        print(f"k3_ref: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
