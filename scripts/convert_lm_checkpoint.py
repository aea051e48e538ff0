#!/usr/bin/python3
"""Convert a char-LM checkpoint of the official Transformer-LS code (NVIDIA/transformer-ls,
autoregressive/: a fairseq plug-in, model "transformer-ls") to a safetensors file that
lsformer's lm::TransformerLSModel loads with load_state_dict (models/lm/lm_model.h).

    /usr/bin/python3 scripts/convert_lm_checkpoint.py checkpoint_best.pt lm.safetensors [--dtype f32]

Input: a fairseq checkpoint ({"model": state_dict, "cfg" or "args": ...}) or a bare state dict,
with the TransformerLSModel's names under "decoder.model." (fairseq), "model." or no prefix.
What changes:
  * the prefix is removed, so names are the TransformerLSModel's own (in_emb.weight,
    out_emb.bias, layers.{i}.attn.proj_query.weight, …), which are lsformer's;
  * out_emb.weight is the tied token table: it must equal in_emb.weight (an error otherwise)
    and is dropped — lsformer stores the tied tensor once, as in_emb.weight;
  * pos_emb.inv_freq (the buffer 10000^{−2k/d}) must match that rule and is dropped — lsformer
    computes its sinusoid tables from it.
Every other tensor is kept as it is (same name, shape and layout); --dtype converts floats.
Anything unexpected (an unknown or missing name, a wrong shape, an untied output, a config
lsformer does not implement: pre_ln off, ReLU instead of GELU, position clamps) is an error
naming it. The model options found (from the tensors' shapes and the checkpoint's config) are
written to the file's metadata as JSON under "lm_options", with lsformer's option names.

Needs Debian's python3-torch (and, for checkpoints whose config is an omegaconf object,
the omegaconf package that fairseq itself depends on).
"""
import argparse
import json
import os
import re
import struct
import sys

import torch

PREFIXES = ("decoder.model.", "model.", "")
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}
SAFETENSORS_DTYPE = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                     torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}

# Per layer: name → shape as a function of (d, h, e, r, f); None marks an optional tensor
# (the q/k/v/out biases exist only with use_bias).
LAYER_TENSORS = {
    "attn.dconv_1.weight": lambda d, h, e, r, f: (h * r, d),
    "attn.dconv_1.bias": lambda d, h, e, r, f: (h * r,),
    "attn.r_net.weight": lambda d, h, e, r, f: (d, d),
    "attn.r_net_chunk.weight": lambda d, h, e, r, f: (d, d),
    "attn.r_net_chunk.bias": lambda d, h, e, r, f: (d,),
    "attn.r_r_bias": lambda d, h, e, r, f: (1, h, 1, e),
    "attn.r_w_bias": lambda d, h, e, r, f: (1, h, 1, 1, e),
    "attn.proj_query.weight": lambda d, h, e, r, f: (d, d),
    "attn.proj_out.weight": lambda d, h, e, r, f: (d, d),
    "attn.proj_val.weight": lambda d, h, e, r, f: (d, d),
    "attn.proj_key.weight": lambda d, h, e, r, f: (d, d),
    "attn.dual_ln_dproj.weight": lambda d, h, e, r, f: (d,),
    "attn.dual_ln_dproj.bias": lambda d, h, e, r, f: (d,),
    "attn.dual_ln_win.weight": lambda d, h, e, r, f: (d,),
    "attn.dual_ln_win.bias": lambda d, h, e, r, f: (d,),
    "norm1.weight": lambda d, h, e, r, f: (d,),
    "norm1.bias": lambda d, h, e, r, f: (d,),
    "ff.fc1.weight": lambda d, h, e, r, f: (f, d),
    "ff.fc1.bias": lambda d, h, e, r, f: (f,),
    "ff.fc2.weight": lambda d, h, e, r, f: (d, f),
    "ff.fc2.bias": lambda d, h, e, r, f: (d,),
    "norm2.weight": lambda d, h, e, r, f: (d,),
    "norm2.bias": lambda d, h, e, r, f: (d,),
}
PROJECTION_BIASES = ("attn.proj_query.bias", "attn.proj_out.bias", "attn.proj_val.bias", "attn.proj_key.bias")


class ConversionError(Exception):
    pass


def fail(message):
    raise ConversionError(message)


def load_checkpoint(path):
    try:
        return torch.load(path, map_location="cpu")
    except ModuleNotFoundError as error:
        fail(f"{path}: unpickling needs the Python module '{error.name}' (fairseq checkpoints keep their config as "
             f"an omegaconf object: install omegaconf, or save torch.load(path)['model'] as a bare state dict)")


def state_and_config(checkpoint, path):
    """The state dict and a flat dict of the model/task config (empty when the file has none)."""
    if not isinstance(checkpoint, dict):
        fail(f"{path}: expected a dict (a fairseq checkpoint or a state dict), got {type(checkpoint).__name__}")
    state = checkpoint.get("model", checkpoint)
    if not isinstance(state, dict) or not state:
        fail(f"{path}: no state dict found (expected a 'model' entry or a dict of tensors)")
    config = {}
    cfg = checkpoint.get("cfg")
    if cfg is not None:
        for section in ("task", "model"):  # model keys win where both define one
            part = cfg.get(section) if hasattr(cfg, "get") else None
            if part is not None:
                config.update({k: part[k] for k in part.keys()})
    elif checkpoint.get("args") is not None:
        config.update(vars(checkpoint["args"]))
    return state, config


def strip_prefix(state, path):
    for prefix in PREFIXES:
        if prefix + "in_emb.weight" in state:
            kept = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
            ignored = sorted(k for k in state if not k.startswith(prefix))
            return kept, prefix, ignored
    fail(f"{path}: no 'in_emb.weight' under any of the prefixes {PREFIXES} — not a Transformer-LS char-LM "
         f"state dict (first names: {sorted(state)[:5]})")


def check_config(config):
    """Rejects the official options lsformer does not implement (keys absent: assumed as the scripts set them)."""
    if config.get("pre_ln", True) is not True:
        fail("config pre_ln = false (post-LN layers): lsformer implements the pre_ln path of every official script")
    if config.get("use_gelu", True) is not True:
        fail("config use_gelu = false (ReLU FFN): lsformer implements the GELU FFN of every official script")
    for key in ("clamp_len", "cpos_clamp_len"):
        if config.get(key, -1) is not None and config.get(key, -1) > 0:
            fail(f"config {key} = {config[key]}: position clamping is not implemented (every official script uses -1)")


def convert(state, config):
    """→ (tensors by lsformer name, lm_options dict)."""
    tensors = dict(state)
    emb = tensors.get("in_emb.weight")
    if emb is None or emb.dim() != 2:
        fail("in_emb.weight must be a [V, d] tensor")
    V, d = emb.shape
    out_w = tensors.pop("out_emb.weight", None)
    if out_w is not None and not (out_w.shape == emb.shape and torch.equal(out_w, emb)):
        fail("out_emb.weight differs from in_emb.weight: the official model ties them and lsformer stores one table")
    inv_freq = tensors.pop("pos_emb.inv_freq", None)
    if inv_freq is not None:
        want = 1 / (10000 ** (torch.arange(0.0, d, 2.0, dtype=torch.float64) / d))
        if inv_freq.shape != want.shape or not torch.allclose(inv_freq.to(torch.float64), want, rtol=1e-3, atol=0):
            fail("pos_emb.inv_freq is not 10000^(-2k/d): lsformer computes the sinusoids from that rule (§3.5)")
    if "out_emb.bias" not in tensors or tuple(tensors["out_emb.bias"].shape) != (V,):
        fail(f"out_emb.bias must be present with shape ({V},)")

    layer_ids = sorted({int(m.group(1)) for k in tensors for m in [re.match(r"layers\.(\d+)\.", k)] if m})
    if not layer_ids or layer_ids != list(range(len(layer_ids))):
        fail(f"layers must be numbered 0 … L−1, found {layer_ids}")
    r_w = tensors.get("layers.0.attn.r_w_bias")
    dconv = tensors.get("layers.0.attn.dconv_1.weight")
    fc1 = tensors.get("layers.0.ff.fc1.weight")
    if r_w is None or dconv is None or fc1 is None:
        fail("layers.0 lacks attn.r_w_bias, attn.dconv_1.weight or ff.fc1.weight: not a long-short layer")
    h, e, f = r_w.shape[1], r_w.shape[-1], fc1.shape[0]
    if h * e != d or dconv.shape[0] % h:
        fail(f"attn.r_w_bias {tuple(r_w.shape)} and dconv_1.weight {tuple(dconv.shape)} do not fit d = {d}")
    r = dconv.shape[0] // h
    bias = "layers.0.attn.proj_query.bias" in tensors

    expected = {"in_emb.weight": (V, d), "out_emb.bias": (V,)}
    for i in layer_ids:
        for name, shape in LAYER_TENSORS.items():
            expected[f"layers.{i}.{name}"] = shape(d, h, e, r, f)
        if bias:
            for name in PROJECTION_BIASES:
                expected[f"layers.{i}.{name}"] = (d,)
    missing = sorted(set(expected) - set(tensors))
    unknown = sorted(set(tensors) - set(expected))
    wrong = sorted(f"{k} {tuple(tensors[k].shape)} (expected {expected[k]})" for k in expected
                   if k in tensors and tuple(tensors[k].shape) != expected[k])
    if missing or unknown or wrong:
        fail("state dict does not match the Transformer-LS char-LM:" + (f"\n  missing: {missing}" if missing else "")
             + (f"\n  unknown: {unknown}" if unknown else "") + (f"\n  wrong shapes: {wrong}" if wrong else ""))

    options = {"attention": "long_short", "vocab_size": V, "dim": d, "heads": h, "layers": len(layer_ids),
               "ffn_dim": f, "rank": r, "bias": bias}
    for ours, theirs in (("chunk_length", "chunk_size"), ("window", "window_len"), ("memory_length", "mem_len"),
                         ("block_length", "tokens_per_sample"), ("dropout", "dropout"),
                         ("emb_dropout", "emb_dropout")):
        if config.get(theirs) is not None:
            options[ours] = config[theirs]
    if "d_model" in config and config["d_model"] != d:
        fail(f"config d_model = {config['d_model']} but in_emb.weight has d = {d}")
    if "n_head" in config and config["n_head"] != h:
        fail(f"config n_head = {config['n_head']} but attn.r_w_bias has {h} heads")
    if "chunk_rank" in config and config["chunk_rank"] != r:
        fail(f"config chunk_rank = {config['chunk_rank']} but attn.dconv_1 gives rank {r}")
    return tensors, options


def write_safetensors(path, tensors, metadata):
    """The safetensors layout (data-formats.md §2.1): header padded to a multiple of 8, tensors
    by descending dtype alignment then name, tiling the buffer."""
    order = sorted(tensors, key=lambda k: (-tensors[k].element_size(), k))
    header, chunks, offset = {"__metadata__": metadata}, [], 0
    for name in order:
        t = tensors[name].detach().contiguous().cpu()
        if t.dtype not in SAFETENSORS_DTYPE:
            fail(f"{name}: dtype {t.dtype} has no safetensors name here")
        data = t.view(torch.uint8).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPE[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for data in chunks:
            out.write(data)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", help="fairseq checkpoint (.pt) or a saved state dict")
    parser.add_argument("output", help="the safetensors file to write")
    parser.add_argument("--dtype", choices=["keep"] + sorted(DTYPES), default="keep",
                        help="convert floating tensors (default: keep the checkpoint's dtypes)")
    args = parser.parse_args(argv)
    try:
        state, config = state_and_config(load_checkpoint(args.input), args.input)
        state, prefix, ignored = strip_prefix(state, args.input)
        check_config(config)
        tensors, options = convert(state, config)
        if args.dtype != "keep":
            tensors = {k: v.to(DTYPES[args.dtype]) if v.is_floating_point() else v for k, v in tensors.items()}
        metadata = {"format": "lsformer-lm", "source": os.path.basename(args.input),
                    "lm_options": json.dumps(options, sort_keys=True)}
        write_safetensors(args.output, tensors, metadata)
    except ConversionError as error:
        print(f"convert_lm_checkpoint: {error}", file=sys.stderr)
        return 1
    note = f" (ignored outside the prefix: {ignored})" if ignored else ""
    print(f"wrote {args.output}: {len(tensors)} tensors, prefix '{prefix}' removed{note}; options {options}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
