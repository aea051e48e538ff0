#!/usr/bin/python3
"""PyTorch side of the vision training benchmark: ViL-LS, CvT*-LS and the CNN baseline written
from the specification (docs/transformer-ls.md §4.2-4.6, the design choices in the headers of
models/vision/*.h), loading the weights and inputs that `bench_vision --dump DIR` wrote, checked
against lsformer's logits, loss and gradients, then timed (training steps) and measured (peak
memory) by the same method as bench/bench_vision.cpp.

    build/bench/bench_vision --dump /tmp/vis                          # lsformer writes the cases
    /usr/bin/python3 bench/torch_vision.py /tmp/vis --threads 2       # check + time, JSON lines

DIR holds <case>.weights.safetensors (the model's state_dict, official names) and
<case>.io.safetensors (x, labels, lsformer's logits and loss of one training-mode forward,
grad.<parameter> after its backward, after.<buffer> the batch-norm running statistics after it;
metadata: case, model, sizes, batch). Nothing here depends on lsformer's code: the safetensors
reader is the format's few lines and the models are written in the official code's layout and
PyTorch idiom (the 2-D windows are strided `unfold` views of the padded map, the relative
position biases one gather from the table, the q/k/v projections of CvT one depthwise conv each).
The models are organised like tests/fixtures/gen_vil_model.py and gen_cvt_ls_model.py (the same
module tree and names), which are the slow but obviously-correct references; this file is the
fast version.

Check (before any timing): the same step in float32 (what is timed) and in float64 (a reference
for both). Each of the logits, the loss, every parameter gradient and the running statistics
must satisfy max|lsformer − PyTorch f32| <= tol · max(1, max|PyTorch f32|) with tol = 4·L·2^-24,
L = the longest reduction of the step: batch × the positions of the largest feature map (the
batch-norm statistics and the first convolution's weight gradient sum over that many terms;
every other reduction — GEMM inner dimensions, softmax rows, LayerNorm widths — is shorter).
The JSON line reports the largest differences against both PyTorch runs.

Timing (mirrors bench_vision.cpp): one step = optimizer.zero_grad(set_to_none=True),
logits = model(x) (train mode), loss = F.cross_entropy(logits, labels), loss.backward(),
AdamW(lr 1e-3, weight decay 0.05).step(); --warmup steps, then samples of one step until
>= --min-samples and >= --sample-time seconds, or --max-samples; median (min, max) per step.
Peak memory: the tensor bytes live during one more step, from the profiler's allocation events
(torch.profiler, profile_memory=True: every allocation and free of the CPU allocator in order;
peak = the largest running sum, baseline = bytes live before the step, the same quantities as
lsformer's allocator counters), and the process's VmHWM.
Threads: torch.set_num_threads(N), and OPENBLAS_NUM_THREADS = N before torch is imported
(Debian's torch does its float GEMMs in libblas.so.3, which set_num_threads does not reach).
"""
import argparse
import json
import math
import os
import sys

from bench_common import add_peer_args, openblas_config, time_call as _time_call  # imports no torch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir", help="directory written by bench_vision --dump")
    p.add_argument("--filter", default="", help="only cases whose name contains TEXT")
    add_peer_args(p, sample_time=5.0, warmup=2, min_samples=5, max_samples=200)
    return p.parse_args()


ARGS = parse_args()
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
import torch  # noqa: E402  (after OPENBLAS_NUM_THREADS, which OpenBLAS reads when loaded)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_common import read_safetensors  # noqa: E402


# ---- shared parts ---------------------------------------------------------------------------------

class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def window_geometry(nx, w):
    """side, T (key block side), P (padded map side), ng (groups per side) of §4.2 step 6."""
    side = max(w // 2, 1)
    return side, w + 2 * side, nx + 2 * side, nx // w


class LongShortCore(nn.Module):
    """The 2-D long-short attention after the input projections (docs/transformer-ls.md §4.2
    steps 1-11 and the official AttentionLS): q, k, v [B, g+N, C] raw, logits [B, Ns, h·r] of
    the dynamic projection over every stride-th row and column of the map. Children proj,
    dual_ln_dp, dual_ln_full and, with rpe, local_relative_position_bias_table and the buffer
    relative_position_index."""

    def __init__(self, dim, heads, window, rank, rpe):
        super().__init__()
        self.h, self.w, self.r, self.rpe = heads, window, rank, rpe
        self.proj = nn.Linear(dim, dim)
        self.dual_ln_dp = nn.LayerNorm(dim)
        self.dual_ln_full = nn.LayerNorm(dim)
        self._masks = {}
        if rpe:
            w, p = window, window // 2
            self.local_relative_position_bias_table = nn.Parameter(torch.zeros(2 * (w + p - 1) * (2 * p + w + 1) + 1, heads))
            qy, qx = torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")
            ky, kx = torch.meshgrid(torch.arange(-p, w + p), torch.arange(-p, w + p), indexing="ij")
            dy = qy.reshape(-1, 1) - ky.reshape(1, -1) + (w + p - 1)
            dx = qx.reshape(-1, 1) - kx.reshape(1, -1) + (w + p - 1)
            self.register_buffer("relative_position_index", dy * (w + 2 * p) + dx)  # [w², T²] (§4.3)

    def off_image(self, nx, device):
        """[ng², 1, T²] bool: keys of each group's block that fall outside the image."""
        key = (nx, device)
        if key not in self._masks:
            side, T, P, ng = window_geometry(nx, self.w)
            inside = F.pad(torch.ones(1, 1, nx, nx, device=device), (side, side, side, side))
            blocks = inside.unfold(2, T, self.w).unfold(3, T, self.w)  # [1, 1, ng, ng, T, T]
            self._masks[key] = (blocks.reshape(ng * ng, 1, T * T) == 0)
        return self._masks[key]

    def forward(self, q, k, v, logits, nx, g, stride=1):
        B, n, C = q.shape
        h, w, r = self.h, self.w, self.r
        e, N = C // h, nx * nx
        side, T, P, ng = window_geometry(nx, w)
        G = ng * ng
        q = q * e ** -0.5                                                    # 1.
        k, v = self.dual_ln_full(k), self.dual_ln_full(v)                    # 2.
        split = lambda t: t.view(B, t.shape[1], h, e).transpose(1, 2)       # [B, h, m, e]
        q, k, v = split(q), split(k), split(v)
        qc, kc, vc = q[:, :, :g], k[:, :, :g], v[:, :, :g]                   # 3.
        qp, kp, vp = q[:, :, g:], k[:, :, g:], v[:, :, g:]

        # Queries in group order [B, h, G, w², e].
        qg = qp.reshape(B, h, ng, w, ng, w, e).permute(0, 1, 2, 4, 3, 5, 6).reshape(B, h, G, w * w, e)

        parts, vals = [], []
        if r > 0:                                                            # 4-5.
            pm = logits.view(B, -1, h, r).permute(0, 2, 3, 1).softmax(-1)   # [B, h, r, Ns]
            sub = (lambda t: t) if stride == 1 else \
                (lambda t: t.reshape(B, h, nx, nx, e)[:, :, ::stride, ::stride].reshape(B, h, -1, e))
            merge = lambda t: t.transpose(1, 2).reshape(B, r, C)
            kbar = split(self.dual_ln_dp(merge(pm @ sub(kp))))              # [B, h, r, e]
            vbar = split(self.dual_ln_dp(merge(pm @ sub(vp))))
            parts.append(qg @ kbar.unsqueeze(2).transpose(-1, -2))          # [B, h, G, w², r]
            vals.append(vbar.unsqueeze(2))

        def blocks(t):                                                       # 6. [B, h, G, T², e]
            padded = F.pad(t.reshape(B, h, nx, nx, e), (0, 0, side, side, side, side))
            tiles = padded.unfold(2, T, w).unfold(3, T, w)                  # [B, h, ng, ng, e, T, T]
            return tiles.permute(0, 1, 2, 3, 5, 6, 4).reshape(B, h, G, T * T, e)

        kw, vw = blocks(kp), blocks(vp)
        win = (qg @ kw.transpose(-1, -2)).masked_fill(self.off_image(nx, q.device), float("-inf"))
        if self.rpe:
            bias = self.local_relative_position_bias_table[self.relative_position_index.view(-1)]
            win = win + bias.view(w * w, T * T, h).permute(2, 0, 1).unsqueeze(1)  # [h, 1, w², T²]
        parts.append(win)
        vals.append(vw)
        if g > 0:                                                            # 7.
            parts.append(qg @ kc.unsqueeze(2).transpose(-1, -2))
            vals.append(vc.unsqueeze(2))
        probs = torch.cat(parts, -1).softmax(-1)                             # 8.
        out, at = None, 0
        for val in vals:                                                     # 9.
            term = probs[..., at:at + val.shape[3]] @ val
            out = term if out is None else out + term
            at += val.shape[3]
        out = out.view(B, h, ng, ng, w, w, e).permute(0, 1, 2, 4, 3, 5, 6).reshape(B, h, N, e)
        if g > 0:                                                            # 10.
            pg = torch.cat([(qc * kc).sum(-1, keepdim=True), qc @ out.transpose(-1, -2)], -1).softmax(-1)
            out = torch.cat([pg[..., :1] * vc + pg[..., 1:] @ out, out], 2)
        return self.proj(out.transpose(1, 2).reshape(B, g + N, C))          # 11.


# ---- ViL-LS (MsViT) ------------------------------------------------------------------------------

LN_EPS_VIL = 1e-6


def parse_arch(arch):
    out = []
    for stage in arch.split("_"):
        cfg = dict(l=1, h=3, d=192, n=1, s=1, g=1, p=2, f=7, a=1, r=0)
        for field in stage.split(","):
            cfg[field[0]] = int(field[1:])
        out.append(cfg)
    return out


class PatchEmbed(nn.Module):
    def __init__(self, cin, cfg, nx):
        super().__init__()
        d, g = cfg["d"], cfg["g"]
        self.nx, self.g = nx, g
        self.proj = nn.Conv2d(cin, d, kernel_size=cfg["p"], stride=cfg["p"])
        self.norm_embed = nn.LayerNorm(d, eps=LN_EPS_VIL)
        self.cls_token = nn.Parameter(torch.zeros(1, g, d)) if g >= 1 else None
        self.ape = cfg["a"] == 1
        if self.ape:
            self.cls_pos_embed = nn.Parameter(torch.zeros(1, g, d))
            self.x_pos_embed = nn.Parameter(torch.zeros(1, nx, d // 2))
            self.y_pos_embed = nn.Parameter(torch.zeros(1, nx, d // 2))

    def forward(self, img):
        x = self.norm_embed(self.proj(img).flatten(2).transpose(1, 2))
        B, N, d = x.shape
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(B, -1, -1), x], 1)
        if self.ape:
            nx = self.nx
            grid = torch.cat([self.x_pos_embed.unsqueeze(2).expand(1, nx, nx, d // 2),
                              self.y_pos_embed.unsqueeze(1).expand(1, nx, nx, d // 2)], -1).reshape(1, N, d)
            x = x + torch.cat([self.cls_pos_embed, grid], 1)
        return x


class FullAttention(nn.Module):
    """The official `Attention` of s0 stages: softmax attention, ViL's relative biases."""

    def __init__(self, d, heads, nx, g, rpe):
        super().__init__()
        self.h, self.nx, self.g, self.rpe = heads, nx, g, rpe
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        if rpe:
            self.local_relative_position_bias_table = nn.Parameter(torch.zeros((2 * nx - 1) ** 2, heads))
            if g >= 1:
                self.g2l_relative_position_bias = nn.Parameter(torch.zeros(2, heads, g))
                self.g2g_relative_position_bias = nn.Parameter(torch.zeros(heads, g, g))
            yy, xx = torch.meshgrid(torch.arange(nx), torch.arange(nx), indexing="ij")
            yy, xx = yy.reshape(-1), xx.reshape(-1)
            idx = (yy[:, None] - yy[None, :] + nx - 1) * (2 * nx - 1) + (xx[:, None] - xx[None, :] + nx - 1)
            self.register_buffer("relative_position_index", idx)

    def bias(self):
        N, g, h = self.nx * self.nx, self.g, self.h
        local = self.local_relative_position_bias_table[self.relative_position_index.view(-1)].view(N, N, h)
        local = local.permute(2, 0, 1)                                       # [h, N, N]
        if g == 0:
            return local
        top = torch.cat([self.g2g_relative_position_bias, self.g2l_relative_position_bias[0].unsqueeze(-1).expand(h, g, N)], -1)
        bottom = torch.cat([self.g2l_relative_position_bias[1].unsqueeze(1).expand(h, N, g), local], -1)
        return torch.cat([top, bottom], 1)

    def forward(self, x):
        B, n, d = x.shape
        e = d // self.h
        q, k, v = self.qkv(x).view(B, n, 3, self.h, e).permute(2, 0, 3, 1, 4)
        logits = (q * e ** -0.5) @ k.transpose(-1, -2)
        if self.rpe:
            logits = logits + self.bias()
        return self.proj((logits.softmax(-1) @ v).transpose(1, 2).reshape(B, n, d))


class AttentionLS(LongShortCore):
    """The official AttentionLS: qkv and to_dynamic_projection (a Linear on the patch rows)."""

    def __init__(self, d, heads, w, r, rpe):
        super().__init__(d, heads, w, r, rpe)
        self.qkv = nn.Linear(d, 3 * d)
        if r > 0:
            self.to_dynamic_projection = nn.Linear(d, heads * r)

    def forward(self, x, nx, g):
        q, k, v = self.qkv(x).chunk(3, -1)
        logits = self.to_dynamic_projection(x[:, g:]) if self.r > 0 else None
        return LongShortCore.forward(self, q, k, v, logits, nx, g)


class AttnBlock(nn.Module):
    def __init__(self, cfg, nx):
        super().__init__()
        self.nx, self.g = nx, cfg["g"]
        d = cfg["d"]
        self.norm = nn.LayerNorm(d, eps=LN_EPS_VIL)
        if cfg["s"] == 1:
            self.attn = AttentionLS(d, cfg["h"], cfg["f"], cfg["r"], rpe=cfg["a"] == 0)
        else:
            self.attn = FullAttention(d, cfg["h"], nx, cfg["g"], rpe=cfg["a"] == 0)

    def forward(self, x):
        y = self.norm(x)
        return x + (self.attn(y, self.nx, self.g) if isinstance(self.attn, AttentionLS) else self.attn(y))


class MlpBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d, eps=LN_EPS_VIL)
        self.mlp = Mlp(d, 4 * d)

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class MsViT(nn.Module):
    def __init__(self, arch, img, cin, classes):
        super().__init__()
        self.cfgs = parse_arch(arch)
        side, c = img, cin
        self.sides = []
        for k, cfg in enumerate(self.cfgs):
            side //= cfg["p"]
            mods = [PatchEmbed(c, cfg, side)]
            for _ in range(cfg["n"]):
                mods += [AttnBlock(cfg, side), MlpBlock(cfg["d"])]
            setattr(self, "layer%d" % (k + 1), nn.Sequential(*mods))
            self.sides.append(side)
            c = cfg["d"]
        self.norm = nn.LayerNorm(c, eps=LN_EPS_VIL)
        self.head = nn.Linear(c, classes)

    def forward(self, img):
        x, B = img, img.shape[0]
        for k, cfg in enumerate(self.cfgs):
            t = getattr(self, "layer%d" % (k + 1))(x)
            if k + 1 < len(self.cfgs):
                nx = self.sides[k]
                x = t[:, cfg["g"]:].transpose(1, 2).reshape(B, cfg["d"], nx, nx)
        t = self.norm(t)
        return self.head(t[:, 0] if self.cfgs[-1]["g"] > 0 else t.mean(1))


# ---- CvT*-LS ---------------------------------------------------------------------------------------

LN_EPS_CVT = 1e-5


class ConvProjection(nn.Module):
    """CvT's dw_bn projection: depthwise 3×3 conv (no bias) then BatchNorm2d."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, m):
        return self.bn(self.conv(m)).flatten(2).transpose(1, 2)


class StdConv(nn.Conv2d):
    """Weight-standardised conv (timm's StdConv2d, eps 1e-6)."""

    def forward(self, x):
        w = self.weight
        mean = w.mean(dim=(1, 2, 3), keepdim=True)
        var = w.var(dim=(1, 2, 3), unbiased=False, keepdim=True)
        return F.conv2d(x, (w - mean) / torch.sqrt(var + 1e-6), None, self.stride, self.padding, 1, self.groups)


class DynamicProjection(nn.Module):
    """W_P: a weight-standardised depthwise 3×3 conv then a pointwise conv C → h·r."""

    def __init__(self, c, out, stride):
        super().__init__()
        self.depthwise = StdConv(c, c, 3, stride=stride, padding=1, groups=c, bias=False)
        self.pointwise = nn.Conv2d(c, out, 1)

    def forward(self, m):
        return self.pointwise(self.depthwise(m)).flatten(2).transpose(1, 2)


class CvTAttention(nn.Module):
    def __init__(self, d, heads, w, r, kv_stride):
        super().__init__()
        self.kv_stride = kv_stride
        self.conv_proj_q, self.conv_proj_k, self.conv_proj_v = ConvProjection(d), ConvProjection(d), ConvProjection(d)
        self.proj_q, self.proj_k, self.proj_v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.dynamic_projection = DynamicProjection(d, heads * r, kv_stride)
        self.ls = LongShortCore(d, heads, w, r, rpe=False)

    def forward(self, x, nx, g):
        B, n, d = x.shape
        m = x[:, g:].transpose(1, 2).reshape(B, d, nx, nx)
        if g > 0:
            proj = lambda conv, lin: lin(torch.cat([x[:, :g], conv(m)], 1))
        else:
            proj = lambda conv, lin: lin(conv(m))
        q = proj(self.conv_proj_q, self.proj_q)
        k = proj(self.conv_proj_k, self.proj_k)
        v = proj(self.conv_proj_v, self.proj_v)
        return self.ls(q, k, v, self.dynamic_projection(m), nx, g, stride=self.kv_stride)


class CvTBlock(nn.Module):
    def __init__(self, d, heads, w, r, mlp_ratio, kv_stride):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, eps=LN_EPS_CVT)
        self.attn = CvTAttention(d, heads, w, r, kv_stride)
        self.norm2 = nn.LayerNorm(d, eps=LN_EPS_CVT)
        self.mlp = Mlp(d, mlp_ratio * d)

    def forward(self, x, nx, g):
        x = x + self.attn(self.norm1(x), nx, g)
        return x + self.mlp(self.norm2(x))


class ConvEmbed(nn.Module):
    def __init__(self, cin, d, k, s, p):
        super().__init__()
        self.proj = nn.Conv2d(cin, d, k, stride=s, padding=p)
        self.norm = nn.LayerNorm(d, eps=LN_EPS_CVT)

    def forward(self, x):
        return self.norm(self.proj(x).flatten(2).transpose(1, 2))


class CvTStage(nn.Module):
    def __init__(self, cin, st, kv_stride):
        super().__init__()
        self.patch_embed = ConvEmbed(cin, st["d"], st["k"], st["s"], st["p"])
        self.cls_token = nn.Parameter(torch.zeros(1, 1, st["d"])) if st["cls"] else None
        self.blocks = nn.ModuleList([CvTBlock(st["d"], st["h"], st["w"], st["r"], 4, kv_stride)
                                     for _ in range(st["n"])])

    def forward(self, x):
        t = self.patch_embed(x)
        nx = math.isqrt(t.shape[1])
        g = 0
        if self.cls_token is not None:
            t = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), t], 1)
            g = 1
        for b in self.blocks:
            t = b(t, nx, g)
        return t, nx, g


class CvTLS(nn.Module):
    def __init__(self, stages, cin, classes, kv_stride=1):
        super().__init__()
        self.n = len(stages)
        c = cin
        for i, st in enumerate(stages):
            setattr(self, "stage%d" % i, CvTStage(c, st, kv_stride))
            c = st["d"]
        self.norm = nn.LayerNorm(c, eps=LN_EPS_CVT)
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        B = x.shape[0]
        for i in range(self.n):
            t, nx, g = getattr(self, "stage%d" % i)(x)
            if i + 1 < self.n:
                x = t[:, g:].transpose(1, 2).reshape(B, -1, nx, nx)
        return self.head(self.norm(t[:, 0]) if g else self.norm(t).mean(1))


# The configuration of bench_vision.cpp's cvt-ls/32 case (its header and cvt_options()).
CVT_STAGES = [dict(k=3, s=2, p=1, d=64, h=1, n=1, w=4, r=16, cls=False),
              dict(k=3, s=2, p=1, d=192, h=3, n=2, w=4, r=8, cls=False),
              dict(k=3, s=2, p=1, d=384, h=6, n=2, w=2, r=4, cls=True)]


# ---- CNN baseline ------------------------------------------------------------------------------------

class CNN(nn.Module):
    """models/vision/cnn.h: per width, 2 × [conv 3×3 (no bias) → BN → ReLU] → max-pool 2×2,
    global average pool, Linear."""

    def __init__(self, channels, cin, classes, img, convs=2):
        super().__init__()
        mods, side = [], img
        for c in channels:
            for _ in range(convs):
                mods += [nn.Conv2d(cin, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU()]
                cin = c
            if side >= 2:
                mods.append(nn.MaxPool2d(2))
                side //= 2
        self.features = nn.Sequential(*mods)
        self.dropout = nn.Dropout(0.0)
        self.classifier = nn.Linear(cin, classes)

    def forward(self, x):
        return self.classifier(self.dropout(self.features(x).mean((2, 3))))


# ---- the benchmark -------------------------------------------------------------------------------------

def build(meta):
    img, cin, classes = int(meta["image_size"]), int(meta["in_channels"]), int(meta["num_classes"])
    if meta["model"] == "cnn":
        return CNN([32, 64, 128], cin, classes, img)
    if meta["model"] == "vil":
        return MsViT(meta["config"], img, cin, classes)
    if meta["model"] == "cvt":
        return CvTLS(CVT_STAGES, cin, classes)
    raise ValueError(f"unknown model {meta['model']!r}")


def largest_reduction(meta, model):
    """L of the tolerance: batch × positions of the largest feature map after the first conv."""
    img, batch = int(meta["image_size"]), int(meta["batch"])
    first = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    side = (img + 2 * first.padding[0] - first.kernel_size[0]) // first.stride[0] + 1
    return batch * side * side


def load_model(meta, weights, dtype):
    model = build(meta)
    model.load_state_dict(weights, strict=True)
    return model.to(dtype).train()


def step_outputs(model, x, labels):
    """One training-mode forward + backward: logits, loss, {param: grad}, {buffer: value}."""
    for p in model.parameters():
        p.grad = None
    logits = model(x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    grads = {"grad." + k: p.grad for k, p in model.named_parameters()}
    after = {"after." + k: b for k, b in model.named_buffers() if "running_" in k}
    return {"logits": logits.detach(), "loss": loss.detach(), **grads, **after}


def max_diff(a, b):
    """(max |a − b|, max |b|) over one tensor, in float64."""
    a, b = a.double(), b.double()
    return float((a - b).abs().max()), float(b.abs().max())


def check(meta, weights, io):
    x, labels = io["x"], io["labels"]
    m32 = load_model(meta, weights, torch.float32)
    m64 = load_model(meta, weights, torch.float64)
    t32 = step_outputs(m32, x, labels)
    t64 = step_outputs(m64, x.double(), labels)
    L = largest_reduction(meta, m32)
    tol = 4 * L * 2.0 ** -24
    rows, ok = {}, True
    missing = sorted(set(t32) - set(io))
    if missing:
        raise RuntimeError(f"{meta['case']}: lsformer's dump lacks {missing[:5]}")
    for name in t32:
        d_lt, scale = max_diff(io[name], t32[name])
        d_l64, _ = max_diff(io[name], t64[name])
        d_t64, _ = max_diff(t32[name], t64[name])
        passed = d_lt <= tol * max(1.0, scale)
        ok &= passed
        rows[name] = {"lsformer_vs_torch32": d_lt, "lsformer_vs_torch64": d_l64, "torch32_vs_torch64": d_t64,
                      "max_abs": scale, "pass": passed}
    return {"check": rows, "tol": tol, "reduction": L, "pass": ok}


def peak_rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def tensor_peak(step):
    """(peak, baseline) live tensor bytes of one call of step, from the profiler's allocation
    events: the bytes live before it are not seen by the profiler, so the baseline is measured
    as the sum of every tensor the model, optimizer and inputs hold; the peak adds the largest
    running sum of the step's allocations and frees (in time order) to it."""
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_us())
    live = peak = 0
    for e in events:
        live += e.nbytes()
        peak = max(peak, live)
    return peak


def main():
    torch.set_num_threads(ARGS.threads)
    print(json.dumps({"meta": {"impl": "pytorch", "version": torch.__version__, "threads": torch.get_num_threads(),
                               "openblas_config": openblas_config(), "python": sys.version.split()[0]}}), flush=True)
    stems = sorted(f[:-len(".weights.safetensors")] for f in os.listdir(ARGS.dir) if f.endswith(".weights.safetensors"))
    all_ok = True
    for stem in stems:
        weights, meta = read_safetensors(os.path.join(ARGS.dir, stem + ".weights.safetensors"))
        if ARGS.filter and ARGS.filter not in meta["case"]:
            continue
        io, _ = read_safetensors(os.path.join(ARGS.dir, stem + ".io.safetensors"))
        case = {"impl": "pytorch", "case": meta["case"], "model": meta["model"], "image_size": int(meta["image_size"]),
                "in_channels": int(meta["in_channels"]), "num_classes": int(meta["num_classes"]),
                "batch": int(meta["batch"])}
        if not ARGS.no_check:
            result = check(meta, weights, io)
            all_ok &= result["pass"]
            print(json.dumps({**case, **result}), flush=True)
            if not result["pass"]:
                print(f"torch_vision: {meta['case']}: lsformer and PyTorch differ beyond the float32 tolerance",
                      file=sys.stderr)
        if ARGS.no_time:
            continue
        model = load_model(meta, weights, torch.float32)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
        x, labels = io["x"], io["labels"]

        def step():
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), labels)
            loss.backward()
            opt.step()

        t = _time_call(step, clock=ARGS.clock, warmup=ARGS.warmup, min_samples=ARGS.min_samples,
                       max_samples=ARGS.max_samples, min_sample_ms=ARGS.min_sample_ms,
                       sample_ms=ARGS.sample_time * 1e3)
        opt.zero_grad(set_to_none=True)
        held = list(model.parameters()) + list(model.buffers()) + [x, labels] + \
            [b for s in opt.state.values() for b in s.values() if torch.is_tensor(b)]
        baseline = sum(b.numel() * b.element_size() for b in held)
        peak = baseline + tensor_peak(step)
        batch = case["batch"]
        print(json.dumps({**case, "parameters": sum(p.numel() for p in model.parameters()), **t,
                          "threads": torch.get_num_threads(), "clock": ARGS.clock,
                          "images_per_s": batch * 1e3 / t["median_ms"], "images_per_s_fastest": batch * 1e3 / t["min_ms"],
                          "peak_bytes": peak, "baseline_bytes": baseline, "rss_peak_bytes": peak_rss_bytes()}),
              flush=True)
    return 0 if ARGS.no_check or all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
