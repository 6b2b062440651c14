"""The oracle: a reference (onnxruntime, else onnx's ReferenceEvaluator)
against kilnc + kiln-run, and the comparison of their outputs.

Classes of outcome, from worst:
    crash          kilnc or kiln-run died of a signal, or printed a crash
                   marker (a stack dump, an assertion, a sanitizer report)
    wrong          kiln's outputs differ from the reference's (dtype, shape,
                   values beyond the tolerance, NaN positions)
    timeout        kilnc or kiln-run ran past the time limit
    run-error      kiln-run exited non-zero with a message
    compile-error  kilnc exited non-zero with a message
    disputed       kiln differs from onnxruntime, and onnxruntime differs
                   from onnx's ReferenceEvaluator (the spec's executable
                   reference) on the same output: either kiln agrees with
                   the ReferenceEvaluator (onnxruntime departs from the spec
                   there, e.g. a pooling window longer than its input), or
                   the two references disagree with each other and nothing
                   independent says which answer is right (ill-conditioned
                   float16 maths)
    pass
Crash and wrong are failures; the others are reported and counted.
"""

import os
import re
import shutil
import subprocess
import tempfile
import time
import warnings

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

CRASH_MARKERS = ("Segmentation", "Stack dump", "Aborted", "terminate called",
                 "Assertion", "AddressSanitizer", "UndefinedBehaviorSanitizer",
                 # UBSan's report without recovery: "file:line:col: runtime
                 # error: division by zero", then exit 1
                 ": runtime error: ",
                 "core dumped", "PLEASE submit a bug report")
ORDER = ("crash", "wrong", "timeout", "run-error", "compile-error", "disputed", "pass")
FAILURES = ("crash", "wrong")
EPS = {np.dtype(np.float32): 2.0 ** -23, np.dtype(np.float16): 2.0 ** -10,
       np.dtype(np.float64): 2.0 ** -52}


class Skip(Exception):
    """No reference can run this model (the reason is counted)."""


def worst(classes):
    return min(classes, key=ORDER.index) if classes else "pass"


# -- the reference -----------------------------------------------------------


def _inferred_types(model):
    """Element type of every value onnx's shape inference types in `model`
    (an empty map where inference fails)."""
    try:
        inferred = shape_inference.infer_shapes(model).graph
    except Exception:
        return {}
    return {v.name: v.type.tensor_type.elem_type
            for v in list(inferred.value_info) + list(inferred.output)}


def _with_all_outputs(model):
    """A copy of `model` whose every node output is also a graph output, so
    that one run yields every intermediate value (for tolerances and for
    the shrinker, which turns values into inputs)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    types = _inferred_types(m)
    have = {o.name for o in m.graph.output}
    for node in m.graph.node:
        for name in node.output:
            if name and name not in have and types.get(name):
                m.graph.output.append(helper.make_tensor_value_info(name, types[name], None))
                have.add(name)
    return m


def _session(model):
    import onnxruntime as ort
    # Candidate sizes the graph rejects are expected: no error logs.
    ort.set_default_logger_severity(4)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 4
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def _first(e):
    return (str(e).splitlines() or [type(e).__name__])[0][:200]


def reference(model, feeds):
    """Runs `model` on `feeds`; returns (outputs, values, engine): the graph
    outputs in order, every value by name (inputs, initializers,
    intermediates) and which engine ran. Raises Skip when no engine can run
    the model, and ValueError when the inputs do not fit it (onnxruntime
    rejects them at run time)."""
    full = _with_all_outputs(model)
    names = [o.name for o in full.graph.output]
    values = {k: np.asarray(v) for k, v in feeds.items()}
    for init in model.graph.initializer:
        values[init.name] = numpy_helper.to_array(init)
    try:
        sess = _session(full)
    except Exception:
        # onnxruntime lacks a kernel: node by node, each on onnxruntime
        # where it can, else on onnx's reference (which has bugs of its
        # own, so it runs as little as possible).
        engine = _node_by_node(model, values)
    else:
        try:
            got = sess.run(None, feeds)
        except Exception as e:
            raise ValueError("onnxruntime: " + _first(e))
        values.update((name, np.asarray(v)) for name, v in zip(names, got))
        engine = "onnxruntime"
    return [values[o.name] for o in model.graph.output], values, engine


def _node_by_node(model, values):
    """Runs each node of `model` alone, adding its outputs to `values`;
    returns a description of the engines used."""
    from onnx.reference import ReferenceEvaluator
    types = _inferred_types(model)
    fallback = set()
    for node in model.graph.node:
        ins = [i for i in node.input if i]
        inputs = [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(
            values[i].dtype), values[i].shape) for i in dict.fromkeys(ins)]
        outputs = [helper.make_tensor_value_info(o, types.get(o, 0), None)
                   for o in node.output if o]
        single = helper.make_model(helper.make_graph([node], "node", inputs, outputs),
                                   opset_imports=list(model.opset_import))
        single.ir_version = model.ir_version
        feeds = {i: values[i] for i in dict.fromkeys(ins)}
        try:
            sess = _session(single)
        except Exception as e:
            if "NOT_IMPLEMENTED" not in str(e):  # e.g. shapes that do not fit
                raise ValueError("onnxruntime: " + _first(e))
            try:
                with np.errstate(all="ignore"):
                    got = ReferenceEvaluator(single).run(None, feeds)
            except Exception as e2:
                raise Skip("no reference for %s: onnxruntime: %s; onnx reference: %s"
                           % (node.op_type, _first(e)[:100], _first(e2)[:100]))
            fallback.add(node.op_type)
        else:
            try:
                got = sess.run(None, feeds)
            except Exception as e:
                raise ValueError("onnxruntime: " + _first(e))
        for o, v in zip([o for o in node.output if o], got):
            values[o] = np.asarray(v)
    return "onnxruntime node by node" + (
        ", onnx reference for " + " ".join(sorted(fallback)) if fallback else "")


def upcast(model, feeds):
    """`model` and `feeds` with every float32/float16 value in float64
    (casts to them too): the same maths with little rounding, to tell
    results that are ill-conditioned (where the reference itself is far from
    exact) from wrong ones."""
    from onnx import TensorProto
    narrow = (TensorProto.FLOAT, TensorProto.FLOAT16)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type in narrow:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for i, init in enumerate(g.initializer):
        if init.data_type in narrow:
            arr = numpy_helper.to_array(init).astype(np.float64)
            g.initializer[i].CopyFrom(numpy_helper.from_array(arr, init.name))
    for node in g.node:
        for a in node.attribute:
            if node.op_type == "Cast" and a.name == "to" and a.i in narrow:
                a.i = TensorProto.DOUBLE
    wide = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in feeds.items()}
    return m, wide


def spec_reference(model, feeds):
    """The outputs of `model` on onnx's ReferenceEvaluator, or None when it
    cannot run the model (it lacks some kernels, and rejects some inputs
    onnxruntime takes)."""
    from onnx.reference import ReferenceEvaluator
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]
    except Exception:
        return None


def spec_reference_of(model, feeds, index):
    """Graph output `index` on onnx's ReferenceEvaluator, from the nodes it
    depends on only (a node elsewhere that it rejects does not matter), or
    None."""
    names, _ = ancestry(model, [model.graph.output[index].name])[
        model.graph.output[index].name]
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    keep = [n for n in g.node if any(o in names for o in n.output)]
    del g.node[:]
    g.node.extend(keep)
    inputs = [i for i in g.input if i.name in names]
    del g.input[:]
    g.input.extend(inputs)
    out = g.output[index]
    del g.output[:]
    g.output.extend([out])
    got = spec_reference(m, {k: v for k, v in feeds.items() if k in names})
    return got[0] if got else None


def reference64(model, feeds):
    """The outputs of `model` computed in float64, or None if no engine
    runs that."""
    try:
        m, wide = upcast(model, feeds)
        with np.errstate(all="ignore"):
            return reference(m, wide)[0]
    except Exception:
        return None


# -- kiln ----------------------------------------------------------------------


# With KILN_FUZZ_SANITIZE=address,undefined (scripts/fuzz --sanitize) the
# kernels are compiled with those sanitizers and run by kiln-run-asan, so a
# read past a tensor is a crash with AddressSanitizer's report.
SANITIZE = os.environ.get("KILN_FUZZ_SANITIZE", "")


def tools():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    bindir = os.environ.get("KILN_BIN") or os.path.join(root, "build", "bin")
    run = "kiln-run-asan" if SANITIZE else "kiln-run"
    return os.path.join(bindir, "kilnc"), os.path.join(bindir, run)


def _run(argv, timeout):
    """(returncode or 'timeout', combined output)."""
    env = None
    if SANITIZE:  # leaks at exit are not what a fuzz run looks for
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0",
                   UBSAN_OPTIONS="print_stacktrace=1")
    try:
        p = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"") + (e.stderr or b"")
        return "timeout", out.decode(errors="replace") if isinstance(out, bytes) else out
    return p.returncode, (p.stdout or "") + (p.stderr or "")


def first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _tool_failure(rc, text, stage):
    """The (class, message, last lines of output) of a tool run that did
    not succeed, or None."""
    markers = [m for m in CRASH_MARKERS if m in text]
    tail = text.strip().splitlines()[-25:]
    if rc == "timeout":
        return "timeout", "%s timed out" % stage, tail
    if (isinstance(rc, int) and rc < 0) or markers:
        what = ("signal %d" % -rc) if isinstance(rc, int) and rc < 0 else "exit %s" % rc
        line = next((l for l in text.splitlines() if any(m in l for m in markers)), "")
        return "crash", "%s %s%s" % (stage, what, (": " + line.strip()[:200]) if line else ""), tail
    if rc != 0:
        # Without the temporary folder's name, so that messages group.
        line = re.sub(r"\S*/(model\.onnx|model\.kiln)", r"\1", first_line(text))
        return ("compile-error" if stage == "kilnc" else "run-error"), line, tail
    return None


class Kiln:
    """Compiles a model once (kilnc -O1) and runs it on input sets."""

    def __init__(self, workdir, timeout=120, kilnc_args=("-O1",)):
        self.workdir = workdir
        self.timeout = timeout
        self.kilnc_args = list(kilnc_args)
        if SANITIZE:
            self.kilnc_args.append("--sanitize=" + SANITIZE)
        self.kilnc, self.kiln_run = tools()
        self.seconds = 0.0

    def compile(self, model):
        """Returns None, or (class, message) when kilnc fails."""
        path = os.path.join(self.workdir, "model.onnx")
        onnx.save(model, path)
        self.artifact = os.path.join(self.workdir, "model.kiln")
        t = time.time()
        rc, text = _run([self.kilnc, *self.kilnc_args, path, "-o", self.artifact], self.timeout)
        self.seconds += time.time() - t
        self.compile_output = text
        return _tool_failure(rc, text, "kilnc")

    def run(self, model, feeds, tag="run"):
        """Returns (outputs, None) or (None, (class, message))."""
        d = tempfile.mkdtemp(prefix=tag, dir=self.workdir)
        paths = []
        for i, inp in enumerate(model.graph.input):
            p = os.path.join(d, "input_%d.npy" % i)
            np.save(p, feeds[inp.name])
            paths.append(p)
        out = os.path.join(d, "out")
        t = time.time()
        rc, text = _run([self.kiln_run, self.artifact, *paths, "--output-dir", out],
                        self.timeout)
        self.seconds += time.time() - t
        bad = _tool_failure(rc, text, "kiln-run")
        if bad:
            return None, bad
        outs = []
        for i in range(len(model.graph.output)):
            p = os.path.join(out, "output_%d.npy" % i)
            if not os.path.exists(p):
                return None, ("wrong", "output %d was not written" % i, [])
            outs.append(np.load(p))
        return outs, None


# -- comparison ----------------------------------------------------------------


def ancestry(model, names=None):
    """For each graph output (or each of `names`): (names of every value it
    depends on, number of nodes it depends on)."""
    producer = {o: n for n in model.graph.node for o in n.output}
    result = {}
    for start in names or [o.name for o in model.graph.output]:
        seen, nodes, stack = set(), set(), [start]
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            node = producer.get(name)
            if node is not None and id(node) not in nodes:
                nodes.add(id(node))
                stack.extend(i for i in node.input if i)
        result[start] = (seen, len(nodes))
    return result


def _float_tolerance(model, name, values, dtype):
    """(atol, rtol) for the float value `name` (see tolerance)."""
    names, depth = ancestry(model, [name])[name]
    coarsest = max((values[n].dtype for n in names if n in values and
                    values[n].dtype.kind == "f"), key=lambda d: EPS.get(d, 0), default=dtype)
    return tolerance(coarsest, depth, _scale(names, values))


COMPARISONS = ("Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal")


def _edges(model, name, got, values):
    """Where an integer or boolean output `name` rests on float values that
    are equal within float tolerance: kiln's answer there is not held
    against it. An ArgMin/ArgMax index picking a value tied with the
    reference's extreme; a comparison of two operands within tolerance of
    each other; a Cast to bool of a value within tolerance of 0; anything
    such a comparison reaches (see _flipped). None when nothing is on an
    edge."""
    node = next((n for n in model.graph.node if name in n.output), None)
    if node is None:
        return None
    if node.op_type in ("ArgMin", "ArgMax"):
        return _arg_ties(model, node, got, values)
    near = _near(model, node, values)
    if near is not None:
        return np.broadcast_to(near, got.shape) if near.ndim <= got.ndim else None
    return _flipped(model, name, got, values)


def _near(model, node, values):
    """For a comparison or a Cast to bool of float operands: where the
    operands are within float tolerance of each other (of 0 for the Cast),
    as a boolean array of the operands' broadcast shape; else None."""
    to = {a.name: helper.get_attribute_value(a) for a in node.attribute}.get("to")
    if not (node.op_type in COMPARISONS or (node.op_type == "Cast" and to == onnx.TensorProto.BOOL)):
        return None
    ins = [i for i in node.input if i]
    if not all(i in values and values[i].dtype.kind == "f" for i in ins):
        return None
    a = values[ins[0]].astype(np.float64)
    b = values[ins[1]].astype(np.float64) if len(ins) > 1 else np.zeros(())
    atol = rtol = 0.0
    for i in ins:
        t = _float_tolerance(model, i, values, values[i].dtype)
        atol, rtol = max(atol, t[0]), max(rtol, t[1])
    with np.errstate(all="ignore"):
        return np.abs(a - b) <= atol + rtol * np.maximum(np.abs(a), np.abs(b))


FLIPS = 8


def _flipped(model, name, got, values):
    """Where the value `name` changes when comparisons upstream of it that
    are on the edge (see _near) come out the other way: the graph from
    those comparisons' results to `name` is run again (on onnxruntime, with
    the reference's values everywhere else) with every edge result flipped
    and with random subsets of them flipped. So an edge is followed through
    Or, Not, Where, Transpose, Gather and whatever else lies between. None
    when no comparison upstream is on an edge."""
    names, _ = ancestry(model, [name])[name]
    edges = {}
    for node in model.graph.node:
        out = node.output[0] if node.output else ""
        if out in names and out != name and out in values:
            near = _near(model, node, values)
            if near is not None and near.any() and near.shape == values[out].shape:
                edges[out] = near
    if not edges:
        return None
    cut = onnx.ModelProto()
    cut.CopyFrom(model)
    keep = [n for n in cut.graph.node if not (n.output and n.output[0] in edges)]
    del cut.graph.node[:]
    cut.graph.node.extend(keep)
    for out in edges:
        cut.graph.input.append(helper.make_tensor_value_info(out, onnx.TensorProto.BOOL, None))
    del cut.graph.output[:]
    dtype = helper.np_dtype_to_tensor_dtype(got.dtype)
    cut.graph.output.append(helper.make_tensor_value_info(name, dtype, None))
    feeds = {i.name: values[i.name] for i in cut.graph.input if i.name in values}
    try:
        sess = _session(cut)
        base = sess.run(None, feeds)[0]
    except Exception:
        return None
    rng = np.random.default_rng(0)
    taint = np.zeros(base.shape, bool)
    for k in range(FLIPS):
        flipped = dict(feeds)
        for out, near in edges.items():
            pick = near if k == 0 else near & (rng.random(near.shape) < 0.5)
            flipped[out] = feeds[out] ^ pick
        try:
            alt = sess.run(None, flipped)[0]
        except Exception:
            continue
        if alt.shape == base.shape:
            with np.errstate(all="ignore"):
                taint |= ~((alt == base) | (np.isnan(alt) & np.isnan(base)))
    return taint if taint.shape == got.shape else None


def _arg_ties(model, node, got, values):
    """For an ArgMin/ArgMax `node`: where kiln's index picks a value within
    float tolerance of the reference's extreme (a tie, or a near one, that
    rounding may break either way), as a boolean array."""
    if node.input[0] not in values:
        return None
    x = values[node.input[0]]
    if x.dtype.kind != "f" or x.ndim == 0:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    axis = attrs.get("axis", 0) % x.ndim
    idx = got.astype(np.int64)
    if not attrs.get("keepdims", 1):
        idx = np.expand_dims(idx, axis)
    if idx.min(initial=0) < 0 or idx.max(initial=0) >= x.shape[axis]:
        return None
    x64 = x.astype(np.float64)
    picked = np.take_along_axis(x64, idx, axis)
    best = (x64.min if node.op_type == "ArgMin" else x64.max)(axis=axis, keepdims=True)
    atol, rtol = _float_tolerance(model, node.input[0], values, x.dtype)
    with np.errstate(all="ignore"):
        tie = np.abs(picked - best) <= atol + rtol * np.abs(best)
    if not attrs.get("keepdims", 1):
        tie = np.squeeze(tie, axis)
    return tie


def tolerance(dtype, depth, scale):
    """(atol, rtol) for a float output `depth` nodes deep whose inputs and
    intermediates reach magnitude `scale`: a few units of the dtype's
    rounding per op (rtol ~1e-4 for float32), and an absolute part relative
    to the largest value on the way (cancellation, long sums)."""
    eps = EPS.get(np.dtype(dtype), 2.0 ** -23)
    if np.dtype(dtype) == np.float16:
        rtol = eps * (2 + depth)
    else:
        rtol = min(1e-3, 1e-4 * (1 + depth / 16) * (eps / 2.0 ** -23))
    return rtol * max(scale, 1e-6), rtol


def _scale(names, values):
    best = 0.0
    for name in names:
        v = values.get(name)
        if v is None or v.dtype.kind != "f" or v.size == 0:
            continue
        finite = np.abs(v[np.isfinite(v)].astype(np.float64))
        if finite.size:
            best = max(best, float(finite.max()))
    return best


def compare(model, got, expected, values, exact=None):
    """Mismatches as (output index, description), one per differing output
    (empty: match).
    `exact`: the outputs computed in float64 (reference64); where given,
    an element also passes when kiln is within a few times the reference's
    own distance from it, and integer or boolean elements the float64 run
    disagrees on (a comparison or cast on the edge) are not checked."""
    problems = []
    anc = ancestry(model)
    for i, (out, a, e) in enumerate(zip(model.graph.output, got, expected)):
        where = "output %d '%s'" % (i, out.name)
        if a.dtype != e.dtype:
            problems.append((i, "%s: dtype %s, expected %s" % (where, a.dtype, e.dtype)))
            continue
        if a.shape != e.shape:
            problems.append((i, "%s: shape %s, expected %s" % (where, a.shape, e.shape)))
            continue
        x = exact[i] if exact is not None and exact[i].shape == e.shape else None
        if e.dtype.kind != "f":
            bad = a != e
            if x is not None and e.dtype.kind in "iub":
                bad &= x.astype(e.dtype) == e
            edges = _edges(model, out.name, a, values) if bad.any() else None
            if edges is not None and edges.shape == bad.shape:
                bad &= ~edges
            if bad.any():
                problems.append((i, "%s: %s" % (where, _describe(a, e, bad))))
            continue
        names, depth = anc[out.name]
        coarsest = max((values[n].dtype for n in names if n in values and
                        values[n].dtype.kind == "f"), key=lambda d: EPS.get(d, 0), default=e.dtype)
        atol, rtol = tolerance(coarsest, depth, _scale(names, values))
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        nan_a, nan_e = np.isnan(a64), np.isnan(e64)
        edge = np.zeros(e.shape, bool)
        slack = 0.0
        if x is not None:
            x = x.astype(np.float64)
            edge = np.isnan(x) != nan_e
            with np.errstate(all="ignore"):
                slack = np.where(np.isfinite(x), 4 * np.abs(e64 - x), 0.0)
        if ((nan_a != nan_e) & ~edge).any():
            problems.append((i, "%s: NaN positions differ: %s" % (
                where, _describe(a, e, (nan_a != nan_e) & ~edge))))
            continue
        with np.errstate(all="ignore"):
            diff = np.abs(a64 - e64)
            # An infinity matches only itself (a relative tolerance of an
            # expected inf would take any value).
            infinite = (np.isinf(a64) | np.isinf(e64)) & (a64 != e64)
            bad = ~nan_e & ~edge & (infinite | ~((a64 == e64) | (
                diff <= atol + rtol * np.abs(e64) + slack)))
        if bad.any():
            # A Where or a Cast of a comparison on the edge decides these.
            flips = _flipped(model, out.name, a, values)
            if flips is not None:
                bad &= ~flips
        if bad.any():
            problems.append((i, "%s: %s (atol %.3g, rtol %.3g%s)" % (
                where, _describe(a, e, bad), atol, rtol, ", float64-checked" if x is not None else "")))
    return problems


def _describe(a, e, bad):
    """How many values differ, and the worst one (the first for NaNs)."""
    idx = np.argwhere(bad)[0] if a.ndim else ()
    if a.dtype.kind == "f":
        with np.errstate(all="ignore"):
            diff = np.array(np.abs(a.astype(np.float64) - e.astype(np.float64)))
        diff[~bad | np.isnan(diff)] = -1
        if diff.max() >= 0 and a.ndim:
            idx = np.unravel_index(int(np.argmax(diff)), a.shape)
    idx = tuple(int(i) for i in idx)
    return "%d of %d values differ, e.g. at %s: got %s, expected %s" % (
        int(bad.sum()), bad.size, list(idx), a[idx], e[idx])


def signature(cls, message):
    """What must stay the same while shrinking: the class and, for tool
    failures, their message with names and numbers taken out."""
    if cls in ("wrong", "timeout", "pass"):
        return cls
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'_'", message)
    text = re.sub(r"\b\d+\b", "N", text)
    text = re.sub(r"\S*\.onnx", "M", text)
    return cls + ": " + text[:160]


# -- checking cases ------------------------------------------------------------


class Outcome:
    """The class of one case and why."""

    def __init__(self, cls, message="", details=(), run=None):
        self.cls, self.message, self.details, self.run = cls, message, list(details), run

    def __repr__(self):
        return "%s: %s" % (self.cls, self.message)


def _worst(outcomes):
    return min(outcomes, key=lambda o: ORDER.index(o.cls)) if outcomes else Outcome("pass")


def _compare_run(case, k, outs):
    run = case.runs[k]
    problems = compare(case.model, outs, run.expected, run.values)
    exact = None
    if problems:
        # Before calling it wrong: is the reference itself far from exact
        # there (ill-conditioned maths, a comparison on the edge)?
        exact = reference64(case.model, run.feeds)
        if exact is not None:
            problems = compare(case.model, outs, run.expected, run.values, exact)
    label = " [%s]" % run.label if len(case.runs) > 1 else ""
    if not problems:
        return Outcome("pass", run=k)
    others = [r.feeds for j, r in enumerate(case.runs) if j != k]
    wrong, disputed = _second_opinion(case.model, run, outs, problems, exact, others)
    if wrong:
        return Outcome("wrong", wrong[0] + label, wrong, k)
    return Outcome("disputed", disputed[0] + label, disputed, k)


def _second_opinion(model, run, outs, problems, exact, others=()):
    """Splits `problems` (kiln against onnxruntime) into (wrong, disputed)
    by onnx's ReferenceEvaluator: an output stays wrong unless onnxruntime
    itself differs from the ReferenceEvaluator there, or the
    ReferenceEvaluator rejects this run's sizes while it computes the same
    output for another run of the graph (`others`: their feeds), i.e. the
    spec gives these sizes no answer (a pooling window that ends before
    the input starts: a negative output size) and onnxruntime's is its own.
    Comparisons between the references use the same tolerances as
    kiln's."""
    if run.engine != "onnxruntime":
        return [p for _, p in problems], []
    spec = spec_reference(model, run.feeds)
    rejected = []
    if spec is None or len(spec) != len(outs):
        # Only the outputs in question, each from its own nodes; the others
        # compare equal to themselves.
        spec = list(run.expected)
        for i, _ in problems:
            alone = spec_reference_of(model, run.feeds, i)
            if alone is None:
                if not any(spec_reference_of(model, f, i) is not None for f in others):
                    return [p for _, p in problems], []
                rejected.append(i)
                continue
            spec[i] = alone
    refs_apart = dict(compare(model, run.expected, spec, run.values))
    kiln_apart = dict(compare(model, outs, spec, run.values, exact))
    wrong, disputed = [], []
    for i, text in problems:
        if i in rejected:
            disputed.append("onnx's reference evaluator rejects these sizes (it runs the "
                            "output at the others), onnxruntime does not: " + text)
        elif i not in refs_apart:
            wrong.append(text)
        elif i not in kiln_apart:
            disputed.append("kiln agrees with onnx's reference evaluator, onnxruntime "
                            "does not: " + text)
        else:
            disputed.append("onnxruntime and onnx's reference evaluator disagree (%s); "
                            "kiln matches neither: %s" % (refs_apart[i], text))
    return wrong, disputed


def check_case(case, workdir, timeout):
    """Compiles `case` and runs it on each of its input sets."""
    tmp = tempfile.mkdtemp(prefix="case", dir=workdir)
    try:
        return _check_case(case, Kiln(tmp, timeout))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check_case(case, kiln):
    bad = kiln.compile(case.model)
    if bad:
        return Outcome(*bad)
    outcomes = []
    for k, run in enumerate(case.runs):
        outs, bad = kiln.run(case.model, run.feeds, "run%d_" % k)
        if bad:
            label = " [%s]" % run.label if len(case.runs) > 1 else ""
            outcomes.append(Outcome(bad[0], bad[1] + label, bad[2], run=k))
        else:
            outcomes.append(_compare_run(case, k, outs))
    return _worst(outcomes)


def check_batch(cases, workdir, timeout):
    """Outcomes of several cases compiled as one model; when kilnc or
    kiln-run fails on the whole, each case is checked alone to find whose
    failure it is."""
    from cases import merge
    if len(cases) == 1:
        return [check_case(cases[0], workdir, timeout)]
    model, feed_sets = merge(cases)
    tmp = tempfile.mkdtemp(prefix="batch", dir=workdir)
    try:
        results = _check_merged(cases, model, feed_sets, Kiln(tmp, timeout))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if results is not None:
        return results
    return [check_case(c, workdir, timeout) for c in cases]


def _check_merged(cases, model, feed_sets, kiln):
    """Per-case outcomes, or None when the merged model as a whole fails."""
    results = [[] for _ in cases]
    if kiln.compile(model) is None:
        for k, feeds in enumerate(feed_sets):
            outs, bad = kiln.run(model, feeds, "run%d_" % k)
            if bad:
                break
            pos = 0
            for i, c in enumerate(cases):
                n = len(c.model.graph.output)
                if k < len(c.runs):
                    results[i].append(_compare_run(c, k, outs[pos:pos + n]))
                pos += n
        else:
            return [_worst(r) for r in results]
    return None
