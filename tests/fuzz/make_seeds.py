#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer harnesses (tests/fuzz/corpus/<harness>/): small
valid inputs of each format, prefixed by the selector bytes each harness reads first (see the
harness files). Standard library only (struct, zlib, gzip, zipfile); the PNG seed comes from
tests/fixtures/data/png; the JPEG seeds (jpeg_*, sniffed_jpeg_*: 8x8 images written by
lsf::data::write_jpeg, quality 75) are kept as committed, not regenerated. Re-run to regenerate
the others; the inputs fuzzing found bugs with live beside the seeds as regression-* files."""
import gzip, io, json, os, struct, zipfile

ROOT = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(ROOT, "..", "fixtures", "data")


def put(harness, name, data):
    d = os.path.join(ROOT, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


# safetensors: a header and two small tensors.
header = {"__metadata__": {"format": "pt", "lsformer.step": "3"},
          "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
          "i": {"dtype": "I64", "shape": [1], "data_offsets": [16, 24]}}
h = json.dumps(header, separators=(",", ":")).encode()
put("fuzz_safetensors", "small", struct.pack("<Q", len(h)) + h + struct.pack("<4f", 1, 2, 3, 4) + struct.pack("<q", 7))
put("fuzz_safetensors", "fixture", read(os.path.join(ROOT, "..", "fixtures", "torch_model.safetensors")))


# The same file with lsformer's checksums (docs/data-formats.md §2.1), computed here from the
# documented definition alone: tests/test_safetensors.cpp loads this seed, so the document and
# the reader are checked against each other.
def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


meta = {"format": "pt", "lsformer.step": "3"}
tensors = {"w": ("F32", [2, 2], 0, 16, struct.pack("<4f", 1, 2, 3, 4)), "i": ("I64", [1], 16, 24, struct.pack("<q", 7))}
canon = b"".join(b"m\0" + k.encode() + b"\0" + v.encode() + b"\0" for k, v in sorted(meta.items()))
for name, (dtype, shape, begin, end, _) in sorted(tensors.items()):
    canon += b"t\0" + name.encode() + b"\0" + dtype.encode() + b"\0" + "".join(f"{d}," for d in shape).encode()
    canon += b"\0" + str(begin).encode() + b"\0" + str(end).encode() + b"\0"
sums = {"header": f"{crc32c(canon):08x}", "tensors": {n: f"{crc32c(t[4]):08x}" for n, t in tensors.items()}}
header = {"__metadata__": dict(meta, **{"lsformer.crc32c": json.dumps(sums, separators=(",", ":"))})}
header.update({n: {"dtype": t[0], "shape": t[1], "data_offsets": [t[2], t[3]]} for n, t in tensors.items()})
h = json.dumps(header, separators=(",", ":")).encode()
put("fuzz_safetensors", "checksummed", struct.pack("<Q", len(h)) + h + tensors["w"][4] + tensors["i"][4])

# configs: JSON, then NUL and one --set per line.
cfg = b'{"data": {"task": "listops", "path": "x"}, "model": {"size": 3}, "train": {"steps": 10, "batch_size": 2}}'
put("fuzz_config", "plain", cfg)
put("fuzz_config", "overrides", cfg + b"\0train.steps=5\nmodel.scale=2.5\noptimizer.betas=[0.8,0.9]")
put("fuzz_config", "sections", b'{"data": {"task": "listops"}, "optimizer": {"name": "adam", "lr": 0.01}, '
    b'"schedule": {"name": "warmup_cosine", "warmup_steps": 2}, "train": {"steps": 20, "non_finite": "skip"}}')

# LRA TSV readers: selector 0 ListOps, 1 Text, 2 Retrieval.
put("fuzz_lra_tsv", "listops", b"\0" + read(os.path.join(FIX, "listops_ok.tsv")))
put("fuzz_lra_tsv", "text", b"\1" + read(os.path.join(FIX, "text.tsv")))
put("fuzz_lra_tsv", "retrieval", b"\2" + read(os.path.join(FIX, "retrieval.tsv"))[:2000])

# CIFAR: selector 0 CIFAR-10 (label + 3072 bytes), 1 CIFAR-100 fine (coarse, fine + 3072).
put("fuzz_cifar", "cifar10", b"\0" + read(os.path.join(FIX, "cifar_2.bin"))[:3073])
put("fuzz_cifar", "cifar100", b"\1" + bytes([3, 41]) + bytes(range(256)) * 12)

# IDX: selector = rank − 1; u8 (0x08) arrays, plain and gzipped.
labels = struct.pack(">I", 0x0801) + struct.pack(">I", 3) + bytes([1, 2, 9])
images = struct.pack(">I", 0x0803) + struct.pack(">III", 1, 2, 2) + bytes([0, 64, 128, 255])
put("fuzz_idx", "labels", b"\0" + labels)
put("fuzz_idx", "images", b"\2" + images)
put("fuzz_idx", "images_gz", b"\2" + gzip.compress(images, mtime=0))

# Images: selector 0 sniffed, 1 PNG, 2 JPEG (bit 2: three channels).
pngs = sorted(os.listdir(os.path.join(FIX, "png"))) if os.path.isdir(os.path.join(FIX, "png")) else []
for name in pngs[:2]:
    p = os.path.join(FIX, "png", name)
    if os.path.isfile(p) and name.endswith(".png"):
        put("fuzz_image", "png_" + name[:-4], b"\1" + read(p))
        put("fuzz_image", "sniffed_" + name[:-4], b"\6" + read(p))

# Char-LM corpora: byte 0 reader (0 enwik8, 1 text8, 2 text source, 3 dictd), byte 1 file kind
# (0 .txt, 1 .zip, 2 .gz, 3 .dz).
text = b"the quick brown fox jumps over the lazy dog " * 8
zbuf = io.BytesIO()
with zipfile.ZipFile(zbuf, "w") as z:
    z.writestr("enwik8", text)
put("fuzz_corpus", "enwik8_txt", b"\0\0" + text)
put("fuzz_corpus", "enwik8_zip", b"\0\1" + zbuf.getvalue())
put("fuzz_corpus", "text8_txt", b"\1\0" + text)
put("fuzz_corpus", "text_gz", b"\2\2" + gzip.compress(text, mtime=0))
dict_text = b"00-database-info\n\tsome header\nfox\n\tA small wild canine.\n"
put("fuzz_corpus", "dictd_dz", b"\3\3" + gzip.compress(dict_text, mtime=0))
