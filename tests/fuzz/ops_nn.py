"""Op generators for convolutions, pooling and matrix products: Conv,
MaxPool, AveragePool, GlobalAveragePool/GlobalMaxPool, MatMul and Gemm.

Windows are drawn with pads, strides, dilations, groups and ceil_mode, and
only where ONNX says precisely what they compute: pads smaller than the
kernel (onnxruntime's rule), and ceil_mode only when the extra window starts
inside the input or its left pad (where PyTorch, onnxruntime and the ONNX
reference agree). Work is capped (multiply-adds) so that graphs run fast.
"""

import math

from generate import FLOATS, INTS, Reject, broadcast, numel
from ops import gen, operand

MAX_MACS = 3_000_000


def image(b, dtypes=("f32",), ranks=(3, 4)):
    """An N,C,spatial... operand: a pool value of rank 3-4 (rarely 5) with
    few channels, else a fresh input."""
    def ok(t):
        return t.dtype in dtypes and t.rank in ranks and t.shape[1] <= 64
    x = b.pick(ok, recent_p=0.7)
    if x is None:
        r = b.choice(ranks)
        spatial = [b.choice((1, 3, 5, 7, 8, 9, 12, 16, 17)) for _ in range(r - 2)]
        if r == 5:
            spatial = [min(s, 7) for s in spatial]
        shape = (b.choice((1, 1, 2, 3)), b.choice((1, 2, 3, 4, 6, 8, 16))) + tuple(spatial)
        x = b.new_input(b.choice(dtypes), shape, const_p=0.0)
    return x


def window(b, d, k, s, dil, auto_pad, pads, ceil=False):
    """Output size of a window k (dilation dil, stride s) over d, or None."""
    keff = (k - 1) * dil + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = -(-d // s)
        # A stride past the kernel would need negative padding, which
        # onnxruntime rejects.
        return out if (out - 1) * s + keff >= d else None
    if auto_pad == "VALID":
        return (d - keff) // s + 1 if d >= keff else None
    span = d + pads[0] + pads[1] - keff
    if span < 0:
        return None
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= d + pads[0]:
        return None  # the last window would start in the right pad
    return out


def draw_windows(b, spatial, max_k=5, allow_dil=True, pad_lt_kernel=True):
    """Kernel, strides, dilations and pads for every spatial dim."""
    ks = [int(b.choice((1, 2, 3, 3, max_k))) for _ in spatial]
    strides = [int(b.choice((1, 1, 2, 3))) for _ in spatial]
    dils = [int(b.choice((1, 1, 1, 2))) if allow_dil else 1 for _ in spatial]
    pads_b, pads_e = [], []
    for k, dl in zip(ks, dils):
        cap = (k - 1) if pad_lt_kernel else (k - 1) * dl
        pads_b.append(int(b.rng.integers(0, cap + 1)) if b.chance(0.6) else 0)
        pads_e.append(int(b.rng.integers(0, cap + 1)) if b.chance(0.6) else 0)
    return ks, strides, dils, pads_b, pads_e


def window_key(ks, strides, dils, pads_b, pads_e, auto_pad):
    return "k%s s%s d%s %s" % (
        "1" if max(ks) == 1 else "n", "1" if max(strides) == 1 else "n",
        "1" if max(dils) == 1 else "n",
        auto_pad if auto_pad != "NOTSET" else
        ("nopad" if max(pads_b + pads_e) == 0 else
         "sym" if pads_b == pads_e else "asym"))


@gen("Conv", weight=2.0)
def g_conv(b):
    x = image(b, ranks=(3, 4, 4, 4, 5) if b.chance(0.1) else (3, 4, 4))
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    groups = [1] + ([c] if c > 1 else []) + [g for g in range(2, c) if c % g == 0]
    g = int(b.choice(groups))
    m = g * int(b.choice((1, 1, 2, 3, 4, 8)))
    if m > 64:
        raise Reject("too many channels")
    ks, strides, dils, pb, pe = draw_windows(b, spatial, pad_lt_kernel=False)
    auto_pad = b.choice(("NOTSET",) * 6 + ("SAME_UPPER", "SAME_LOWER", "VALID"))
    if auto_pad.startswith("SAME") and max(dils) > 1:
        dils = [1] * len(spatial)  # SAME with dilation: onnxruntime differs
    out = [window(b, d, k, s, dl, auto_pad, (p0, p1))
           for d, k, s, dl, p0, p1 in zip(spatial, ks, strides, dils, pb, pe)]
    if None in out:
        raise Reject("window larger than input")
    cg = c // g
    fan_in = cg * numel(ks)
    if n * m * numel(out) * fan_in > MAX_MACS:
        raise Reject("too much work")
    w = b.new_input(x.dtype, (m, cg) + tuple(ks), const_p=0.85, scale=1 / math.sqrt(fan_in))
    args = [x, w]
    if b.chance(0.6):
        args.append(b.new_input(x.dtype, (m,), const_p=0.85))
    attrs = {"kernel_shape": ks} if b.chance(0.7) else {}
    if max(strides) > 1 or b.chance(0.3):
        attrs["strides"] = strides
    if max(dils) > 1 or b.chance(0.2):
        attrs["dilations"] = dils
    if auto_pad == "NOTSET":
        if max(pb + pe) > 0 or b.chance(0.2):
            attrs["pads"] = pb + pe
    else:
        attrs["auto_pad"] = auto_pad
    if g > 1 or b.chance(0.2):
        attrs["group"] = g
    mag = x.mag * 1.5 + (args[2].mag if len(args) > 2 else 0)
    b.node("Conv", args, [(x.dtype, (n, m) + tuple(out), mag, False)],
           "r%d g%s %s bias%d" % (x.rank, "1" if g == 1 else "dw" if g == c else "n",
                                  window_key(ks, strides, dils, pb, pe, auto_pad),
                                  len(args) > 2), **attrs)


@gen("MaxPool", weight=1.2, emits=["MaxPool", "AveragePool"])
def g_pool(b):
    op = b.choice(("MaxPool", "AveragePool"))
    x = image(b, ("f32",) * 4 + ("f16",), ranks=(3, 4, 4))
    spatial = x.shape[2:]
    dil_ok = op == "MaxPool" or b.opset >= 19
    ks, strides, dils, pb, pe = draw_windows(b, spatial, max_k=4, allow_dil=dil_ok)
    ceil = b.chance(0.3)
    auto_pad = "NOTSET" if ceil or b.chance(0.8) else b.choice(("SAME_UPPER", "VALID"))
    if auto_pad != "NOTSET":
        dils = [1] * len(spatial)
    out = [window(b, d, k, s, dl, auto_pad, (p0, p1), ceil)
           for d, k, s, dl, p0, p1 in zip(spatial, ks, strides, dils, pb, pe)]
    if None in out:
        raise Reject("window larger than input")
    attrs = {"kernel_shape": ks}
    if max(strides) > 1 or b.chance(0.3):
        attrs["strides"] = strides
    if max(dils) > 1:
        attrs["dilations"] = dils
    if auto_pad == "NOTSET":
        if max(pb + pe) > 0:
            attrs["pads"] = pb + pe
    else:
        attrs["auto_pad"] = auto_pad
    if ceil:
        attrs["ceil_mode"] = 1
    key = window_key(ks, strides, dils, pb, pe, auto_pad) + " ceil%d" % ceil
    outs = [(x.dtype, x.shape[:2] + tuple(out), x.mag, x.exact and op == "MaxPool")]
    if op == "AveragePool":
        # count_include_pad: the divisor of a window reaching past the right
        # pad (ceil_mode) is not agreed on; use it only where none does.
        overhang = ceil and any((o - 1) * s + (k - 1) * dl + 1 > d + p0 + p1 for o, s, k, dl, d, p0, p1
                                in zip(out, strides, ks, dils, spatial, pb, pe))
        if not overhang and b.chance(0.4):
            attrs["count_include_pad"] = 1
            key += " incl"
    elif b.chance(0.1) and x.dtype == "f32":
        outs.append(("i64", outs[0][1], x.size, True))  # the argmax indices
        key += " indices"
    b.node(op, [x], outs, "%s %s" % (x.dtype, key), **attrs)


@gen("GlobalAveragePool", weight=0.6, emits=["GlobalAveragePool", "GlobalMaxPool"])
def g_global_pool(b):
    op = b.choice(("GlobalAveragePool", "GlobalMaxPool"))
    x = image(b, ("f32", "f32", "f16"), ranks=(3, 4, 4, 5))
    out = x.shape[:2] + (1,) * (x.rank - 2)
    b.node(op, [x], [(x.dtype, out, x.mag, x.exact and op == "GlobalMaxPool")],
           "%s r%d" % (x.dtype, x.rank))


@gen("MatMul", weight=1.8)
def g_matmul(b):
    a = operand(b, ("f32",) * 6 + ("f16", "i32", "i64"), lambda t: 1 <= t.rank <= 4 and
                t.shape[-1] <= 256)
    if a.rank == 0 or a.shape[-1] > 256:
        raise Reject("shape")
    k = a.shape[-1]
    nn = int(b.choice((1, 2, 3, 5, 8, 16, 17, 32, 33, 64)))
    batch = a.shape[:-2]
    form = b.choice(("2d", "2d", "batch", "vector"))
    if form == "vector":
        bshape = (k,)
    elif form == "batch" and batch:
        bb = [1 if b.chance(0.3) else d for d in batch]
        bb = bb[int(b.rng.integers(0, len(bb) + 1)):]
        bshape = tuple(bb) + (k, nn)
    elif form == "batch":
        bshape = (int(b.choice((2, 3))), k, nn)
    else:
        bshape = (k, nn)
    # numpy's matmul rules, written out: 1-D operands lose their dim.
    ab, bb_ = (a.shape[:-2], bshape[:-2]) if a.rank >= 2 else ((), bshape[:-2])
    batch_out = broadcast(ab, bb_)
    if batch_out is None:
        raise Reject("batch dims")
    m = (a.shape[-2],) if a.rank >= 2 else ()
    ncol = (nn,) if len(bshape) >= 2 else ()
    out = batch_out + m + ncol
    if numel(out) * k > MAX_MACS:
        raise Reject("too much work")
    scale = 1 / math.sqrt(k) if a.dtype in FLOATS else 1.0
    w = b.new_input(a.dtype, bshape, const_p=0.5, scale=scale)
    mag = a.mag * w.mag * (k if a.dtype in INTS else 3 * math.sqrt(k))
    b.node("MatMul", [a, w], [(a.dtype, out, mag, a.dtype in INTS)],
           "%s a%d b%d%s" % (a.dtype, a.rank, len(bshape),
                             " bcast" if len(bb_) and ab != bb_ else ""))


@gen("Gemm", weight=1.0, emits=["Gemm", "Flatten"])
def g_gemm(b):
    a = operand(b, ("f32",) * 5 + ("f16",), lambda t: t.rank == 2 and t.shape[-1] <= 256)
    if a.rank != 2:
        if a.rank == 0:
            raise Reject("scalar")
        (a,) = b.node("Flatten", [a], [(a.dtype, (a.shape[0], numel(a.shape[1:])), a.mag,
                                         a.exact)], "gemm", axis=1)
    trans_a, trans_b = int(b.chance(0.3)), int(b.chance(0.4))
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    if k > 1024:
        raise Reject("K too long")
    nn = int(b.choice((1, 3, 8, 16, 17, 32, 64)))
    if m * nn * k > MAX_MACS:
        raise Reject("too much work")
    w = b.new_input(a.dtype, (nn, k) if trans_b else (k, nn), const_p=0.7,
                    scale=1 / math.sqrt(k))
    args = [a, w]
    cform = b.choice(("none", "n", "1n", "m1", "mn", "scalar"))
    if cform != "none":
        cshape = {"n": (nn,), "1n": (1, nn), "m1": (m, 1), "mn": (m, nn), "scalar": ()}[cform]
        args.append(b.new_input(a.dtype, cshape, const_p=0.7))
    attrs = {}
    if trans_a:
        attrs["transA"] = 1
    if trans_b:
        attrs["transB"] = 1
    alpha, beta = float(b.choice((1.0, 1.0, 0.5, 2.0))), float(b.choice((1.0, 1.0, 0.5)))
    if alpha != 1.0:
        attrs["alpha"] = alpha
    if beta != 1.0 and len(args) > 2:
        attrs["beta"] = beta
    mag = a.mag * w.mag * 3 * math.sqrt(k) * alpha + (args[2].mag if len(args) > 2 else 0)
    b.node("Gemm", args, [(a.dtype, (m, nn), mag, False)],
           "%s tA%d tB%d C%s%s" % (a.dtype, trans_a, trans_b, cform,
                                   " scaled" if alpha != 1 or beta != 1 else ""), **attrs)
