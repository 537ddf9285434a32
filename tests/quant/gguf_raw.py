"""A GGUF file's metadata and raw tensors (name -> (shape, ggml type, bytes)),
for the quantize tests: nothing is decoded, so any type can be compared."""
import struct

BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2)}
NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 12: "Q4_K", 13: "Q5_K",
         14: "Q6_K", 30: "BF16"}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    pos = [0]

    def take(fmt):
        v = struct.unpack_from("<" + fmt, data, pos[0])
        pos[0] += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        n = take("Q")
        pos[0] += n
        return data[pos[0] - n:pos[0]].decode("utf-8", "surrogateescape")

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    if data[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    pos[0] = 4
    version = take("I")
    n_t, n_kv = take("Q"), take("Q")
    meta = {}
    for _ in range(n_kv):
        k = string()
        meta[k] = value(take("I"))
    infos = []
    for _ in range(n_t):
        name = string()
        ne = [take("Q") for _ in range(take("I"))]
        infos.append((name, ne[::-1], take("I"), take("Q")))
    align = meta.get("general.alignment", 32)
    base = (pos[0] + align - 1) // align * align
    tensors = {}
    for name, shape, t, off in infos:
        n = 1
        for d in shape:
            n *= d
        be, bb = BLOCK[t]
        size = n // be * bb
        if base + off + size > len(data):
            raise ValueError("%s: tensor %s runs past the end" % (path, name))
        tensors[name] = (shape, t, data[base + off:base + off + size])
    return version, meta, tensors
