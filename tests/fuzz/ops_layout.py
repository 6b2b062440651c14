"""Op generators for shape and layout ops: Reshape, Transpose, Slice,
Concat, Gather, Expand, Squeeze, Unsqueeze, Flatten, Split, Tile, Pad and
Shape. Their shape-like operands (target shapes, axes, pads...) are
initializers, the way exporters write them; kiln folds them at compile time.
Expand sometimes takes its shape from a Shape node instead, which keeps the
shape symbolic in symbolic mode.
"""

import numpy as np

from generate import FLOATS, NUMERIC, Reject, broadcast, numel
from ops import gen, operand

ANY = NUMERIC + ("bool",)
INT64_MAX = np.iinfo(np.int64).max


def _divisors(n):
    return [k for k in range(2, n) if n % k == 0]


@gen("Reshape", weight=1.5)
def g_reshape(b):
    x = operand(b, ANY)
    s, n = list(x.shape), x.size
    form = b.choice(("flatten", "merge", "split", "ones", "factor"))
    if form == "flatten" or not s:
        t = [n]
    elif form == "merge" and len(s) >= 2:
        i = int(b.rng.integers(len(s) - 1))
        t = s[:i] + [s[i] * s[i + 1]] + s[i + 2:]
    elif form == "split" and any(_divisors(d) for d in s):
        i = b.choice([i for i, d in enumerate(s) if _divisors(d)])
        k = b.choice(_divisors(s[i]))
        t = s[:i] + [k, s[i] // k] + s[i + 1:]
    elif form == "factor" and _divisors(n):
        k = b.choice(_divisors(n))
        t = [k, n // k]
    else:
        t = list(s)
        if 1 in t and b.chance(0.5):
            t.remove(1)
        else:
            t.insert(int(b.rng.integers(len(t) + 1)), 1)
    written = list(t)
    # 0 copies the input's dim at the same position, -1 is inferred.
    for i, d in enumerate(t):
        if i < len(s) and s[i] == d and b.chance(0.3):
            written[i] = 0
    if t and n > 0 and b.chance(0.4):
        written[int(b.rng.integers(len(t)))] = -1
    if written.count(-1) > 1:
        raise Reject("two -1")
    b.node("Reshape", [x, b.ints(written)], [(x.dtype, tuple(t), x.mag, x.exact)],
           "%s %s%s%s" % (x.dtype, form, " zero" if 0 in written else "",
                          " infer" if -1 in written else ""))


@gen("Transpose", weight=1.2)
def g_transpose(b):
    x = operand(b, ANY, lambda t: t.rank >= 2)
    if x.rank < 2:
        raise Reject("rank")
    if b.chance(0.15):
        perm, attrs = list(range(x.rank))[::-1], {}
    else:
        perm = [int(p) for p in b.rng.permutation(x.rank)]
        attrs = {"perm": perm}
    out = tuple(x.shape[p] for p in perm)
    b.node("Transpose", [x], [(x.dtype, out, x.mag, x.exact)],
           "%s r%d%s" % (x.dtype, x.rank, "" if attrs else " default"), **attrs)


def slice_len(d, start, end, step):
    """ONNX Slice's element count along a dim of size d."""
    start = start + d if start < 0 else start
    end = end + d if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), d), min(max(end, 0), d)
    else:
        start, end = min(max(start, 0), d - 1), min(max(end, -1), d - 1)
    return len(range(start, end, step))


@gen("Slice", weight=1.5)
def g_slice(b):
    x = operand(b, ANY, lambda t: t.rank >= 1 and t.size > 0)
    if x.rank == 0:
        raise Reject("scalar")
    all_axes = b.chance(0.2)
    axes = list(range(x.rank)) if all_axes else \
        sorted(set(int(a) for a in b.rng.choice(x.rank, size=int(b.rng.integers(1, x.rank + 1)))))
    starts, ends, steps, out = [], [], [], list(x.shape)
    for a in axes:
        d = x.shape[a]
        for _ in range(10):
            step = int(b.choice((1, 1, 1, 2, 3, -1, -1, -2)))
            lo, hi = -d - 2, d + 2
            s = int(b.rng.integers(lo, hi + 1))
            e = int(b.choice((int(b.rng.integers(lo, hi + 1)), INT64_MAX, -INT64_MAX)))
            if slice_len(d, s, e, step) >= 1:
                break
        else:
            s, e, step = 0, d, 1
        starts.append(s), ends.append(e), steps.append(step)
        out[a] = slice_len(d, s, e, step)
    idt = "i64" if b.chance(0.8) else "i32"
    if idt == "i32":  # int32 cannot hold the extremes
        starts = [int(np.clip(v, -2**31, 2**31 - 1)) for v in starts]
        ends = [int(np.clip(v, -2**31, 2**31 - 1)) for v in ends]
    args = [x, b.ints(starts, idt), b.ints(ends, idt)]
    plain = all(s == 1 for s in steps)
    if not all_axes or b.chance(0.5) or not plain:
        args.append(b.ints([a - x.rank if b.chance(0.3) else a for a in axes], idt))
        if not plain or b.chance(0.3):
            args.append(b.ints(steps, idt))
    b.node("Slice", args, [(x.dtype, tuple(out), x.mag, x.exact)],
           "%s %s%s" % (x.dtype, "neg-step" if min(steps) < 0 else
                        "step" if max(steps) > 1 else "unit", " axes" if len(args) > 3 else ""))


@gen("Concat", weight=1.2)
def g_concat(b):
    x = operand(b, ANY, lambda t: t.rank >= 1)
    if x.rank == 0:
        raise Reject("scalar")
    axis = int(b.rng.integers(-x.rank, x.rank))
    a = axis % x.rank
    args, total = [x], x.shape[a]
    for _ in range(int(b.rng.integers(1, 3))):
        def fits(t):
            return t.dtype == x.dtype and t.rank == x.rank and all(
                t.shape[i] == x.shape[i] for i in range(x.rank) if i != a)
        t = b.pick(fits, recent_p=0.3) if b.chance(0.5) else None
        if t is None:
            shape = list(x.shape)
            shape[a] = b.dim(17)
            t = b.new_input(x.dtype, tuple(shape))
        args.append(t)
        total += t.shape[a]
    out = tuple(total if i == a else d for i, d in enumerate(x.shape))
    b.node("Concat", args, [(x.dtype, out, max(t.mag for t in args),
                             all(t.exact for t in args))],
           "%s n%d %s" % (x.dtype, len(args), "last" if a == x.rank - 1 else "inner"),
           axis=axis)


@gen("Gather", weight=1.0)
def g_gather(b):
    x = operand(b, ANY, lambda t: t.rank >= 1 and t.size > 0)
    if x.rank == 0:
        raise Reject("scalar")
    axis = int(b.rng.integers(-x.rank, x.rank))
    a = axis % x.rank
    d = x.shape[a]
    ishape = tuple(int(b.choice((1, 2, 3, 5))) for _ in range(int(b.choice((0, 1, 1, 2)))))
    idx = b.rng.integers(-d, d, size=ishape)
    idt = "i64" if b.chance(0.7) else "i32"
    arr = np.asarray(idx, dtype=np.int64 if idt == "i64" else np.int32)
    if b.chance(0.7):
        ind = b.const(arr, "idx")
    else:  # runtime indices
        from generate import Tensor
        ind = Tensor(b.name("idx"), idt, ishape, d, True)
        b.inputs.append((ind, arr))
        b.uses.setdefault(ind.name, 0)
    out = x.shape[:a] + ishape + x.shape[a + 1:]
    b.node("Gather", [x, ind], [(x.dtype, out, x.mag, x.exact)],
           "%s idx-r%d %s" % (x.dtype, len(ishape), "axis0" if a == 0 else "inner"), axis=axis)


@gen("Expand", weight=1.0, emits=["Expand", "Shape"])
def g_expand(b):
    x = operand(b, ANY)
    if b.chance(0.25):
        # The target shape read from another value at run time.
        def fits(t):
            out = broadcast(x.shape, t.shape)
            return t is not x and out is not None and numel(out) <= b.max_elems
        y = b.pick(fits, recent_p=0.3)
        if y is not None:
            (shp,) = b.node("Shape", [y], [("i64", (y.rank,), max(y.shape + (1,)), True)],
                            "full")
            out = broadcast(x.shape, y.shape)
            b.node("Expand", [x, shp], [(x.dtype, out, x.mag, x.exact)], "%s shape-of" % x.dtype)
            return
    target = [b.dim(9) if d == 1 and b.chance(0.6) else (1 if b.chance(0.2) else d)
              for d in x.shape]
    if b.chance(0.3):
        target = [int(b.choice((1, 2, 3)))] + target
    out = broadcast(x.shape, tuple(target))
    b.node("Expand", [x, b.ints(target)], [(x.dtype, out, x.mag, x.exact)],
           "%s r%d->r%d" % (x.dtype, x.rank, len(target)))


@gen("Squeeze", weight=0.7)
def g_squeeze(b):
    x = operand(b, ANY, lambda t: 1 in t.shape)
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if not ones:
        raise Reject("no dim of size 1")
    axes = sorted(set(int(a) for a in b.rng.choice(ones, size=int(b.rng.integers(1, len(ones) + 1)))))
    out = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    b.node("Squeeze", [x, b.ints([a - x.rank if b.chance(0.3) else a for a in axes])],
           [(x.dtype, out, x.mag, x.exact)], "%s n%d" % (x.dtype, len(axes)))


@gen("Unsqueeze", weight=0.7)
def g_unsqueeze(b):
    x = operand(b, ANY, lambda t: t.rank <= 4)
    k = int(b.rng.integers(1, 3))
    r = x.rank + k
    axes = sorted(int(a) for a in b.rng.choice(r, size=k, replace=False))
    out, it = [], iter(x.shape)
    for i in range(r):
        out.append(1 if i in axes else next(it))
    b.node("Unsqueeze", [x, b.ints([a - r if b.chance(0.3) else a for a in axes])],
           [(x.dtype, tuple(out), x.mag, x.exact)], "%s n%d" % (x.dtype, k))


@gen("Flatten", weight=0.7)
def g_flatten(b):
    x = operand(b, ANY, lambda t: t.rank >= 1)
    if x.rank == 0:
        raise Reject("scalar")
    axis = int(b.rng.integers(-x.rank, x.rank + 1))
    a = axis % x.rank if axis < 0 else axis
    out = (numel(x.shape[:a]), numel(x.shape[a:]))
    b.node("Flatten", [x], [(x.dtype, out, x.mag, x.exact)],
           "%s a%s" % (x.dtype, "0" if a == 0 else "end" if a == x.rank else "mid"), axis=axis)


@gen("Split", weight=0.8)
def g_split(b):
    x = operand(b, ANY, lambda t: any(d >= 2 for d in t.shape))
    big = [i for i, d in enumerate(x.shape) if d >= 2]
    if not big:
        raise Reject("nothing to split")
    a = b.choice(big)
    d = x.shape[a]
    k = int(b.rng.integers(2, min(3, d) + 1))
    # Without a split input, opset 18 needs num_outputs; 17 splits evenly.
    form = b.choice(("sizes", "num_outputs" if b.opset >= 18 else "equal"))
    args, attrs = [x], {"axis": a - x.rank if b.chance(0.3) else a}
    if form == "sizes":
        cuts = sorted(int(c) for c in b.rng.choice(np.arange(1, d), size=k - 1, replace=False))
        sizes = [e - s for s, e in zip([0] + cuts, cuts + [d])]
        args.append(b.ints(sizes))
    elif form == "num_outputs":
        chunk = -(-d // k)
        sizes = [chunk] * (k - 1) + [d - chunk * (k - 1)]
        if sizes[-1] <= 0:
            raise Reject("empty last chunk")
        attrs["num_outputs"] = k
    else:
        if d % k:
            raise Reject("uneven")
        sizes = [d // k] * k
    outs = [(x.dtype, tuple(s if i == a else e for i, e in enumerate(x.shape)), x.mag, x.exact)
            for s in sizes]
    b.node("Split", args, outs, "%s %s n%d" % (x.dtype, form, k), **attrs)


@gen("Tile", weight=0.6)
def g_tile(b):
    x = operand(b, ANY, lambda t: t.rank >= 1 and t.size * 2 <= b.max_elems)
    if x.rank == 0:
        raise Reject("scalar")
    reps = [int(b.choice((1, 1, 2, 3))) for _ in x.shape]
    out = tuple(d * r for d, r in zip(x.shape, reps))
    b.node("Tile", [x, b.ints(reps)], [(x.dtype, out, x.mag, x.exact)],
           "%s r%d" % (x.dtype, x.rank))


@gen("Pad", weight=1.0)
def g_pad(b):
    x = operand(b, NUMERIC + ("bool",), lambda t: t.rank >= 1)
    if x.rank == 0:
        raise Reject("scalar")
    mode = b.choice(("constant", "constant", "reflect", "edge") if x.dtype != "bool"
                    else ("constant",))
    use_axes = b.opset >= 18 and b.chance(0.3)
    axes = sorted(set(int(a) for a in b.rng.choice(x.rank, size=int(b.rng.integers(1, x.rank + 1))))) \
        if use_axes else list(range(x.rank))
    begin, end, out = [], [], list(x.shape)
    for a in axes:
        d = x.shape[a]
        hi = min(3, d - 1) if mode == "reflect" else 3
        pb, pe = (int(b.rng.integers(0, hi + 1)) for _ in range(2))
        if mode == "constant" and d > 2 and b.chance(0.2):
            pe = -int(b.rng.integers(1, min(2, d - 2) + 1))  # a negative pad crops
        begin.append(pb), end.append(pe)
        out[a] = d + pb + pe
    if numel(out) > b.max_elems:
        raise Reject("too big")
    args = [x, b.ints(begin + end)]
    if mode == "constant" and b.chance(0.5):
        from generate import dtype_np
        args.append(b.const(np.asarray(1.5 if x.dtype in FLOATS else 1,
                                       dtype=dtype_np(x.dtype)), "pv"))
    if use_axes:
        args += [""] * (3 - len(args)) + [b.ints([a - x.rank if b.chance(0.3) else a
                                                  for a in axes])]
    b.node("Pad", args, [(x.dtype, tuple(out), max(x.mag, 1.5), x.exact)],
           "%s %s%s%s" % (x.dtype, mode, " crop" if min(end) < 0 else "",
                          " axes" if use_axes else ""), mode=mode)


@gen("Shape", weight=0.4, emits=["Shape", "Cast"])
def g_shape(b):
    """Shape (and its start/end) into the integer paths."""
    x = operand(b, ANY, lambda t: t.rank >= 1)
    if x.rank == 0:
        raise Reject("scalar")
    attrs = {}
    start, end = 0, x.rank
    if b.chance(0.4):
        start = int(b.rng.integers(-x.rank, x.rank))
        attrs["start"] = start
        start = start % x.rank
    if b.chance(0.3):
        end = int(b.rng.integers(start + 1, x.rank + 1))
        attrs["end"] = end
    k = end - start
    b.node("Shape", [x], [("i64", (k,), max(x.shape + (1,)), True)],
           "slice" if attrs else "full", **attrs)
