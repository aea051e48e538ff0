#!/usr/bin/python3
"""Convert a released ViL-LS (MsViT) PyTorch checkpoint to safetensors for lsformer.

    /usr/bin/python3 scripts/convert_vil_checkpoint.py IN.pth OUT.safetensors \
        [--arch ARCH | --preset vil_ls_medium_224] [--image-size 224] [--num-classes 1000]

lsformer's vision::ViLClassifier registers exactly the official state_dict names (layer<k>.0 patch
embedding, layer<k>.<odd> attention blocks, layer<k>.<even> MLP blocks, norm, head; the
relative_position_index buffers included), so the conversion only unpacks the checkpoint:
  * the NVIDIA/transformer-ls Checkpointer saves {"net": state_dict, "arch": "msvit", "epoch": ...,
    "optimizer": ...}; a bare state_dict and {"state_dict": ...} / {"model": ...} are accepted too;
  * a "module." prefix (DataParallel / DistributedDataParallel) is removed;
  * floating tensors are written as float32 (the released models were trained with AMP but keep
    float32 weights), integer buffers as int64.
With --arch or --preset the names and shapes are checked against that architecture first, and
any missing, unexpected or mis-shaped entry is reported (exit status 1) instead of written.
Then, in C++:
    vision::ViLClassifier model(vision::vil_preset("vil_ls_medium_224"));
    model.load("OUT.safetensors");   // strict: every name and shape must match

Uses Debian's python3-torch only (Debian has no python3-safetensors: the file is written here by
the format's rules: 8-byte little-endian header size, JSON header padded with spaces to a
multiple of 8, tensors sorted by descending alignment then name, offsets tiling the buffer).
"""
import argparse
import json
import os
import struct
import sys

import torch

PRESETS = {
    "vil_ls_medium_224": ("l1,h3,d96,n1,s1,g1,p4,f7,a0,r8_l2,h3,d192,n4,s1,g1,p2,f7,a0,r8_"
                          "l3,h6,d384,n16,s0,g1,p2,f7,a0,r8_l4,h12,d768,n1,s0,g0,p2,f7,a0,r8", 224),
    "vil_ls_base_224": ("l1,h3,d96,n1,s1,g1,p4,f7,a0,r8_l2,h3,d192,n8,s1,g1,p2,f7,a0,r8_"
                        "l3,h6,d384,n24,s0,g1,p2,f7,a0,r8_l4,h12,d768,n1,s0,g0,p2,f7,a0,r8", 224),
    "vil_ls_medium_384": ("l1,h3,d96,n1,s1,g1,p4,f8,a0,r8_l2,h3,d192,n4,s1,g1,p2,f8,a0,r8_"
                          "l3,h6,d384,n16,s0,g1,p2,f8,a0,r8_l4,h12,d768,n1,s0,g0,p2,f8,a0,r8", 384),
}

DTYPE_NAMES = {torch.float32: "F32", torch.int64: "I64"}


def parse_arch(arch):
    stages = []
    for text in arch.split("_"):
        cfg = dict(l=1, h=3, d=192, n=1, s=1, g=1, p=2, f=7, a=1, r=0)
        for field in text.split(","):
            if not field or field[0] not in cfg:
                raise SystemExit("arch: unknown field %r in stage %r" % (field, text))
            cfg[field[0]] = int(field[1:])
        stages.append(cfg)
    return stages


def expected_shapes(arch, image_size, in_chans, num_classes):
    """Every state_dict name of MsViT(arch) with its shape (the official module structure)."""
    out = {}
    side, cin = image_size, in_chans
    for k, c in enumerate(parse_arch(arch), start=1):
        d, g, h, p, w, r = c["d"], c["g"], c["h"], c["p"], c["f"], c["r"]
        side //= p
        pre = "layer%d.0." % k
        out[pre + "proj.weight"] = (d, cin, p, p)
        out[pre + "proj.bias"] = (d,)
        out[pre + "norm_embed.weight"] = (d,)
        out[pre + "norm_embed.bias"] = (d,)
        if g >= 1:
            out[pre + "cls_token"] = (1, g, d)
        if c["a"]:
            out[pre + "cls_pos_embed"] = (1, g, d)
            out[pre + "x_pos_embed"] = (1, side, d // 2)
            out[pre + "y_pos_embed"] = (1, side, d // 2)
        for b in range(c["n"]):
            at, ml = "layer%d.%d." % (k, 2 * b + 1), "layer%d.%d." % (k, 2 * b + 2)
            for name, shape in [("norm.weight", (d,)), ("norm.bias", (d,)), ("attn.qkv.weight", (3 * d, d)),
                                ("attn.qkv.bias", (3 * d,)), ("attn.proj.weight", (d, d)), ("attn.proj.bias", (d,))]:
                out[at + name] = shape
            rpe = not c["a"]
            if c["s"] == 1:
                for name in ["dual_ln_dp", "dual_ln_full"]:
                    out[at + "attn.%s.weight" % name] = (d,)
                    out[at + "attn.%s.bias" % name] = (d,)
                if r > 0:
                    out[at + "attn.to_dynamic_projection.weight"] = (h * r, d)
                    out[at + "attn.to_dynamic_projection.bias"] = (h * r,)
                if rpe:
                    q = w // 2
                    out[at + "attn.local_relative_position_bias_table"] = (2 * (w + q - 1) * (2 * q + w + 1) + 1, h)
                    out[at + "attn.relative_position_index"] = (w * w, (w + 2 * q) ** 2)
            elif rpe:
                out[at + "attn.local_relative_position_bias_table"] = ((2 * side - 1) ** 2, h)
                if g >= 1:
                    out[at + "attn.g2l_relative_position_bias"] = (2, h, g)
                    out[at + "attn.g2g_relative_position_bias"] = (h, g, g)
                out[at + "attn.relative_position_index"] = (side * side, side * side)
            for name, shape in [("norm.weight", (d,)), ("norm.bias", (d,)), ("mlp.fc1.weight", (4 * d, d)),
                                ("mlp.fc1.bias", (4 * d,)), ("mlp.fc2.weight", (d, 4 * d)), ("mlp.fc2.bias", (d,))]:
                out[ml + name] = shape
        cin = d
    out["norm.weight"] = (cin,)
    out["norm.bias"] = (cin,)
    out["head.weight"] = (num_classes, cin)
    out["head.bias"] = (num_classes,)
    return out


def unpack(checkpoint):
    """The state_dict inside a checkpoint, without a DataParallel prefix."""
    state = checkpoint
    if isinstance(checkpoint, dict):
        for key in ("net", "state_dict", "model"):
            if key in checkpoint and isinstance(checkpoint[key], dict):
                state = checkpoint[key]
                break
    if not isinstance(state, dict) or not state:
        raise SystemExit("checkpoint: no state_dict found (expected a dict of tensors, or one under "
                         "'net', 'state_dict' or 'model')")
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    skipped = sorted(k for k in state if k not in tensors)
    if skipped:
        raise SystemExit("checkpoint: non-tensor entries in the state_dict: %s" % ", ".join(skipped))
    if all(k.startswith("module.") for k in tensors):
        tensors = {k[len("module."):]: v for k, v in tensors.items()}
    return tensors


def check(tensors, expected):
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    mismatched = sorted("%s (file %s, model %s)" % (k, tuple(tensors[k].shape), expected[k])
                        for k in set(tensors) & set(expected) if tuple(tensors[k].shape) != expected[k])
    problems = [("missing", missing), ("unexpected", unexpected), ("mismatched", mismatched)]
    report = ["%s (%d): %s" % (what, len(names), ", ".join(names[:20]) + (" ..." if len(names) > 20 else ""))
              for what, names in problems if names]
    return report


def write_safetensors(path, tensors, metadata):
    items = sorted(tensors.items(), key=lambda kv: (-kv[1].element_size(), kv[0]))
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in items:
        data = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    os.replace(tmp, path)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input", help="the .pth checkpoint")
    ap.add_argument("output", help="the .safetensors file to write")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--arch", help="check the names and shapes against this MsViT arch string")
    group.add_argument("--preset", choices=sorted(PRESETS), help="check against a preset's arch and image size")
    ap.add_argument("--image-size", type=int, help="image side the model is built for (default: the preset's, else 224)")
    ap.add_argument("--in-chans", type=int, default=3)
    ap.add_argument("--num-classes", type=int, default=1000)
    args = ap.parse_args(argv)

    checkpoint = torch.load(args.input, map_location="cpu")
    tensors = unpack(checkpoint)
    arch = args.arch
    image_size = args.image_size
    if args.preset:
        arch, preset_size = PRESETS[args.preset]
        image_size = image_size or preset_size
    if arch:
        report = check(tensors, expected_shapes(arch, image_size or 224, args.in_chans, args.num_classes))
        if report:
            print("%s does not match the architecture:\n  %s" % (args.input, "\n  ".join(report)), file=sys.stderr)
            return 1
    out = {}
    for name, t in tensors.items():
        if t.is_floating_point():
            out[name] = t.detach().to(torch.float32)
        elif t.dtype in (torch.int64, torch.int32, torch.int16, torch.uint8):
            out[name] = t.detach().to(torch.int64)
        else:
            raise SystemExit("checkpoint: %s has unsupported dtype %s" % (name, t.dtype))
    metadata = {"source": args.input, "format": "vil_ls"}
    if arch:
        metadata["arch"] = arch
        metadata["image_size"] = str(image_size or 224)
    write_safetensors(args.output, out, metadata)
    params = sum(t.numel() for t in out.values() if t.is_floating_point())
    print("wrote %s: %d tensors, %d floating-point values" % (args.output, len(out), params))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
