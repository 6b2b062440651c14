"""Random valid ONNX graphs for the differential fuzzer.

A graph is grown node by node by a `Builder`: it keeps a pool of the values
made so far (name, dtype, static shape, a bound on their magnitude) and each
op generator in ops.py picks operands from that pool (mostly the newest one,
so that chains form, sometimes an older one, so that DAGs form) or makes
fresh graph inputs and initializers of a shape the op accepts. The builder
computes every shape itself, writes them as value_info, and the finished
model must pass onnx.checker.check_model(full_check=True), whose strict
shape inference checks those shapes again.

Everything is drawn from numpy Generators seeded with (seed, graph index), so
the same seed gives the same graphs, input data included. Several
independent graphs can be assembled into one model (`assemble`) to share one
kilnc run; their names carry a `g<i>_` prefix so they stay apart.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper

# dtype key -> (numpy dtype, ONNX element type)
DTYPES = {
    "f32": (np.float32, TensorProto.FLOAT),
    "f16": (np.float16, TensorProto.FLOAT16),
    "i32": (np.int32, TensorProto.INT32),
    "i64": (np.int64, TensorProto.INT64),
    "bool": (np.bool_, TensorProto.BOOL),
}
FLOATS = ("f32", "f16")
INTS = ("i32", "i64")
NUMERIC = FLOATS + INTS
# The largest magnitude a value may reach, so that no graph overflows to inf
# (where tiny rounding differences would turn into inf-vs-finite mismatches).
MAG_LIMIT = {"f32": 1e6, "f16": 2e3, "i32": 1e6, "i64": 1e6, "bool": 1}

OPSETS = (17, 18, 19, 20, 21)
# The oldest IR version each opset needs; onnxruntime 1.31 reads IR <= 10.
MIN_IR = {17: 8, 18: 8, 19: 9, 20: 9, 21: 10}

# Dim sizes: many 1s (broadcasting), small and odd sizes, a few just past a
# power of two (vector tails).
DIM_CHOICES = (1, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 9, 11, 12, 16, 17, 31, 32, 33, 64, 65)


def dtype_np(key):
    return np.dtype(DTYPES[key][0])


def numel(shape):
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def broadcast(*shapes):
    """numpy's broadcast of static shapes, or None when they do not."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


class Tensor:
    """A value of the graph being built."""

    def __init__(self, name, dtype, shape, mag=1.0, exact=False):
        self.name = name
        self.dtype = dtype        # key of DTYPES
        self.shape = tuple(int(d) for d in shape)
        self.mag = float(mag)     # bound on |value| (loose)
        # Values that any correct implementation computes bit-exactly
        # (inputs, integers, shape ops of those): only these feed ops that
        # turn tiny rounding differences into big ones (casts to int, ==).
        self.exact = exact

    @property
    def rank(self):
        return len(self.shape)

    @property
    def size(self):
        return numel(self.shape)

    def __repr__(self):
        return "%s:%s%s" % (self.name, self.dtype, list(self.shape))


class Builder:
    """Grows one graph. `rng` draws every choice; `prefix` names its values."""

    def __init__(self, rng, prefix="", opset=17, max_elems=20000):
        self.rng = rng
        self.prefix = prefix
        self.opset = opset
        self.max_elems = max_elems
        self.nodes = []        # NodeProto
        self.inputs = []       # (Tensor, data)
        self.inits = []        # TensorProto
        self.pool = []         # Tensor, in creation order
        self.uses = {}         # name -> number of consumers
        self.coverage = []     # (op type, attribute-combination key)
        self._names = 0

    # -- names and random helpers -----------------------------------------

    def name(self, hint):
        self._names += 1
        return "%s%s%d" % (self.prefix, hint, self._names)

    def chance(self, p):
        return self.rng.random() < p

    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def dim(self, cap=65):
        return min(cap, int(self.choice(DIM_CHOICES)))

    def shape(self, rank=None, max_elems=None):
        """A random static shape whose element count stays under the cap."""
        max_elems = max_elems or self.max_elems
        if rank is None:
            rank = int(self.choice((0, 1, 1, 2, 2, 3, 3, 4, 4, 5)))
        dims = []
        for _ in range(rank):
            left = max(1, max_elems // max(1, numel(dims)))
            dims.append(min(self.dim(), left))
        return tuple(dims)

    # -- values --------------------------------------------------------------

    def data(self, dtype, shape, kind="normal"):
        """Random data. kind: normal, pos (in [0.5, 2]), nonzero (|x| in
        [0.5, 2]), unit (in [-1, 1]); integers are small, nonzero and pos
        ones never 0."""
        rng = self.rng
        if dtype == "bool":
            return np.asarray(rng.random(shape) < 0.5)
        if dtype in INTS:
            lo, hi = {"pos": (1, 9), "nonzero": (1, 9)}.get(kind, (-8, 9))
            v = rng.integers(lo, hi, size=shape)
            if kind == "nonzero":
                v = v * rng.choice([-1, 1], size=shape)
            return np.asarray(v, dtype=dtype_np(dtype))
        if kind == "pos":
            v = rng.uniform(0.5, 2.0, size=shape)
        elif kind == "nonzero":
            v = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
        elif kind == "unit":
            v = rng.uniform(-1.0, 1.0, size=shape)
        else:
            v = rng.standard_normal(shape)
        return np.asarray(v, dtype=dtype_np(dtype))

    def _add(self, t):
        self.pool.append(t)
        self.uses.setdefault(t.name, 0)
        return t

    def new_input(self, dtype, shape, kind="normal", const_p=0.3, scale=1.0):
        """A fresh operand: a graph input, or with probability const_p an
        initializer (kiln folds those; inputs it cannot)."""
        arr = self.data(dtype, shape, kind)
        if dtype in FLOATS and scale != 1.0:
            arr = (arr * scale).astype(arr.dtype)
        mag = float(np.max(np.abs(arr.astype(np.float64)))) if arr.size and dtype != "bool" else 1.0
        if self.chance(const_p):
            return self.const(arr, "w")
        t = Tensor(self.name("in"), dtype, shape, max(mag, 1e-3), exact=True)
        self.inputs.append((t, arr))
        return self._add(t)

    def const(self, arr, hint="c"):
        """An initializer holding `arr` (not put in the pool)."""
        arr = np.asarray(arr)
        key = {np.dtype(v[0]): k for k, v in DTYPES.items()}[arr.dtype]
        name = self.name(hint)
        self.inits.append(onnx.numpy_helper.from_array(arr, name))
        mag = float(np.max(np.abs(arr.astype(np.float64)))) if arr.size and key != "bool" else 1.0
        t = Tensor(name, key, arr.shape, max(mag, 1e-3), exact=True)
        self.uses.setdefault(name, 0)
        return t

    def ints(self, values, dtype="i64"):
        """An int64 1-D initializer (shapes, axes, pads...)."""
        return self.const(np.asarray(values, dtype=dtype_np(dtype)), "k")

    def pick(self, pred, fresh=None, recent_p=0.6):
        """A pool value satisfying `pred`: the newest with probability
        recent_p (chains), else any (DAGs); if none, `fresh()` (or None)."""
        cands = [t for t in self.pool if pred(t)]
        if not cands:
            return fresh() if fresh else None
        if self.chance(recent_p):
            return cands[-1]
        return self.choice(cands)

    def node(self, op, inputs, outs, cover=None, **attrs):
        """Appends `op`; outs: [(dtype, shape, mag, exact)] -> Tensors.
        `cover` is the attribute-combination key for coverage counting."""
        results = []
        for dtype, shape, mag, exact in outs:
            if dtype in MAG_LIMIT and mag > MAG_LIMIT[dtype]:
                raise Reject("magnitude %g too large for %s" % (mag, dtype))
            if numel(shape) > self.max_elems:
                raise Reject("too many elements")
            results.append(Tensor(self.name(op.lower()[:6]), dtype, shape,
                                  max(mag, 1e-3), exact))
        names = [i.name if isinstance(i, Tensor) else i for i in inputs]
        self.nodes.append(helper.make_node(op, names, [t.name for t in results],
                                           name=self.name("n_" + op), **attrs))
        for n in names:
            if n:
                self.uses[n] = self.uses.get(n, 0) + 1
        self.coverage.append((op, cover or ""))
        for t in results:
            self._add(t)
        return results

    def outputs(self):
        """Graph outputs: every pool value nobody consumes, plus a few
        consumed ones (a fused intermediate that must also be stored)."""
        made = {t.name for t in self.pool} - {t.name for t, _ in self.inputs}
        outs = [t for t in self.pool if t.name in made and self.uses.get(t.name, 0) == 0]
        extra = [t for t in self.pool if t.name in made and t not in outs]
        for t in extra:
            if self.chance(0.1):
                outs.append(t)
        return outs


class Reject(Exception):
    """An op generator cannot use what it drew (too big, overflow...)."""


class Graph:
    """One generated graph: parts for assembling a model plus metadata."""

    def __init__(self, b, outputs):
        self.nodes = b.nodes
        self.inputs = b.inputs
        self.inits = b.inits
        self.outputs = outputs
        self.value_info = [t for t in b.pool if t not in outputs and
                           t.name not in {i.name for i, _ in b.inputs}]
        self.coverage = b.coverage
        self.opset = b.opset


def generate_graph(seed, index, opset, ops=None, max_nodes=40, max_elems=20000,
                   prefix=""):
    """Graph `index` of run `seed`: between 2 and max_nodes nodes of the op
    generators named in `ops` (all when None)."""
    from ops import GENERATORS, choose_generators
    rng = np.random.default_rng([seed, index, 0x6b696c6e])
    b = Builder(rng, prefix, opset, max_elems)
    gens = choose_generators(ops, opset)
    weights = np.array([GENERATORS[g].weight for g in gens], dtype=np.float64)
    target = int(rng.integers(2, max(2, max_nodes) + 1))
    # A first operand: mostly float32, sometimes float16 or an integer.
    dt = b.choice(("f32",) * 6 + ("f16", "f16", "i32", "i64"))
    b.new_input(dt, b.shape(), const_p=0.0)
    attempts = 0
    while len(b.nodes) < target and attempts < target * 20:
        attempts += 1
        g = gens[int(rng.choice(len(gens), p=weights / weights.sum()))]
        saved = (len(b.nodes), len(b.inputs), len(b.inits), len(b.pool),
                 len(b.coverage), dict(b.uses))
        try:
            GENERATORS[g].fn(b)
        except Reject:
            # Undo whatever the generator appended before giving up.
            n, i, k, p, c, uses = saved
            del b.nodes[n:], b.inputs[i:], b.inits[k:], b.pool[p:], b.coverage[c:]
            b.uses = uses
    if not b.nodes:  # every graph needs a node
        t = b.pool[-1]
        b.node("Identity", [t], [(t.dtype, t.shape, t.mag, t.exact)], "")
    # Inputs and initializers nothing reads (drawn, then not used).
    used = {n for node in b.nodes for n in node.input}
    unused = {t.name for t, _ in b.inputs if t.name not in used}
    b.inputs = [(t, a) for t, a in b.inputs if t.name in used]
    b.pool = [t for t in b.pool if t.name not in unused]
    b.inits = [i for i in b.inits if i.name in used]
    return Graph(b, b.outputs())


def _vi(t, symbolic=False):
    elem = DTYPES[t.dtype][1]
    if symbolic:
        return helper.make_tensor_value_info(t.name, elem, ["%s_d%d" % (t.name, i)
                                                            for i in range(t.rank)])
    return helper.make_tensor_value_info(t.name, elem, list(t.shape))


def assemble(graphs, opset, ir_version, name="fuzz"):
    """One model holding every graph of `graphs` side by side; returns
    (model, feeds) where feeds maps input names to their data."""
    nodes, inputs, inits, outputs, vinfo, feeds = [], [], [], [], [], {}
    for g in graphs:
        nodes += g.nodes
        inits += g.inits
        for t, arr in g.inputs:
            inputs.append(_vi(t))
            feeds[t.name] = arr
        outputs += [_vi(t) for t in g.outputs]
        vinfo += [_vi(t) for t in g.value_info]
    graph = helper.make_graph(nodes, name, inputs, outputs, inits, value_info=vinfo)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="kiln-fuzz")
    model.ir_version = ir_version
    return model, feeds


def pick_opset(seed, index):
    """The opset and IR version of graph `index` of run `seed`."""
    rng = np.random.default_rng([seed, index, 0x6f707365])
    opset = int(rng.choice(OPSETS))
    ir = int(rng.integers(MIN_IR[opset], 11))
    return opset, ir


def check(model):
    """Raises when the model is not valid ONNX (strict shape inference)."""
    onnx.checker.check_model(model, full_check=True)

