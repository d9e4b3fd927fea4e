#!/usr/bin/env python3
"""Writes tests/data/gguf_oracle.txt: what the `gguf` Python package
(GGUFReader) reads from the bundled models and the bundled vocabulary files
(tests/data/tokenizer-tests).
test_gguf.cpp checks that llmrt's reader sees exactly the same.

Run from the repository root:  python3 tests/data/make_gguf_oracle.py

Line format (space separated; string and array contents as FNV-1a 64 hashes
of their encoded bytes, strings also with their length):
  file repo <path relative to the repository root>
  header <version> <n_tensors> <n_kv>
  kv <key> <type> <value>               integers, bool (0/1), floats (%.17g)
  kv <key> string <length> <fnv>
  kv <key> array <elem type> <count> <fnv>   fnv over the encoded elements
  tensor <name> <type id> <d0,d1,..> <absolute offset> <nbytes>
"""
import glob
import os
import struct

import gguf
from gguf import GGUFValueType as T

NAMES = {T.UINT8: "uint8", T.INT8: "int8", T.UINT16: "uint16", T.INT16: "int16",
         T.UINT32: "uint32", T.INT32: "int32", T.FLOAT32: "float32", T.BOOL: "bool",
         T.STRING: "string", T.ARRAY: "array", T.UINT64: "uint64", T.INT64: "int64",
         T.FLOAT64: "float64"}


def fnv(data: bytes) -> str:
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def dump(out, root, rel, path):
    r = gguf.GGUFReader(path)
    fields = [f for k, f in r.fields.items() if not k.startswith("GGUF.")]
    out.append("file %s %s" % (root, rel))
    version = int(r.fields["GGUF.version"].parts[-1][0])
    out.append("header %d %d %d" % (version, len(r.tensors), len(fields)))
    for f in fields:
        t = f.types[0]
        if t == T.STRING:
            s = bytes(f.parts[f.data[0]])
            out.append("kv %s string %d %s" % (f.name, len(s), fnv(s)))
        elif t == T.ARRAY:
            et = f.types[1] if len(f.types) > 1 else T.UINT8
            enc = b""
            for i in f.data:
                if et == T.STRING:
                    s = bytes(f.parts[i])
                    enc += struct.pack("<Q", len(s)) + s
                else:
                    enc += f.parts[i].tobytes()
            out.append("kv %s array %s %d %s" % (f.name, NAMES[et], len(f.data), fnv(enc)))
        else:
            v = f.parts[f.data[0]][0]
            if t in (T.FLOAT32, T.FLOAT64):
                out.append("kv %s %s %.17g" % (f.name, NAMES[t], float(v)))
            else:
                out.append("kv %s %s %d" % (f.name, NAMES[t], int(v)))
    for t in r.tensors:
        dims = ",".join(str(int(d)) for d in t.shape)
        out.append("tensor %s %d %s %d %d" % (t.name, int(t.tensor_type), dims,
                                               int(t.data_offset), int(t.n_bytes)))


def main():
    out = []
    for rel in ["models/stories260K-f32.gguf", "models/stories260K-f16.gguf"]:
        dump(out, "repo", rel, rel)
    for p in sorted(glob.glob(os.path.join("tests", "data", "tokenizer-tests", "*.gguf"))):
        dump(out, "repo", p, p)
    with open("tests/data/gguf_oracle.txt", "w") as fh:
        fh.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
