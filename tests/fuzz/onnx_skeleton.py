#!/usr/bin/python3
"""onnx_skeleton.py IN OUT - a fuzz seed from a real ONNX model: the same
graph, ops and attributes, with each large initializer and each large
Constant (in the main graph and in If/Loop/Scan bodies) replaced by a
ConstantOfShape of its shape and first element, so that a model of
megabytes becomes a seed of kilobytes that still imports.

Works on the protobuf wire format directly (no onnx module): every field
is kept in order, except initializers (GraphProto field 5) and Constant
nodes of more than SMALL elements.  The two nodes standing for an
initializer are written first in its graph (nodes must be in topological
order); those for a Constant take its place.
Exit 0 with OUT written, 1 when IN is no model this can read."""
import sys

SMALL = 16
# TensorProto.DataType -> element size for the numeric types ConstantOfShape takes
ELEM = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}


def varint(b, i):
    v = s = 0
    while True:
        if i >= len(b) or s > 63:
            raise ValueError("bad varint")
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(field number, wire type, value bytes or int, raw bytes of the whole field)"""
    i = 0
    while i < len(b):
        start = i
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wt)
        if i > len(b):
            raise ValueError("truncated")
        yield f, wt, v, b[start:i]


def enc_varint(v):
    out = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def ld(f, payload):  # a length-delimited field
    return enc_varint(f << 3 | 2) + enc_varint(len(payload)) + payload


def vi(f, v):  # a varint field
    return enc_varint(f << 3) + enc_varint(v & (2 ** 64 - 1))


def tensor_info(t):
    """dims, data type, name and the first element's bytes (or None) of a TensorProto."""
    dims, dt, name, first = [], 0, b"", None
    for f, wt, v, _ in fields(t):
        if f == 1:
            if wt == 2:  # packed
                j = 0
                while j < len(v):
                    d, j = varint(v, j)
                    dims.append(d)
            else:
                dims.append(v)
        elif f == 2:
            dt = v
        elif f == 8:
            name = v
        elif f == 9 and v:
            first = bytes(v[:ELEM.get(dt, 0)]) if dt else bytes(v)
        elif f == 4 and wt == 2 and len(v) >= 4:
            first = bytes(v[:4])
    return dims, dt, name, first


def stand_in(t, name=None):
    """The two NodeProtos (Constant of the shape, ConstantOfShape) that stand
    for a large tensor of the given output name (the tensor's own name when
    None), or None to keep the tensor as it is."""
    dims, dt, tname, first = tensor_info(t)
    name = name or tname
    n = 1
    for d in dims:
        n *= d
    if n <= SMALL or dt not in ELEM or not name:
        return None
    size = ELEM[dt]
    if first is None or len(first) != size:
        first = bytes(size)
    shape_name = name + b"__skeleton_shape"
    shape = ld(1, enc_varint(len(dims))) + vi(2, 7) + ld(7, b"".join(enc_varint(d) for d in dims))
    value = ld(1, enc_varint(1)) + vi(2, dt) + ld(9, first)

    def node(inputs, output, op, attr_tensor):
        attr = ld(1, b"value") + ld(5, attr_tensor) + vi(20, 4)  # type TENSOR
        return b"".join(ld(1, x) for x in inputs) + ld(2, output) + ld(4, op) + ld(5, attr)
    return ld(1, node([], shape_name, b"Constant", shape)) + ld(1, node([shape_name], name, b"ConstantOfShape", value))


def shrink_node(nb):
    """A NodeProto's fields: a Constant holding a large tensor becomes its two
    stand-in nodes; any other node keeps its fields, with the graphs in its
    attributes (If, Loop, Scan bodies) shrunk the same way."""
    nf = list(fields(nb))
    op = next((v for f, _, v, _ in nf if f == 4), b"")
    outs = [v for f, _, v, _ in nf if f == 2]
    if op == b"Constant" and len(outs) == 1:
        for f, _, v, _ in nf:
            if f == 5:
                af = {k: x for k, _, x, _ in fields(v)}
                if af.get(1) == b"value" and 5 in af:
                    repl = stand_in(af[5], outs[0])
                    if repl:
                        return repl
    out = bytearray()
    for f, wt, v, raw in nf:
        if f != 5 or wt != 2:
            out += raw
            continue
        attr = bytearray()
        for af, awt, av, araw in fields(v):
            attr += ld(af, shrink_graph(av)) if af in (6, 11) and awt == 2 else araw
        out += ld(5, bytes(attr))
    return ld(1, bytes(out))


def shrink_graph(g):
    head, rest = bytearray(), bytearray()
    for f, wt, v, raw in fields(g):
        if f == 5 and wt == 2:
            nodes = stand_in(v)
            if nodes:
                head += nodes
                continue
        rest += shrink_node(v) if f == 1 and wt == 2 else raw
    return bytes(head + rest)


def skeleton(model):
    out = bytearray()
    for f, wt, v, raw in fields(model):
        out += ld(7, shrink_graph(v)) if f == 7 and wt == 2 else raw
    return bytes(out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], "rb") as fh:
        data = fh.read()
    try:
        out = skeleton(data)
    except ValueError as e:
        print("%s: not a model this reads (%s)" % (sys.argv[1], e), file=sys.stderr)
        return 1
    with open(sys.argv[2], "wb") as fh:
        fh.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
