"""Writers for the checkpoint formats RLX reads (GGUF, safetensors), from
their specs, with NumPy only.  Tests write seeded models with them:

    import sys; sys.path.insert(0, "<repo>/tests/llm")
    from formats import write_gguf, write_safetensors, write_safetensors_sharded, bf16_bits

GGUF (v2 or v3, little-endian):

    write_gguf(path, metadata, tensors, version=3, alignment=32, bf16=())

  metadata: a list of (key, type, value) triples, or a dict key -> (type,
  value), or key -> value (type inferred: bool -> bool, int -> uint32 when
  it fits else int64, float -> float32, str -> string, list -> array of the
  first element's inferred type).  Types are the spec's names: uint8 int8
  uint16 int16 uint32 int32 uint64 int64 float32 float64 bool string, and
  "array" whose value is (element_type, items); nested arrays are
  ("array", [(element_type, items), ...]).  An alignment other than 32 is
  written as general.alignment (uint32) unless the metadata has that key.

  tensors: dict name -> array (kept in order).  float32 -> F32, float16 ->
  F16, float64 -> F64, int8/int16/int32/int64 -> I8/I16/I32/I64; a tuple
  (uint16 array, "BF16"), or a uint16 array whose name is in the bf16
  argument, holds bfloat16 bits (see bf16_bits()); a tuple
  (uint8 array, "Q8_0", shape) writes raw blocks of a quantized type
  (size checked against the type's block).  The NumPy shape (row-major,
  outermost first) is written reversed into ne[], so ne[0] is the last,
  contiguous axis, as ggml expects.

safetensors:

    write_safetensors(path, tensors, metadata=None, bf16=())
    write_safetensors_sharded(folder, tensors, shards=2, metadata=None, bf16=())

  tensors as above (float32 float16 float64 int8 uint8 int16 int32 int64
  bool; (uint16 array, "BF16"), or a uint16 array named in bf16, for
  bfloat16).  The sharded writer splits
  tensors in order into model-0000N-of-0000M.safetensors files and writes
  model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map"}).
  write_json(path, obj) writes a config.json.

Run as a program, `formats.py fixtures DIR` writes the fixed files the C
tests (tests/test_gguf.c, tests/test_safetensors.c) check byte for byte.
"""
import json
import os
import struct
import sys

import numpy as np

GGUF_TYPES = {
    "uint8": 0, "int8": 1, "uint16": 2, "int16": 3, "uint32": 4, "int32": 5,
    "float32": 6, "bool": 7, "string": 8, "array": 9, "uint64": 10, "int64": 11,
    "float64": 12,
}
_SCALAR_FMT = {
    "uint8": "<B", "int8": "<b", "uint16": "<H", "int16": "<h", "uint32": "<I",
    "int32": "<i", "float32": "<f", "bool": "<?", "uint64": "<Q", "int64": "<q",
    "float64": "<d",
}
# ggml type id, elements per block, bytes per block
GGML_TYPES = {
    "F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34), "Q8_1": (9, 32, 36),
    "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "Q8_K": (15, 256, 292),
    "IQ2_XXS": (16, 256, 66), "IQ2_XS": (17, 256, 74), "IQ3_XXS": (18, 256, 98),
    "IQ1_S": (19, 256, 50), "IQ4_NL": (20, 32, 18), "IQ3_S": (21, 256, 110),
    "IQ2_S": (22, 256, 82), "IQ4_XS": (23, 256, 136), "I8": (24, 1, 1), "I16": (25, 1, 2),
    "I32": (26, 1, 4), "I64": (27, 1, 8), "F64": (28, 1, 8), "IQ1_M": (29, 256, 56),
    "BF16": (30, 1, 2), "TQ1_0": (34, 256, 54), "TQ2_0": (35, 256, 66), "MXFP4": (39, 32, 17),
}
_NP_GGML = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.float64): "F64",
            np.dtype(np.int8): "I8", np.dtype(np.int16): "I16", np.dtype(np.int32): "I32",
            np.dtype(np.int64): "I64"}
_NP_ST = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.float64): "F64",
          np.dtype(np.int8): "I8", np.dtype(np.uint8): "U8", np.dtype(np.int16): "I16",
          np.dtype(np.int32): "I32", np.dtype(np.int64): "I64", np.dtype(np.bool_): "BOOL"}


def bf16_bits(x):
    """bfloat16 bits (uint16) of x, rounded to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, np.uint16(0x7FC0), r).astype(np.uint16)


def _infer(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "uint32" if 0 <= v < 2**32 else "int64"
    if isinstance(v, float):
        return "float32"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "array"
    raise TypeError("cannot infer a GGUF type for %r" % (v,))


def _gguf_str(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _gguf_value(t, v):
    if t in _SCALAR_FMT:
        return struct.pack(_SCALAR_FMT[t], v)
    if t == "string":
        return _gguf_str(v)
    if t == "array":
        if isinstance(v, list):  # plain list: infer
            et = _infer(v[0]) if v else "uint8"
            items = [(_infer(x[0]) if x else "uint8", x) if et == "array" else x for x in v]
        else:
            et, items = v
        out = struct.pack("<IQ", GGUF_TYPES[et], len(items))
        return out + b"".join(_gguf_value(et, x) for x in items)
    raise ValueError("unknown GGUF value type %r" % (t,))


def _kv_list(metadata):
    if metadata is None:
        return []
    if isinstance(metadata, dict):
        out = []
        for k, v in metadata.items():
            if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) and v[0] in GGUF_TYPES:
                out.append((k, v[0], v[1]))
            else:
                out.append((k, _infer(v), v))
        return out
    return [tuple(x) for x in metadata]


def _gguf_tensor(v):
    """(ggml type name, numpy shape, bytes) of a tensors-dict value."""
    if isinstance(v, tuple):
        if len(v) == 2 and v[1] == "BF16":
            a = np.ascontiguousarray(v[0])
            if a.dtype != np.uint16:
                raise TypeError("BF16 tensors are uint16 bit arrays (see bf16_bits())")
            return "BF16", a.shape, a.tobytes()
        raw, tname, shape = v
        _, blk, bb = GGML_TYPES[tname]
        n = int(np.prod(shape)) if len(shape) else 1
        if (shape[-1] if len(shape) else 1) % blk:
            raise ValueError("%s rows must be a multiple of %d" % (tname, blk))
        data = np.ascontiguousarray(raw, dtype=np.uint8).tobytes()
        if len(data) != n // blk * bb:
            raise ValueError("%s tensor of shape %s needs %d bytes, got %d" % (tname, shape, n // blk * bb, len(data)))
        return tname, tuple(shape), data
    a = np.ascontiguousarray(v)
    if a.dtype not in _NP_GGML:
        raise TypeError("no GGUF type for NumPy dtype %s" % a.dtype)
    return _NP_GGML[a.dtype], a.shape, a.astype(a.dtype.newbyteorder("<")).tobytes()


def _pad(n, a):
    return (a - n % a) % a


def _flag_bf16(tensors, bf16):
    """tensors with the uint16 arrays named in bf16 as (array, "BF16")."""
    names = set(bf16 or ())
    missing = names - set(tensors or {})
    if missing:
        raise KeyError("bf16 names tensors that are not given: %s" % sorted(missing))
    return {k: (v, "BF16") if k in names else v for k, v in (tensors or {}).items()}


def write_gguf(path, metadata, tensors, version=3, alignment=32, bf16=()):
    """Writes a GGUF file (see the module docstring); returns path."""
    if version not in (2, 3):
        raise ValueError("GGUF version must be 2 or 3")
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError("the alignment must be a power of two")
    kvs = _kv_list(metadata)
    if alignment != 32 and not any(k == "general.alignment" for k, _, _ in kvs):
        kvs.append(("general.alignment", "uint32", alignment))
    tinfo = [(name,) + _gguf_tensor(v) for name, v in _flag_bf16(tensors, bf16).items()]
    head = b"GGUF" + struct.pack("<IQQ", version, len(tinfo), len(kvs))
    for k, t, v in kvs:
        head += _gguf_str(k) + struct.pack("<I", GGUF_TYPES[t]) + _gguf_value(t, v)
    offset = 0
    offsets = []
    for name, tname, shape, data in tinfo:
        offset += _pad(offset, alignment)
        offsets.append(offset)
        ne = list(reversed(shape))
        head += _gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", GGML_TYPES[tname][0], offset)
        offset += len(data)
    with open(path, "wb") as f:
        f.write(head + b"\0" * _pad(len(head), alignment))
        pos = 0
        for (name, tname, shape, data), off in zip(tinfo, offsets):
            f.write(b"\0" * (off - pos))
            f.write(data)
            pos = off + len(data)
    return path


def _st_tensor(v):
    if isinstance(v, tuple):
        a = np.ascontiguousarray(v[0])
        if v[1] != "BF16" or a.dtype != np.uint16:
            raise TypeError("safetensors tuples are (uint16 bits, 'BF16')")
        return "BF16", a.shape, a.tobytes()
    a = np.ascontiguousarray(v)
    if a.dtype not in _NP_ST:
        raise TypeError("no safetensors dtype for NumPy dtype %s" % a.dtype)
    return _NP_ST[a.dtype], a.shape, a.astype(a.dtype.newbyteorder("<") if a.dtype.itemsize > 1 else a.dtype).tobytes()


def write_safetensors(path, tensors, metadata=None, bf16=()):
    """Writes one .safetensors file; returns the data bytes written."""
    tensors = _flag_bf16(tensors, bf16)
    header = {}
    if metadata is not None:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    off = 0
    for name, v in tensors.items():
        dt, shape, data = _st_tensor(v)
        header[name] = {"dtype": dt, "shape": [int(d) for d in shape], "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * _pad(len(h), 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    return off


def write_safetensors_sharded(folder, tensors, shards=2, metadata=None, bf16=()):
    """Splits tensors (in order) into `shards` files plus the index json;
    returns the list of shard file names."""
    tensors = _flag_bf16(tensors, bf16)
    os.makedirs(folder, exist_ok=True)
    names = list(tensors)
    per = max(1, -(-len(names) // shards))
    files = []
    weight_map = {}
    total = 0
    for i in range(shards):
        fn = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
        part = {n: tensors[n] for n in names[i * per:(i + 1) * per]}
        total += write_safetensors(os.path.join(folder, fn), part, metadata)
        for n in part:
            weight_map[n] = fn
        files.append(fn)
    write_json(os.path.join(folder, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": weight_map})
    return files


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


# ---------------------------------------------------------------- fixtures for the C tests

def fixture_metadata():
    """Every GGUF value type, the values test_gguf.c expects."""
    return [
        ("general.architecture", "string", "llama"),
        ("t.u8", "uint8", 200), ("t.i8", "int8", -100),
        ("t.u16", "uint16", 60000), ("t.i16", "int16", -30000),
        ("t.u32", "uint32", 4000000000), ("t.i32", "int32", -2000000000),
        ("t.u64", "uint64", 2**63 + 5), ("t.i64", "int64", -(2**62)),
        ("t.f32", "float32", 0.5), ("t.f64", "float64", -1.25e300),
        ("t.bool", "bool", True), ("t.str", "string", "h\u00e9llo"),
        ("t.arr_i32", "array", ("int32", [1, -2, 3])),
        ("t.arr_str", "array", ("string", ["a", "", "\u00fcber"])),
        ("t.arr_f64", "array", ("float64", [0.25, -8.0])),
        ("t.arr_nested", "array", ("array", [("string", ["x", "yz"]), ("string", []), ("uint8", [7])])),
        ("t.arr_empty", "array", ("uint64", [])),
    ]


def fixture_tensors():
    q8 = np.arange(34, dtype=np.uint8)
    return {
        "f32": (np.arange(24, dtype=np.float32) * 0.25 - 1).reshape(2, 3, 4),
        "f16": (np.arange(15, dtype=np.float32) * 0.5).astype(np.float16).reshape(3, 5),
        "bf16": (bf16_bits((np.arange(8, dtype=np.float32) * 1.5 - 2)).reshape(4, 2), "BF16"),
        "q8": (q8, "Q8_0", (1, 32)),
    }


def write_fixtures(d):
    os.makedirs(d, exist_ok=True)
    write_gguf(os.path.join(d, "py_v3.gguf"), fixture_metadata(), fixture_tensors(), version=3, alignment=64)
    write_gguf(os.path.join(d, "py_v2.gguf"), fixture_metadata(), fixture_tensors(), version=2)
    st = {k: v for k, v in fixture_tensors().items() if k != "q8"}
    st["i64"] = np.array([[-1, 2], [3, -4]], dtype=np.int64)
    write_safetensors(os.path.join(d, "py_single.safetensors"), st, metadata={"format": "pt"})
    write_safetensors_sharded(os.path.join(d, "py_sharded"), st, shards=2)
    write_json(os.path.join(d, "py_sharded", "config.json"), {"hidden_size": 64, "model_type": "llama"})


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "fixtures":
        write_fixtures(sys.argv[2])
    else:
        sys.exit("usage: formats.py fixtures DIR")
