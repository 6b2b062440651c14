"""Op generators: each draws one op (or a short pattern of ops) with random
attributes onto a Builder (generate.py), picking operands of shapes the op
accepts. A generator raises Reject when what it drew does not fit (too many
elements, a magnitude that would overflow); the builder then undoes it.

This file holds the registry, elementwise ops, reductions and
normalisations; ops_layout.py the shape ops and ops_nn.py convolutions,
pooling and matrix products. Each generator passes a coverage key, a coarse
description of its attribute combination (dtype, broadcasting, which
optional inputs...), so that a run can say how many combinations it tried.
"""

import math

import numpy as np

from generate import FLOATS, INTS, NUMERIC, Reject, broadcast, numel


class Gen:
    def __init__(self, name, fn, weight, emits, min_opset):
        self.name, self.fn, self.weight = name, fn, weight
        self.emits, self.min_opset = set(emits), min_opset


GENERATORS = {}


def gen(name, weight=1.0, emits=None, min_opset=17):
    """Registers a generator; `emits` lists the op types it may add (the
    --ops filter keeps a generator when all of them are allowed)."""
    def wrap(fn):
        GENERATORS[name] = Gen(name, fn, weight, emits or [name], min_opset)
        return fn
    return wrap


def choose_generators(ops, opset):
    """Names of the generators usable at `opset` whose ops are all in `ops`
    (op types or generator names; None: all)."""
    allowed = set(ops) if ops else None
    names = []
    for name, g in sorted(GENERATORS.items()):
        if g.min_opset > opset:
            continue
        if allowed is None or name in allowed or g.emits <= allowed:
            names.append(name)
    if not names:
        raise ValueError("no op generator fits --ops %s at opset %d" % (",".join(ops), opset))
    return names


# -- operands ----------------------------------------------------------------


def operand(b, dtypes=FLOATS, pred=None, rank=None, recent_p=0.6):
    """A pool value of one of `dtypes` (and `pred`), else a fresh input."""
    def ok(t):
        return t.dtype in dtypes and (pred is None or pred(t)) and \
            (rank is None or t.rank in rank)

    def fresh():
        r = b.choice(tuple(rank)) if rank else None
        return b.new_input(b.choice(dtypes), b.shape(r), const_p=0.1)
    return b.pick(ok, fresh, recent_p)


def partner_shape(b, shape):
    """A shape broadcasting with `shape`: the same, with some dims 1, fewer
    leading dims, one more leading dim, or longer where `shape` has a 1."""
    r = len(shape)
    form = b.choice(("same", "ones", "ones", "shorter", "longer", "grow"))
    if form == "same":
        return tuple(shape)
    if form == "shorter":
        k = int(b.rng.integers(0, r + 1))
        return tuple(d if b.chance(0.7) else 1 for d in shape[r - k:])
    if form == "longer":
        return (b.choice((1, 2, 3)),) + tuple(d if b.chance(0.7) else 1 for d in shape)
    if form == "grow":
        # The other side is the longer one where this side has a 1.
        return tuple(b.dim(17) if d == 1 and b.chance(0.7) else d for d in shape)
    return tuple(1 if b.chance(0.4) else d for d in shape)


def partner(b, a, kind="normal", dtype=None, from_pool_p=0.4):
    """A second operand broadcasting with `a` (a pool value of the same
    dtype when one fits, else fresh) and the broadcast output shape."""
    dtype = dtype or a.dtype
    if kind == "normal" and b.chance(from_pool_p):
        def fits(t):
            out = broadcast(a.shape, t.shape)
            return t.dtype == dtype and out is not None and numel(out) <= b.max_elems
        t = b.pick(fits, recent_p=0.2)
        if t is not None:
            return t, broadcast(a.shape, t.shape)
    shape = partner_shape(b, a.shape)
    out = broadcast(a.shape, shape)
    if out is None or numel(out) > b.max_elems:
        shape, out = a.shape, a.shape
    return b.new_input(dtype, shape, kind), out


def bcast_key(a, c, out):
    """Coverage words for how two operand shapes broadcast."""
    if a.shape == c.shape:
        return "same"
    if len(a.shape) != len(c.shape):
        return "rank"
    return "ones"


def scalar(b, value, dtype, like=None):
    """A rank-0 initializer of `dtype`, sometimes of shape [1] when that
    does not change the rank of an op on `like`."""
    arr = np.asarray(value, dtype=np.dtype({"f32": np.float32, "f16": np.float16,
                                            "i32": np.int32, "i64": np.int64}[dtype]))
    if like is not None and like.rank >= 1 and b.chance(0.3):
        arr = arr.reshape(1)
    return b.const(arr, "s")


# -- elementwise -------------------------------------------------------------

# op -> (magnitude of the result given the operand's, whether an exact
# operand gives an exact result, extra operand condition)
UNARY_FLOAT = {
    "Relu": (lambda m: m, True, None),
    "Sigmoid": (lambda m: 1.0, False, None),
    "Tanh": (lambda m: 1.0, False, None),
    "Exp": (lambda m: math.exp(min(m, 50)), False, lambda t: t.mag <= 10),
    "Abs": (lambda m: m, True, None),
    "Neg": (lambda m: m, True, None),
    "Erf": (lambda m: 1.0, False, None),
    "Softplus": (lambda m: m + 1, False, lambda t: t.mag <= 30),
    "Floor": (lambda m: m + 1, True, lambda t: t.exact),
    "Sin": (lambda m: 1.0, False, lambda t: t.mag <= 100),
}


def _unary(op):
    mag_fn, keeps_exact, cond = UNARY_FLOAT[op]

    def fn(b):
        dts = FLOATS + INTS if op in ("Abs", "Neg", "Relu") else FLOATS
        if op == "Relu":
            dts = FLOATS + ("i32",)
        x = operand(b, dts, cond)
        if cond and not cond(x):
            raise Reject("operand out of range")
        b.node(op, [x], [(x.dtype, x.shape, mag_fn(x.mag), keeps_exact and x.exact)],
               "%s r%d" % (x.dtype, x.rank))
    return fn


for _op in UNARY_FLOAT:
    gen(_op, weight=1.0 if _op not in ("Floor", "Sin", "Softplus") else 0.3)(_unary(_op))


@gen("Sqrt", emits=["Abs", "Sqrt"])
def g_sqrt(b):
    """Sqrt of |x| (a negative operand would give NaN by design)."""
    x = operand(b, FLOATS)
    (a,) = b.node("Abs", [x], [(x.dtype, x.shape, x.mag, x.exact)], x.dtype)
    b.node("Sqrt", [a], [(x.dtype, x.shape, math.sqrt(x.mag), False)], x.dtype)


@gen("LeakyRelu", weight=0.4, emits=["LeakyRelu", "HardSigmoid", "Elu"])
def g_param_unary(b):
    x = operand(b, FLOATS)
    op = b.choice(("LeakyRelu", "HardSigmoid", "Elu"))
    attrs = {"LeakyRelu": {"alpha": float(b.choice((0.01, 0.2)))},
             "HardSigmoid": {"alpha": 0.2, "beta": 0.5},
             "Elu": {"alpha": float(b.choice((1.0, 0.5)))}}[op]
    b.node(op, [x], [(x.dtype, x.shape, x.mag + 1, False)], x.dtype, **attrs)


BINARY = {"Add": lambda a, c: a + c, "Sub": lambda a, c: a + c,
          "Mul": lambda a, c: a * c, "Div": lambda a, c: a * 2}


def _binary(op):
    def fn(b):
        a = operand(b, NUMERIC)
        if op == "Div" and a.dtype in INTS:
            # Integer division rounds differently per implementation for
            # negative operands: divide |a| by a positive divisor.
            (a,) = b.node("Abs", [a], [(a.dtype, a.shape, a.mag, True)], a.dtype)
        kind = {"Div": "pos" if a.dtype in INTS else "nonzero"}.get(op, "normal")
        c, out = partner(b, a, kind)
        if b.chance(0.3):
            a, c = c, a  # the broadcast side first, sometimes
            if op == "Div":
                a, c = c, a
        exact = a.dtype in INTS and c.dtype in INTS
        b.node(op, [a, c], [(a.dtype, out, BINARY[op](a.mag, c.mag), exact)],
               "%s %s" % (a.dtype, bcast_key(a, c, out)))
    return fn


for _op in BINARY:
    gen(_op, weight=2.0)(_binary(_op))


@gen("Max", emits=["Max", "Min", "Sum", "Mean"])
def g_variadic(b):
    op = b.choice(("Max", "Min", "Sum", "Mean"))
    a = operand(b, NUMERIC if op in ("Max", "Min") else ("f32",))
    args, out = [a], a.shape
    for _ in range(int(b.rng.integers(0, 3))):
        c, o = partner(b, a)
        if broadcast(out, c.shape) is None or numel(broadcast(out, c.shape)) > b.max_elems:
            break
        args.append(c)
        out = broadcast(out, c.shape)
    mag = max(t.mag for t in args) * (len(args) if op == "Sum" else 1)
    exact = all(t.exact for t in args) and op in ("Max", "Min")
    b.node(op, args, [(a.dtype, out, mag, exact)], "%s n%d" % (a.dtype, len(args)))


@gen("Pow", weight=0.7)
def g_pow(b):
    x = operand(b, FLOATS, lambda t: t.mag <= 50)
    e = b.choice((2.0, 3.0, 0.5))
    if e == 0.5:
        (x,) = b.node("Abs", [x], [(x.dtype, x.shape, x.mag, x.exact)], x.dtype)
    if e == 2.0 and b.chance(0.3):
        ex = scalar(b, 2, "i64", x)  # an integer exponent (T2 may differ from T)
    else:
        ex = scalar(b, e, x.dtype if b.chance(0.5) else "f32", x)
    b.node("Pow", [x, ex], [(x.dtype, x.shape, x.mag ** e, False)],
           "%s e%g %s" % (x.dtype, e, ex.dtype))


COMPARE = ("Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Equal")


@gen("Less", weight=1.0, emits=COMPARE)
def g_compare(b):
    op = b.choice(COMPARE)
    # == on floats computed two ways is a coin toss: exact operands only;
    # float16 rounds so coarsely that < is one too.
    def fits(t):
        return t.exact or not (op == "Equal" or t.dtype == "f16")
    a = operand(b, NUMERIC, fits)
    if not fits(a):
        raise Reject("inexact comparison")
    c, out = partner(b, a, from_pool_p=0.0 if op == "Equal" else 0.4)
    if op == "Equal" and not c.exact:
        raise Reject("inexact ==")
    b.node(op, [a, c], [("bool", out, 1, True)], "%s %s" % (a.dtype, bcast_key(a, c, out)))


def bool_operand(b):
    """A bool pool value, else a comparison of a float value with 0."""
    t = b.pick(lambda t: t.dtype == "bool")
    if t is not None:
        return t
    if b.chance(0.5):
        return b.new_input("bool", b.shape(), const_p=0.1)
    x = operand(b, NUMERIC, lambda t: t.exact or t.dtype != "f16")
    if not (x.exact or x.dtype != "f16"):
        raise Reject("float16 comparison")
    zero = scalar(b, 0, x.dtype, x)
    return b.node("Greater", [x, zero], [("bool", x.shape, 1, True)], x.dtype + " scalar")[0]


@gen("And", weight=0.8, emits=["And", "Or", "Xor", "Not", "Greater"])
def g_logic(b):
    a = bool_operand(b)
    if b.chance(0.2):
        b.node("Not", [a], [("bool", a.shape, 1, True)], "r%d" % a.rank)
        return
    op = b.choice(("And", "Or", "Xor"))
    c, out = partner(b, a)
    b.node(op, [a, c], [("bool", out, 1, True)], bcast_key(a, c, out))


@gen("Where", weight=1.2, emits=["Where", "Greater"])
def g_where(b):
    cond = bool_operand(b)
    # onnxruntime has no bool Where (the slower ONNX reference runs those).
    x = operand(b, NUMERIC + (("bool",) if b.chance(0.1) else ()))
    out = broadcast(cond.shape, x.shape)
    if out is None or numel(out) > b.max_elems:
        x = b.new_input(x.dtype, partner_shape(b, cond.shape))
        out = broadcast(cond.shape, x.shape) or x.shape
        if broadcast(cond.shape, x.shape) is None:
            raise Reject("no broadcast")
    y, out = partner_for(b, x, out)
    b.node("Where", [cond, x, y], [(x.dtype, out, max(x.mag, y.mag), x.exact and y.exact)],
           "%s c%s x%s" % (x.dtype, bcast_key(cond, x, out), bcast_key(x, y, out)))


def partner_for(b, x, out):
    """A value of x's dtype broadcasting to exactly `out`."""
    shape = tuple(1 if b.chance(0.3) else d for d in out)
    if b.chance(0.3):
        shape = shape[int(b.rng.integers(0, len(shape) + 1)):]
    y = b.new_input(x.dtype, shape)
    return y, broadcast(out, shape)


@gen("Clip", weight=0.8)
def g_clip(b):
    x = operand(b, NUMERIC)
    lo, hi = sorted(float(v) for v in b.rng.uniform(-x.mag, x.mag, 2))
    if x.dtype in INTS:
        lo, hi = math.floor(lo), math.ceil(hi)
    form = b.choice(("both", "both", "min", "max", "none"))
    args = [x]
    if form in ("both", "min"):
        args.append(scalar(b, lo, x.dtype))
    elif form == "max":
        args.append("")  # no min: an empty optional input
    if form in ("both", "max"):
        args.append(scalar(b, hi, x.dtype))
    b.node("Clip", args, [(x.dtype, x.shape, x.mag, x.exact)], "%s %s" % (x.dtype, form))


CAST_TO = ("f32", "f16", "i32", "i64", "bool")


@gen("Cast", weight=1.5)
def g_cast(b):
    x = operand(b, NUMERIC + ("bool",), recent_p=0.7)
    to = b.choice([d for d in CAST_TO if d != x.dtype])
    if x.dtype in FLOATS and to in INTS and not x.exact:
        # Truncating a value computed two ways can land on either integer.
        raise Reject("inexact float to int")
    if to == "f16" and x.mag > 2e3:
        raise Reject("float16 overflow")
    if x.dtype in INTS and to == "f16" and x.mag > 2048:
        raise Reject("inexact int to float16")
    from generate import DTYPES
    mag = 1.0 if to == "bool" else x.mag + 1
    exact = x.exact or to in INTS + ("bool",) and x.dtype in INTS + ("bool",)
    b.node("Cast", [x], [(to, x.shape, mag, exact)], "%s->%s" % (x.dtype, to),
           to=DTYPES[to][1])


@gen("Gelu", weight=0.8, emits=["Div", "Mul", "Erf", "Add", "Tanh", "Pow", "Sigmoid", "Gelu"])
def g_gelu(b):
    """The GELU and SiLU patterns exporters emit, or Gelu itself (opset 20)."""
    x = operand(b, FLOATS, lambda t: t.mag <= 100)
    dt, s, m = x.dtype, x.shape, x.mag
    form = b.choice(("erf", "tanh", "silu") + (("op",) if b.opset >= 20 else ()))
    out = [(dt, s, m + 1, False)]
    if form == "erf":
        (h,) = b.node("Div", [x, scalar(b, math.sqrt(2), dt, x)], out, "gelu")
        (e,) = b.node("Erf", [h], out, "gelu")
        (p,) = b.node("Add", [e, scalar(b, 1, dt, x)], out, "gelu")
        (y,) = b.node("Mul", [x, p], [(dt, s, 2 * m + 2, False)], "gelu")
        b.node("Mul", [y, scalar(b, 0.5, dt, x)], [(dt, s, m + 1, False)], "gelu")
    elif form == "tanh":
        (c,) = b.node("Pow", [x, scalar(b, 3, dt, x)], [(dt, s, m ** 3 + 1, False)], "gelu")
        (c,) = b.node("Mul", [c, scalar(b, 0.044715, dt, x)], out, "gelu")
        (c,) = b.node("Add", [x, c], out, "gelu")
        (c,) = b.node("Mul", [c, scalar(b, math.sqrt(2 / math.pi), dt, x)], out, "gelu")
        (t,) = b.node("Tanh", [c], out, "gelu")
        (t,) = b.node("Add", [t, scalar(b, 1, dt, x)], out, "gelu")
        (y,) = b.node("Mul", [x, t], out, "gelu")
        b.node("Mul", [y, scalar(b, 0.5, dt, x)], out, "gelu")
    elif form == "silu":
        (sg,) = b.node("Sigmoid", [x], out, "silu")
        b.node("Mul", [x, sg], out, "silu")
    else:
        approx = b.choice(("none", "tanh"))
        b.node("Gelu", [x], out, "%s %s" % (dt, approx), approximate=approx)


# -- reductions --------------------------------------------------------------

REDUCE = {  # op -> (dtypes, magnitude given (m, n))
    "ReduceSum": (NUMERIC, lambda m, n: m * n),
    "ReduceMean": (FLOATS + ("i32",), lambda m, n: m),
    "ReduceMax": (NUMERIC, lambda m, n: m),
    "ReduceMin": (NUMERIC, lambda m, n: m),
    "ReduceProd": (NUMERIC, lambda m, n: math.exp(min(700.0, n * math.log(max(m, 1.0))))),
    "ReduceL2": (FLOATS, lambda m, n: m * math.sqrt(n)),
    "ReduceLogSumExp": (FLOATS, lambda m, n: m + math.log(n) + 1),
    "ReduceSumSquare": (FLOATS, lambda m, n: m * m * n),
    "ReduceL1": (FLOATS, lambda m, n: m * n),
}


@gen("ReduceSum", weight=2.5, emits=list(REDUCE))
def g_reduce(b):
    op = b.choice(tuple(REDUCE))
    dtypes, mag_fn = REDUCE[op]
    x = operand(b, dtypes, lambda t: t.rank >= 1 or b.chance(0.2))
    if op == "ReduceProd" and x.mag > 4:
        raise Reject("product would overflow")
    r = x.rank
    form = b.choice(("axes", "axes", "axes", "all", "empty_noop") if r else ("all",))
    axes = sorted(set(int(a) for a in b.rng.choice(r, size=int(b.rng.integers(1, r + 1)),
                                                    replace=True))) if r else []
    if form != "axes":
        axes = []
    keep = int(b.chance(0.5))
    reduced = range(r) if form == "all" else axes
    n = numel([x.shape[a] for a in reduced])
    if form == "empty_noop":
        out, n = x.shape, 1
    else:
        out = tuple((1 if keep else None) if a in reduced else d for a, d in enumerate(x.shape))
        out = tuple(d for d in out if d is not None)
    written = [a - r if b.chance(0.3) else a for a in axes]
    attrs = {"keepdims": keep}
    args = [x]
    if form == "empty_noop":
        attrs["noop_with_empty_axes"] = 1
    axes_as_input = b.opset >= 18 or op == "ReduceSum"
    if axes_as_input:
        if form == "axes":
            args.append(b.ints(written))
        elif form == "empty_noop":
            args.append(b.ints(np.zeros(0, np.int64)))
    elif form == "axes":
        attrs["axes"] = written
    elif form == "empty_noop":
        raise Reject("no empty axes attribute")
    b.node(op, args, [(x.dtype, out, mag_fn(x.mag, n), x.exact and x.dtype in INTS)],
           "%s %s keep%d%s" % (x.dtype, form if form != "axes" else
                               "axes%d/%d" % (len(axes), r), keep,
                               " n>256" if n > 256 else ""), **attrs)


@gen("ArgMax", weight=0.8, emits=["ArgMax", "ArgMin"])
def g_argmax(b):
    op = b.choice(("ArgMax", "ArgMin"))
    x = operand(b, NUMERIC, lambda t: t.rank >= 1 and (t.exact or t.dtype != "f16"))
    if x.rank == 0 or not (x.exact or x.dtype != "f16"):
        raise Reject("scalar, or float16 ties")
    axis = int(b.rng.integers(-x.rank, x.rank))
    keep = int(b.chance(0.5))
    last = int(b.chance(0.3))
    a = axis % x.rank
    out = tuple(1 if i == a else d for i, d in enumerate(x.shape) if keep or i != a)
    b.node(op, [x], [("i64", out, x.shape[a], True)],
           "%s keep%d last%d" % (x.dtype, keep, last), axis=axis, keepdims=keep,
           select_last_index=last)


@gen("Softmax", weight=1.0, emits=["Softmax", "LogSoftmax"])
def g_softmax(b):
    op = b.choice(("Softmax", "LogSoftmax"))
    x = operand(b, FLOATS, lambda t: t.rank >= 1)
    if x.rank == 0:
        raise Reject("scalar")
    axis = int(b.rng.integers(-x.rank, x.rank))
    mag = 1.0 if op == "Softmax" else 2 * x.mag + math.log(max(2, x.size)) + 1
    b.node(op, [x], [(x.dtype, x.shape, mag, False)],
           "%s %s" % (x.dtype, "last" if axis % x.rank == x.rank - 1 else "inner"), axis=axis)


# -- normalisations ----------------------------------------------------------


@gen("LayerNormalization", weight=0.8)
def g_layernorm(b):
    x = operand(b, FLOATS, lambda t: t.rank >= 1)
    if x.rank == 0:
        raise Reject("scalar")
    axis = int(b.rng.integers(-x.rank, x.rank))
    norm = x.shape[axis % x.rank:]
    scale = b.new_input(x.dtype, norm, "nonzero", const_p=0.7)
    args = [x, scale]
    if b.chance(0.6):
        args.append(b.new_input(x.dtype, norm, const_p=0.7))
    eps = float(b.choice((1e-5, 1e-3)))
    mag = math.sqrt(numel(norm)) * scale.mag + (args[2].mag if len(args) > 2 else 0)
    b.node("LayerNormalization", args, [(x.dtype, x.shape, mag, False)],
           "%s %s bias%d" % (x.dtype, "last" if axis % x.rank == x.rank - 1 else "multi",
                             len(args) > 2), axis=axis, epsilon=eps)


@gen("BatchNormalization", weight=0.6)
def g_batchnorm(b):
    x = operand(b, ("f32",) if b.chance(0.8) else FLOATS, lambda t: t.rank >= 2,
                rank=(2, 3, 4))
    c = x.shape[1]
    scale = b.new_input(x.dtype, (c,), "nonzero", const_p=0.8)
    bias = b.new_input(x.dtype, (c,), const_p=0.8)
    mean = b.new_input(x.dtype, (c,), const_p=0.8)
    var = b.new_input(x.dtype, (c,), "pos", const_p=0.8)
    mag = (x.mag + mean.mag) * scale.mag / math.sqrt(0.5) + bias.mag
    b.node("BatchNormalization", [x, scale, bias, mean, var],
           [(x.dtype, x.shape, mag, False)], "%s r%d" % (x.dtype, x.rank),
           epsilon=float(b.choice((1e-5, 1e-3))))


import ops_layout  # noqa: E402,F401  (registers the shape ops)
import ops_nn  # noqa: E402,F401  (registers conv, pooling, matmul)
