#!/usr/bin/env python3
"""Reads a dtensor checkpoint with the Python standard library only (json, struct, zlib) and
checks that every file follows the safetensors layout: an 8-byte little-endian header length,
a JSON header whose entries have dtype, shape and data_offsets tiling the data without gaps,
the data itself; and that index.json's chunks name existing entries with matching shapes and
CRC-32s, in files carrying the index's save id (format version 2). Then reassembles one float32 tensor from its chunks and compares it with the closed
form the save job wrote (tests/checkpoint/ckpt_test_util.h).

usage: read_safetensors.py DIR TENSOR ID"""
import json
import os
import struct
import sys
import zlib

SIZES = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I32": 4, "I64": 8, "BOOL": 1}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def read_file(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail(f"{path}: shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if (8 + n) % 8 != 0:
        fail(f"{path}: data does not start 8-byte aligned")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    spans = []
    for name, e in header.items():
        if name == "__metadata__":
            if not all(isinstance(v, str) for v in e.values()):
                fail(f"{path}: __metadata__ values must be strings")
            continue
        if e["dtype"] not in SIZES:
            fail(f"{path}: {name} has dtype {e['dtype']}")
        begin, end = e["data_offsets"]
        count = 1
        for s in e["shape"]:
            count *= s
        if end - begin != count * SIZES[e["dtype"]]:
            fail(f"{path}: {name} spans {end - begin} bytes for {count} x {e['dtype']}")
        spans.append((begin, end))
    spans.sort()
    pos = 0
    for begin, end in spans:
        if begin != pos:
            fail(f"{path}: a gap or overlap at byte {pos} of the data")
        pos = end
    if pos != len(data):
        fail(f"{path}: the entries cover {pos} bytes of {len(data)}")
    return header, data


def main():
    d, tensor, ident = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(os.path.join(d, "index.json")) as f:
        index = json.load(f)
    if index["metadata"]["version"] != 2:
        fail(f"index format version {index['metadata']['version']}, expected 2")
    save_id = index["metadata"]["save_id"]
    files = {}
    for name, t in index["tensors"].items():
        for c in t["chunks"]:
            if "/" in c["file"]:
                fail(f"{name}: file {c['file']} is not a plain name")
            if c["file"] not in files:
                files[c["file"]] = read_file(os.path.join(d, c["file"]))
                if files[c["file"]][0]["__metadata__"].get("dtensor.save_id") != save_id:
                    fail(f"{c['file']} does not carry the index's save id {save_id}")
            header, data = files[c["file"]]
            e = header.get(c["entry"])
            if e is None or e["shape"] != c["shape"] or e["dtype"] != t["dtype"]:
                fail(f"{name}: entry {c['entry']} missing or different in {c['file']}")
            if index["weight_map"].get(c["entry"]) != c["file"]:
                fail(f"weight_map does not map {c['entry']} to {c['file']}")
            begin, end = e["data_offsets"]
            if zlib.crc32(data[begin:end]) != c["crc32"]:
                fail(f"{name}: CRC-32 of {c['entry']} differs")
    # Reassemble `tensor` (2-D float32) from its chunks.
    t = index["tensors"][tensor]
    rows, cols = t["shape"]
    full = [None] * (rows * cols)
    for c in t["chunks"]:
        header, data = files[c["file"]]
        begin, _ = header[c["entry"]]["data_offsets"]
        (r0, c0), (nr, nc) = c["offset"], c["shape"]
        vals = struct.unpack_from(f"<{nr * nc}f", data, begin)
        for i in range(nr):
            for j in range(nc):
                full[(r0 + i) * cols + c0 + j] = vals[i * nc + j]
    want = [(i % 251) * 0.25 - 7 + ident for i in range(rows * cols)]
    if full != want:
        fail(f"{tensor} reassembled from {len(t['chunks'])} chunks differs from the closed form")
    print(f"OK: {len(files)} safetensors files, {len(index['tensors'])} tensors; "
          f"{tensor} reassembled from {len(t['chunks'])} chunks")


if __name__ == "__main__":
    main()
