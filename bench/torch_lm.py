#!/usr/bin/python3
"""PyTorch side of the char-LM benchmark: the character-level Transformer-LS language model of
docs/transformer-ls.md §3 (the causal long-short attention with memory of §3.3, DualLN, the
Transformer-XL position terms, the pre_ln layer wiring of §3.2, the tied embedding and the model
wrapper of §3.4, the loss of §3.6) written from the specification, loaded with lsformer's
weights, checked against lsformer's loss and gradients, and timed: training steps (forward +
backward + AdamW) and nothing else.

    build/bench/bench_lm --filter train/small --dump /tmp/lm      # lsformer writes the case
    /usr/bin/python3 bench/torch_lm.py /tmp/lm/small --threads 2  # check + time, JSON lines

DIR holds what `bench_lm --dump` writes: weights.safetensors (the model's state dict under the
official names: in_emb, out_emb.bias, layers.{i}.{attn, norm1, ff, norm2}) and io.safetensors
(memory.<i> [B, C, d], tokens and targets [B, M], lsformer's log_probs [B, M, V], loss and
grad.<parameter>; metadata: the configuration). Nothing here uses lsformer's code: the
safetensors reader is the format's few lines, the model is written from the spec.

The attention is written the way an efficient PyTorch program computes it (batched GEMMs, no
per-query loops, nothing of size [M, Nc, d]), in the spirit of the official ChunkedLSAttention:
  * window (§3.3 step 8): the queries are cut into segments of seg = min(M, w); segment g reads
    the key tile of seg + w rows starting at row g·seg of [last w memory rows ; block] (unfold,
    a view), one batched product per tile gives [seg, seg + w] logits, and the band of query i
    (tile columns i+1 … i+w) is read with a strided view; the position term (q̂ + v)·R_j W_R is one
    product with the [w, e] table per head. The probabilities go back into tile coordinates with
    the pad-and-reshape "relative shift" (row i shifted right by i + 1, zeros outside the band)
    and one batched product with the value tile gives the window's share of the output;
  * compressed slots (step 9): q̂·K̄ᵀ and q̂·(W_Rc·table + b)ᵀ as [M, Nc] products, the position
    term gathered at row nvis(t) − 1 − σ, hidden chunks (D ≤ 0) filled with −inf;
  * one softmax over [compressed | window] (step 10).

Check (before any timing): the same forward + backward in float32 (what is timed) and in
float64. The loss, the log-probabilities and every parameter gradient must satisfy
max|lsformer − PyTorch f32| ≤ tol · max(max|PyTorch f32|, floor), tol = 8·L·2^-24 with L = B·M
the longest reduction (a weight gradient sums over all B·M positions; the loss too): the usual
bound of a float32 sum of L terms relative to the tensor's own size, with a margin of 8. For
gradients, floor = 2^-10 · the largest |gradient| of the model: a tensor far smaller than the
model's gradients is held to the rounding of sums at the model's scale, not to its own size
(dconv_1.bias is the case: its exact gradient is 0, as a bias on all l logits of a chunk softmax
cancels, and both implementations return rounding noise ~1e-11). The JSON line reports each
tensor's differences from both PyTorch runs.

Timing (mirrors bench_lm.cpp): one call = one training step on the next of the cycled blocks
with the carried memory: forward, loss, optimizer.zero_grad(set_to_none=True), backward,
AdamW step (lr 2.5e-4, weight decay 0.01). `--warmup` calls, a calibration of calls per sample,
samples until >= --min-samples and >= --sample-time seconds (bench_common.time_call); median,
min, max. Memory: VmRSS (from /proc/self/status) before the first step and VmHWM after the
last, as bench_lm reads its own. Threads: torch.set_num_threads(N), and OPENBLAS_NUM_THREADS = N
before torch is imported (Debian's torch does its float GEMMs in libblas.so.3, which
set_num_threads does not reach; see torch_ops.py).
"""
import argparse
import json
import math
import os
import sys

from bench_common import add_peer_args, openblas_config, time_call as _time_call  # imports no torch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir", help="directory written by bench_lm --dump (DIR/<config>)")
    add_peer_args(p, sample_time=10.0, warmup=1, min_samples=5, max_samples=50)
    return p.parse_args()


ARGS = parse_args()
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
import torch  # noqa: E402  (after OPENBLAS_NUM_THREADS, which OpenBLAS reads when loaded)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_common import read_safetensors  # noqa: E402

BLOCKS = 4  # distinct token blocks the timed steps cycle through (as bench_lm.cpp)


def proc_status_bytes(field):
    """A field of /proc/self/status ("VmRSS", "VmHWM") in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return -1


def sincos(values, d, dtype):
    """§3.5: [sin(p·f_0) … sin(p·f_{d/2−1}), cos(p·f_0) … cos(p·f_{d/2−1})], f_k = 10000^{−2k/d},
    computed in float64 and cast."""
    f = 10000.0 ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    a = values.to(torch.float64)[:, None] * f
    return torch.cat([a.sin(), a.cos()], -1).to(dtype)


class CausalLongShortAttention(nn.Module):
    """§3.3 with the official parameter names (§3.1); no projection biases (use_bias false)."""

    def __init__(self, c):
        super().__init__()
        d, h = c["dim"], c["heads"]
        self.d, self.h, self.e = d, h, d // h
        self.l, self.r, self.w = c["chunk_length"], c["rank"], c["window"]
        self.dconv_1 = nn.Linear(d, h * self.r)
        self.r_net = nn.Linear(d, d, bias=False)
        self.r_net_chunk = nn.Linear(d, d)
        self.r_r_bias = nn.Parameter(torch.zeros(1, h, 1, self.e))
        self.r_w_bias = nn.Parameter(torch.zeros(1, h, 1, 1, self.e))
        self.proj_query = nn.Linear(d, d, bias=False)
        self.proj_out = nn.Linear(d, d, bias=False)
        self.proj_val = nn.Linear(d, d, bias=False)
        self.proj_key = nn.Linear(d, d, bias=False)
        self.dual_ln_dproj = nn.LayerNorm(d)
        self.dual_ln_win = nn.LayerNorm(d)
        self._index_cache = {}

    def heads(self, t):  # [B, L, d] -> [B, h, L, e]
        B, L, _ = t.shape
        return t.view(B, L, self.h, self.e).transpose(1, 2)

    def chunk_weights(self, z):
        """P [B, h, L/l, r, l]: softmax over the l tokens of each chunk of dconv_1(z) (head-major)."""
        B, L, _ = z.shape
        s = self.dconv_1(z).view(B, L // self.l, self.l, self.h, self.r)
        return s.permute(0, 3, 1, 4, 2).softmax(-1)

    def compress(self, vecs, p):
        """Head slices of vecs [B, L, d] weighted by p → [B, (L/l)·r, d], slot = chunk·r + rank."""
        B, L, d = vecs.shape
        n = L // self.l
        slices = vecs.view(B, n, self.l, self.h, self.e).permute(0, 3, 1, 2, 4)  # [B, h, n, l, e]
        return (p @ slices).permute(0, 2, 3, 1, 4).reshape(B, n * self.r, d)

    def indices(self, M, Nm, Nc, device):
        """Per (M, Nm): the chunk-position row of every (query, slot) and the hidden slots."""
        key = (M, Nm, Nc)
        if key not in self._index_cache:
            t = torch.arange(M, device=device)
            nvis = (Nm + t // self.l) * self.r                    # visible slots of query t
            sigma = torch.arange(Nc, device=device)
            row = nvis[:, None] - 1 - sigma[None, :]               # [M, Nc]
            self._index_cache[key] = (row.clamp(min=0), row < 0)
        return self._index_cache[key]

    def forward(self, x, xm, window_table, chunk_table):
        B, M, d = x.shape
        C, h, e, l, r, w = xm.shape[1], self.h, self.e, self.l, self.r, self.w
        Nm, Nb = C // l, M // l
        Nc = (Nm + Nb) * r
        q = self.heads(self.proj_query(x)) * e ** -0.5            # steps 1, 7: [B, h, M, e]
        kb, vb = self.proj_key(x), self.proj_val(x)                # step 3
        zm = self.compress(xm, self.chunk_weights(xm))             # step 2: compress, then project
        k_mem, v_mem = self.dual_ln_dproj(self.proj_key(zm)), self.dual_ln_dproj(self.proj_val(zm))
        pb = self.chunk_weights(x)                                 # step 5: project, then compress
        k_blk, v_blk = self.dual_ln_dproj(self.compress(kb, pb)), self.dual_ln_dproj(self.compress(vb, pb))
        kc = self.heads(torch.cat([k_mem, k_blk], 1))              # step 6: [B, h, Nc, e]
        vc = self.heads(torch.cat([v_mem, v_blk], 1))
        tail = xm[:, C - w:]                                       # step 4: [B, h, w + M, e]
        kw = self.heads(self.dual_ln_win(torch.cat([self.proj_key(tail), kb], 1)))
        vw = self.heads(self.dual_ln_win(torch.cat([self.proj_val(tail), vb], 1)))
        rw = self.r_net(window_table).view(w, h, e).transpose(0, 1)            # [h, w, e], row j ↔ distance w−1−j
        rc = self.r_net_chunk(chunk_table).view(Nc, h, e).transpose(0, 1)      # [h, Nc, e], row p ↔ value p
        u, v = self.r_w_bias.view(1, h, 1, e), self.r_r_bias.view(1, h, 1, e)

        # Step 8, window: segments of seg queries against tiles of span = seg + w key rows.
        seg = min(M, w)
        G, span = M // seg, seg + w
        k_tiles = kw.unfold(2, span, seg)                          # [B, h, G, e, span] (a view)
        v_tiles = vw.unfold(2, span, seg).transpose(-1, -2)        # [B, h, G, span, e]
        tile_logits = ((q + u).view(B, h, G, seg, e) @ k_tiles).contiguous()   # [B, h, G, seg, span]
        # band of query i: tile columns i+1+j, j < w (flat offset 1 + i·(span+1) + j)
        band = tile_logits.as_strided((B, h, G, seg, w), (h * G * seg * span, G * seg * span, seg * span, span + 1, 1),
                                      tile_logits.storage_offset() + 1)
        win = band.reshape(B, h, M, w) + (q + v) @ rw.transpose(1, 2)         # [B, h, M, w]

        # Step 9, compressed slots: content and gathered position terms, hidden chunks masked.
        row, hidden = self.indices(M, Nm, Nc, x.device)
        pos = torch.gather(q @ rc.transpose(1, 2), 3, row.expand(B, h, M, Nc))
        comp = (q @ kc.transpose(2, 3) + pos).masked_fill(hidden, float("-inf"))

        p = torch.cat([comp, win], -1).softmax(-1)                 # step 10: [B, h, M, Nc + w]
        p_comp, p_win = p.split([Nc, w], -1)
        # Window probabilities into tile coordinates: row i shifted right by i + 1 (pad each row
        # to span + 1 with one leading and seg trailing zeros, flatten, keep seg·span, reshape).
        shifted = F.pad(p_win.reshape(B, h, G, seg, w), (1, seg)).reshape(B, h, G, seg * (span + 1))
        p_tiles = shifted[..., :seg * span].reshape(B, h, G, seg, span)
        out = p_comp @ vc + (p_tiles @ v_tiles).reshape(B, h, M, e)  # step 11
        return self.proj_out(out.transpose(1, 2).reshape(B, M, d))


class FeedForwardLayer(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, f), nn.Linear(f, d)

    def forward(self, y):
        return self.fc2(F.gelu(self.fc1(y)))


class TransformerLSLayer(nn.Module):
    """§3.2: X = LN1(H), Xm = LN1(Hm); Y = LN2(X + Attn(X, Xm)); H' = Y + FFN(Y)."""

    def __init__(self, c):
        super().__init__()
        self.attn = CausalLongShortAttention(c)
        self.norm1 = nn.LayerNorm(c["dim"])
        self.ff = FeedForwardLayer(c["dim"], c["ffn_dim"])
        self.norm2 = nn.LayerNorm(c["dim"])

    def forward(self, hin, hm, window_table, chunk_table):
        x = self.norm1(hin)
        y = self.norm2(x + self.attn(x, self.norm1(hm), window_table, chunk_table))
        return y + self.ff(y)


class TransformerLSModel(nn.Module):
    """§3.4: H0 = E[x]·√d, the shared position tables, memory roll before each layer (the layer
    input before LN1, detached), log_softmax(H_L·Eᵀ + b) with the token table E tied."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.in_emb = nn.Embedding(c["vocab_size"], c["dim"])
        self.out_bias = nn.Parameter(torch.zeros(c["vocab_size"]))   # out_emb.bias
        self.layers = nn.ModuleList(TransformerLSLayer(c) for _ in range(c["layers"]))
        self._tables = {}

    def tables(self, M, C, dtype):
        c = self.c
        key = (M, C, dtype)
        if key not in self._tables:
            w, d = c["window"], c["dim"]
            Nc = (C // c["chunk_length"] + M // c["chunk_length"]) * c["rank"]
            self._tables[key] = (sincos(torch.arange(w - 1, -1, -1), d, dtype), sincos(torch.arange(Nc), d, dtype))
        return self._tables[key]

    def forward(self, tokens, memory):
        B, M = tokens.shape
        C = memory[0].shape[1]
        h = self.in_emb(tokens) * math.sqrt(self.c["dim"])
        window_table, chunk_table = self.tables(M, C, h.dtype)
        new_memory = []
        for layer, hm in zip(self.layers, memory):
            new_memory.append(torch.cat([hm, h], 1)[:, -C:].detach())
            h = layer(h, hm, window_table, chunk_table)
        logits = F.linear(h, self.in_emb.weight, self.out_bias)
        return F.log_softmax(logits, -1), new_memory


def lm_loss(lp, targets):
    """§3.6: the NLL summed over non-pad targets (none are pads here) / (B·M)."""
    B, M, V = lp.shape
    return F.nll_loss(lp.reshape(B * M, V), targets.reshape(-1), ignore_index=-100, reduction="sum") / (B * M)


def config_of(meta):
    c = {k: int(meta[k]) for k in ("batch", "dim", "heads", "layers", "ffn_dim", "vocab_size", "block_length",
                                   "memory_length", "chunk_length", "rank", "window")}
    c["config"] = meta["config"]
    return c


def build(c, weights, dtype):
    model = TransformerLSModel(c)
    state = {("out_bias" if k == "out_emb.bias" else k): v for k, v in weights.items()}
    model.load_state_dict(state, strict=True)  # every official name but the tied out_emb.weight
    return model.to(dtype)


def grads_by_official_name(model):
    return {("out_emb.bias" if k == "out_bias" else k): p.grad for k, p in model.named_parameters()}


def check(c, weights, io):
    """lsformer's loss, log-probabilities and gradients against this model's in f32 and f64."""
    results = {}
    for dtype in (torch.float32, torch.float64):
        model = build(c, weights, dtype)
        memory = [io[f"memory.{i}"].to(dtype) for i in range(c["layers"])]
        lp, _ = model(io["tokens"], memory)
        loss = lm_loss(lp, io["targets"])
        loss.backward()
        results[dtype] = {"loss": loss.detach(), "log_probs": lp.detach(), **{
            "grad." + k: g for k, g in grads_by_official_name(model).items()}}
    L = c["batch"] * c["block_length"]
    tol = 8 * L * 2.0 ** -24  # float32 sum of L = B·M terms, margin 8 (module docstring)
    gmax = max(float(g.abs().max()) for k, g in results[torch.float32].items() if k.startswith("grad."))
    rows, ok = {}, True
    for name, ref32 in results[torch.float32].items():
        lsf = io[name].double()
        t32, t64 = ref32.double(), results[torch.float64][name]
        scale = float(t32.abs().max())
        d_lt = float((lsf - t32).abs().max())
        bound = tol * max(scale, 2.0 ** -10 * gmax if name.startswith("grad.") else 0.0)
        passed = d_lt <= bound
        ok &= passed
        rows[name] = {"max_abs": scale, "lsformer_vs_torch32": d_lt,
                      "lsformer_vs_torch64": float((lsf - t64).abs().max()),
                      "torch32_vs_torch64": float((t32 - t64).abs().max()), "bound": bound, "pass": passed}
    return rows, tol, ok, float(io["loss"]), float(results[torch.float64]["loss"])


def train_timing(c, weights, io):
    torch.manual_seed(1234)
    model = build(c, weights, torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=2.5e-4, weight_decay=0.01)
    B, M, V = c["batch"], c["block_length"], c["vocab_size"]
    gen = torch.Generator().manual_seed(99)
    blocks = []
    for _ in range(BLOCKS):
        stream = torch.randint(0, V, (B, M + 1), generator=gen)
        blocks.append((stream[:, :M].contiguous(), stream[:, 1:].contiguous()))
    state = {"memory": [torch.zeros(B, c["memory_length"], c["dim"]) for _ in range(c["layers"])], "step": 0}

    def step():
        tokens, targets = blocks[state["step"] % BLOCKS]
        state["step"] += 1
        lp, state["memory"] = model(tokens, state["memory"])
        loss = lm_loss(lp, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    rss_before = proc_status_bytes("VmRSS")
    t = _time_call(step, clock=ARGS.clock, warmup=ARGS.warmup, min_samples=ARGS.min_samples,
                   max_samples=ARGS.max_samples, min_sample_ms=ARGS.min_sample_ms, sample_ms=ARGS.sample_time * 1e3)
    hwm = proc_status_bytes("VmHWM")
    tokens = B * M
    return {**t, "tokens_per_s": tokens / (t["median_ms"] * 1e-3), "best_tokens_per_s": tokens / (t["min_ms"] * 1e-3),
            "steps": state["step"], "rss_before_bytes": rss_before, "rss_peak_bytes": hwm,
            "rss_extra_bytes": hwm - rss_before}


def main():
    torch.set_num_threads(ARGS.threads)
    weights, _ = read_safetensors(os.path.join(ARGS.dir, "weights.safetensors"))
    io, meta = read_safetensors(os.path.join(ARGS.dir, "io.safetensors"))
    c = config_of(meta)
    case = {"case": "train/" + c["config"], **c}
    print(json.dumps({"meta": {"impl": "pytorch", "version": torch.__version__, "threads": torch.get_num_threads(),
                               "openblas_config": openblas_config(), "python": sys.version.split()[0]}}), flush=True)
    ok = True
    if not ARGS.no_check:
        rows, tol, ok, lsf_loss, t64_loss = check(c, weights, io)
        print(json.dumps({"impl": "pytorch", **case, "check": rows, "tol": tol, "pass": ok,
                          "lsformer_loss": lsf_loss, "torch64_loss": t64_loss}), flush=True)
        if not ok:
            print("torch_lm: lsformer and PyTorch differ beyond the float32 tolerance", file=sys.stderr)
    if not ARGS.no_time:
        t = train_timing(c, weights, io)
        print(json.dumps({"impl": "pytorch", **case, "phase": "train_step", **t, "threads": torch.get_num_threads(),
                          "clock": ARGS.clock}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
