"""Test cases: a generated graph as a standalone model plus its input sets
and their reference results, static or symbolic; and merging several cases
into one model so that one kilnc run compiles them all.

Symbolic variants turn some or all input dims into dim_params (and drop the
intermediate value_info, which would pin them), then look for other sizes
the graph accepts: candidate sizes are checked by running the reference on
them, and the first that works of each kind is kept. One kind sets dims to
1, which then broadcast against longer dims (kiln once compiled such dims
as if they were never 1); the other grows them. Dims are named either one
name per size (the model then says they are equal) or one per input axis.
"""

import numpy as np
import onnx
from onnx import helper

import generate as G
from oracle import reference

MAX_RUN_ELEMS = 200_000


class Run:
    """One input set and what the reference computes from it."""

    def __init__(self, feeds, label="static"):
        self.feeds = feeds
        self.label = label
        self.expected, self.values, self.engine = None, None, None

    def evaluate(self, model):
        self.expected, self.values, self.engine = reference(model, self.feeds)
        return self


class Case:
    """A model with one or more input sets (several only when symbolic)."""

    def __init__(self, index, variant, model, runs, coverage=()):
        self.index = index          # graph number in the run
        self.variant = variant      # "static", "symbolic-some", ...
        self.model = model
        self.runs = runs
        self.coverage = list(coverage)

    @property
    def name(self):
        return "g%d-%s" % (self.index, self.variant)


def static_case(seed, index, opset, ir, ops, max_nodes, max_elems, prefix):
    g = G.generate_graph(seed, index, opset, ops, max_nodes, max_elems, prefix)
    model, feeds = G.assemble([g], opset, ir, name="fuzz_g%d" % index)
    G.check(model)
    run = Run(feeds).evaluate(model)
    return Case(index, "static", model, [run], g.coverage)


def symbolic_case(static, mode, rng, prefix):
    """The symbolic variant of `static` (whose names start with `prefix`)
    for mode "some" or "all"."""
    model = onnx.ModelProto()
    model.CopyFrom(static.model)
    feeds = static.runs[0].feeds
    shared = rng.random() < 0.5
    sym = []  # (input name, axis, size, dim_param)
    inputs = list(model.graph.input)
    ranked = [i for i in inputs if i.type.tensor_type.shape.dim]
    # "some" draws inputs and dims, but never none at all.
    chosen = [i for i in inputs if mode == "all" or rng.random() < 0.6]
    if ranked and not any(i in ranked for i in chosen):
        chosen.append(ranked[int(rng.integers(len(ranked)))])
    for inp in chosen:
        dims = inp.type.tensor_type.shape.dim
        keep = [mode == "all" or rng.random() < 0.7 for _ in dims]
        if dims and not any(keep):
            keep[int(rng.integers(len(dims)))] = True
        for axis, dim in enumerate(dims):
            if not keep[axis]:
                continue
            size = dim.dim_value
            label = "%sn%d" % (prefix, size) if shared else "%s_d%d" % (inp.name, axis)
            dim.Clear()
            dim.dim_param = label
            sym.append((inp.name, axis, size, label))
    if not sym:
        raise ValueError("no input dims to make symbolic")
    del model.graph.value_info[:]
    for out in model.graph.output:
        rank = len(out.type.tensor_type.shape.dim)
        out.CopyFrom(helper.make_tensor_value_info(out.name, out.type.tensor_type.elem_type,
                                                   [None] * rank))
    G.check(model)
    runs = [Run(feeds, "sizes as generated").evaluate(model)]
    runs += other_sizes(model, feeds, sym, shared, rng)
    variant = "symbolic-%s-%s" % (mode, "shared" if shared else "unique")
    return Case(static.index, variant, model, runs, static.coverage)


def other_sizes(model, feeds, sym, shared, rng, attempts=8):
    """Up to two more input sets the model accepts: one with dims set to 1,
    one with dims grown."""
    groups = {}
    for name, axis, size, label in sym:
        groups.setdefault(label if shared else size, []).append((name, axis, size))
    keys = list(groups)
    rng.shuffle(keys)
    cands = []  # (kind, {(input, axis): new size})

    def change(keys_to, fn):
        return {(n, a): fn(s) for k in keys_to for n, a, s in groups[k]}
    cands.append(("ones", change(keys, lambda s: 1)))
    cands.append(("grown", change(keys, lambda s: s + 1 if s > 1 else s)))
    for k in keys[:3]:
        cands.append(("ones", change([k], lambda s: 1)))
        cands.append(("grown", change([k], lambda s: s * 2 if s > 1 else 3)))
    if not shared:  # one name per axis: dims may also change alone
        for _ in range(2):
            pick = [d for d in sym if rng.random() < 0.5] or [sym[0]]
            cands.append(("ones", {(n, a): 1 for n, a, _, _ in pick}))
    found, tried = {}, 0
    for kind, sizes in cands:
        if kind in found or tried >= attempts:
            continue
        new = _resized(feeds, sizes, rng)
        if new is None:
            continue
        tried += 1
        try:
            run = Run(new, "dims %s" % _sizes_text(sizes, feeds)).evaluate(model)
        except ValueError:
            continue  # the graph does not accept these sizes
        if all(o.size <= MAX_RUN_ELEMS for o in run.expected):
            found[kind] = run
        if len(found) == 2:
            break
    return list(found.values())


def _resized(feeds, sizes, rng):
    """`feeds` with the dims in `sizes` changed (values drawn from the
    original ones, so positive stays positive and indices stay indices);
    None when nothing changes or it gets too big."""
    new, changed = {}, False
    for name, arr in feeds.items():
        shape = list(arr.shape)
        for (n, a), s in sizes.items():
            if n == name:
                shape[a] = s
        if tuple(shape) == arr.shape:
            new[name] = arr
            continue
        if G.numel(shape) > MAX_RUN_ELEMS or arr.size == 0:
            return None
        changed = True
        new[name] = rng.choice(arr.ravel(), size=tuple(shape)).astype(arr.dtype)
    return new if changed else None


def _sizes_text(sizes, feeds):
    return ", ".join("%s[%d]: %d->%d" % (n, a, feeds[n].shape[a], s)
                     for (n, a), s in sorted(sizes.items()) if feeds[n].shape[a] != s)


def merge(cases):
    """One model running every case side by side (their names are
    disjoint), and the input sets for it: set k takes each case's set k, or
    its first when it has fewer."""
    first = cases[0].model
    graph = helper.make_graph([], "fuzz_batch", [], [])
    for c in cases:
        g = c.model.graph
        graph.node.extend(g.node)
        graph.input.extend(g.input)
        graph.output.extend(g.output)
        graph.initializer.extend(g.initializer)
        graph.value_info.extend(g.value_info)
    model = helper.make_model(graph, opset_imports=list(first.opset_import),
                              producer_name="kiln-fuzz")
    model.ir_version = first.ir_version
    nruns = max(len(c.runs) for c in cases)
    runs = []
    for k in range(nruns):
        feeds = {}
        for c in cases:
            feeds.update(c.runs[min(k, len(c.runs) - 1)].feeds)
        runs.append(feeds)
    return model, runs


def load_case(folder):
    """A case saved by the fuzzer (model.onnx, run<k>/input_<i>.npy), with
    its references computed again."""
    import os
    model = onnx.load(os.path.join(folder, "model.onnx"))
    runs, k = [], 0
    while os.path.isdir(os.path.join(folder, "run%d" % k)):
        d = os.path.join(folder, "run%d" % k)
        feeds = {inp.name: np.load(os.path.join(d, "input_%d.npy" % i))
                 for i, inp in enumerate(model.graph.input)}
        runs.append(Run(feeds, "run%d" % k).evaluate(model))
        k += 1
    return Case(-1, "saved", model, runs)
