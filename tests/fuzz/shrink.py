"""Shrinks a failing case while it keeps failing the same way.

A candidate drops some nodes: values they made that other nodes still read
become graph inputs, fed with exactly the values the reference computed
for them (so the rest of the graph sees the same numbers and a wrong
result stays wrong), graph outputs they made go away, and nodes, inputs and
initializers nothing needs any more go too. The expected outputs and the
values the tolerances look at are the reference's from the original run, so
candidates need no new reference run, only kilnc and kiln-run.

The search is delta debugging over the node list: drop halves, then
quarters, ... then single nodes, repeating while anything can go. Before
that, outputs: a wrong result keeps only the outputs that differ, others
try dropping outputs one by one. It stops at a time budget or a number of
kilnc runs. "The same way" is oracle.signature: the same class, and for
tool failures the same message up to names and numbers.
"""

import re
import time

import numpy as np
import onnx
from onnx import helper

from cases import Case, Run
from oracle import check_case, signature


def np_to_onnx(dtype):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def rebuild(case, nodes, outputs):
    """A case with only `nodes` and the graph outputs named in `outputs`
    (those still made); None when nothing would be left."""
    g = case.model.graph
    made = {o for n in nodes for o in n.output if o}
    # An output whose node is dropped is replaced by what that node read
    # (going further back through dropped nodes), so that the nodes before
    # it still have a purpose.
    producer = {o: n for n in g.node for o in n.output if o}
    old_outputs = {o.name: o for o in g.output}
    names, seen = [], set()
    stack = list(reversed(outputs))
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in made:
            names.append(name)
        elif name in producer:
            stack.extend(reversed([i for i in producer[name].input if i]))
    outputs = [old_outputs[n] if n in old_outputs else _value_info_for(case, n)
               for n in names]
    # Drop nodes nobody needs (repeatedly: their inputs may free others).
    live = list(nodes)
    while True:
        needed = {o.name for o in outputs} | {i for n in live for i in n.input if i}
        kept = [n for n in live if any(o in needed for o in n.output)]
        if len(kept) == len(live):
            break
        live = kept
    if not live or not outputs:
        return None
    made = {o for n in live for o in n.output if o}
    needed = {i for n in live for i in n.input if i}
    inits = [t for t in g.initializer if t.name in needed]
    init_names = {t.name for t in inits}
    old_inputs = {i.name: i for i in g.input}
    inputs = [i for i in g.input if i.name in needed]
    for name in sorted(needed - made - init_names - set(old_inputs)):
        inputs.append(_value_info_for(case, name))
    graph = helper.make_graph(live, g.name, inputs, outputs, inits,
                              value_info=[v for v in g.value_info if v.name in made and
                                          v.name not in set(names)])
    model = helper.make_model(graph, opset_imports=list(case.model.opset_import),
                              producer_name="kiln-fuzz")
    model.ir_version = case.model.ir_version
    runs = []
    for run in case.runs:
        r = Run({i.name: run.values[i.name] for i in inputs}, run.label)
        r.values, r.engine = run.values, run.engine
        r.expected = [run.values[o.name] for o in outputs]
        runs.append(r)
    return Case(case.index, case.variant, model, runs, case.coverage)


def _value_info_for(case, name):
    """The type of value `name`, for a new graph input or output: static
    dims where every run has the same size, symbolic where they differ."""
    arrays = [run.values[name] for run in case.runs]
    dims = []
    for axis, d in enumerate(arrays[0].shape):
        same = all(a.shape[axis] == d for a in arrays)
        dims.append(d if same else "%s_d%d" % (re.sub(r"\W", "_", name), axis))
    return helper.make_tensor_value_info(name, np_to_onnx(arrays[0].dtype), dims)


class Shrinker:
    def __init__(self, case, outcome, workdir, timeout, budget_s=240, max_tests=250,
                 log=None):
        self.case, self.outcome = case, outcome
        self.target = signature(outcome.cls, outcome.message)
        self.workdir, self.timeout = workdir, timeout
        self.deadline = time.time() + budget_s
        self.max_tests = max_tests
        self.tests = 0
        self.log = log or (lambda msg: None)

    def _out_of_budget(self):
        return self.tests >= self.max_tests or time.time() > self.deadline

    def _try(self, nodes, outputs):
        cand = rebuild(self.case, nodes, outputs)
        if cand is None or self._out_of_budget():
            return False
        if len(cand.model.graph.node) >= len(self.case.model.graph.node) and \
                len(cand.model.graph.output) >= len(self.case.model.graph.output):
            return False  # no smaller
        self.tests += 1
        try:
            out = check_case(cand, self.workdir, self.timeout)
        except Exception as e:  # a candidate the tools cannot even be given
            self.log("shrink: candidate skipped: %s" % e)
            return False
        if signature(out.cls, out.message) != self.target:
            return False
        self.case, self.outcome = cand, out
        return True

    def run(self):
        g = self.case.model.graph
        nodes = list(g.node)
        outs = [o.name for o in g.output]
        if self.outcome.cls == "wrong":
            differing = {int(m.group(1)) for d in self.outcome.details
                         for m in [re.match(r"output (\d+) ", d)] if m}
            keep = [outs[i] for i in sorted(differing) if i < len(outs)]
            if keep and len(keep) < len(outs):
                self._try(nodes, keep)
        # One output at a time.
        i = 0
        while len(self.case.model.graph.output) > 1 and not self._out_of_budget():
            outs = [o.name for o in self.case.model.graph.output]
            if i >= len(outs):
                break
            if not self._try(list(self.case.model.graph.node), outs[:i] + outs[i + 1:]):
                i += 1
        while not self._out_of_budget():
            before = len(self.case.model.graph.node)
            self._nodes()
            self._bypass()
            if len(self.case.model.graph.node) == before:
                break
        return self.case, self.outcome

    def _bypass(self):
        """Drops single nodes by reading one of their inputs instead of
        their output (same dtype and shape), which keeps what is before
        and after them connected."""
        i = 0
        while i < len(self.case.model.graph.node) and not self._out_of_budget():
            g = self.case.model.graph
            node = g.node[i]
            made = {o for n in g.node for o in n.output}
            done = False
            for src in node.input:
                if done or not src or src not in made or len(node.output) != 1:
                    continue
                out = node.output[0]
                if not all(r.values[src].shape == r.values[out].shape and
                           r.values[src].dtype == r.values[out].dtype for r in self.case.runs):
                    continue
                nodes = []
                for j, n in enumerate(g.node):
                    if j == i:
                        continue
                    m = onnx.NodeProto()
                    m.CopyFrom(n)
                    m.input[:] = [src if x == out else x for x in n.input]
                    nodes.append(m)
                outs = [src if o.name == out else o.name for o in g.output]
                done = self._try(nodes, list(dict.fromkeys(outs)))
            if not done:
                i += 1

    def _nodes(self):
        chunk = max(1, len(self.case.model.graph.node) // 2)
        while not self._out_of_budget():
            nodes = list(self.case.model.graph.node)
            progress = False
            i = 0
            while i < len(nodes) and not self._out_of_budget():
                outs = [o.name for o in self.case.model.graph.output]
                cand = nodes[:i] + nodes[i + chunk:]
                if cand and self._try(cand, outs):
                    nodes = list(self.case.model.graph.node)
                    progress = True
                else:
                    i += chunk
            if chunk == 1 and not progress:
                break
            chunk = max(1, chunk // 2)


def shrink(case, outcome, workdir, timeout, **kw):
    """(smaller case, its outcome, number of kilnc runs it took)."""
    s = Shrinker(case, outcome, workdir, timeout, **kw)
    case, outcome = s.run()
    return case, outcome, s.tests


def write_case(case, outcome, folder, command_hint="", original=None):
    """Saves `case` as a self-contained reproducer folder."""
    import os
    import shutil
    shutil.rmtree(folder, ignore_errors=True)  # a reproducer from an earlier run
    os.makedirs(folder)
    onnx.save(case.model, os.path.join(folder, "model.onnx"))
    if original is not None:
        onnx.save(original.model, os.path.join(folder, "original.onnx"))
    lines = []
    for k, run in enumerate(case.runs):
        d = os.path.join(folder, "run%d" % k)
        os.makedirs(d, exist_ok=True)
        paths = []
        for i, inp in enumerate(case.model.graph.input):
            np.save(os.path.join(d, "input_%d.npy" % i), run.feeds[inp.name])
            paths.append("run%d/input_%d.npy" % (k, i))
        for i, e in enumerate(run.expected):
            np.save(os.path.join(d, "expected_%d.npy" % i), e)
        lines.append("  $KILN_BIN/kiln-run model.kiln %s --output-dir run%d/kiln   # %s"
                     % (" ".join(paths), k, run.label))
    ops = sorted({n.op_type for n in case.model.graph.node})
    text = """kiln fuzz failure: {cls}
{message}

graph {index} ({variant}); {nodes} nodes: {ops}; reference: {engine}
{hint}
Reproduce (from this folder; KILN_BIN is the build's bin/ folder; the
comments say how the generated graph's inputs were resized for each run):
  $KILN_BIN/kilnc -O1 model.onnx -o model.kiln
{runs}
and compare run<k>/kiln/output_<i>.npy with run<k>/expected_<i>.npy (float32
within about 1e-4 relative, integers and booleans exactly). Or let the fuzzer
check the folder again:
  scripts/fuzz --replay {folder}

Details:
{details}
""".format(cls=outcome.cls, message=outcome.message, index=case.index, variant=case.variant,
           nodes=len(case.model.graph.node), ops=" ".join(ops),
           engine=case.runs[0].engine, hint=command_hint, runs="\n".join(lines),
           folder=folder, details="\n".join("  " + d for d in outcome.details) or "  (none)")
    with open(os.path.join(folder, "README.txt"), "w") as f:
        f.write(text)
