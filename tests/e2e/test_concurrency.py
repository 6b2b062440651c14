"""Concurrent runs of one loaded artifact (kiln::Module::run from many
threads), checked byte for byte against runs made alone, by
bin/kiln-stress; and the same under ThreadSanitizer (bin/kiln-stress-tsan,
the runtime built with -fsanitize=thread): single-device, multi-device
(pinned to sim devices, with copies between them), data-parallel and
symbolic-batch plans. The kernels are not instrumented; TSan watches the
runtime's state (buffers, plans, device queues, caches).
"""

import json
import os
import subprocess
import unittest

import numpy as np

import kiln_testing as kt

THREADS, RUNS = 8, 40


def mlp(batch):
    """x[batch, 16] -> Gemm -> Relu -> Gemm -> Relu -> Gemm, random weights."""
    from onnx import TensorProto as T, helper as h, numpy_helper as nh
    rng = np.random.default_rng(3)
    nodes, inits = [], []
    prev, width = "x", 16
    for i, out in enumerate((32, 32, 8)):
        w = rng.standard_normal((out, width)).astype(np.float32) * 0.3
        b = rng.standard_normal(out).astype(np.float32) * 0.1
        inits += [nh.from_array(w, "w%d" % i), nh.from_array(b, "b%d" % i)]
        y = "g%d" % i
        nodes.append(h.make_node("Gemm", [prev, "w%d" % i, "b%d" % i], [y],
                                 transB=1, name="/fc%d/Gemm" % i))
        prev, width = y, out
        if i < 2:
            nodes.append(h.make_node("Relu", [y], ["r%d" % i],
                                     name="/act%d/Relu" % i))
            prev = "r%d" % i
    m = kt.onnx_model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [batch, 16])],
                      [h.make_tensor_value_info(prev, T.FLOAT, [batch, 8])], 13)
    m.graph.initializer.extend(inits)
    return m


class Concurrency(kt.KilnTestCase):
    def plans(self):
        """(name, artifact, input .npy) for each kind of plan."""
        pins = self.path("pins.json")
        with open(pins, "w") as f:
            json.dump({"rules": [{"op": "Gemm", "device": "sim:0"},
                                 {"node": "/act1/.*", "device": "sim:1"}]}, f)
        x = self.save_npy(np.random.default_rng(5).standard_normal(
            (8, 16)).astype(np.float32), "x.npy")
        static = self.save_model(mlp(8), "mlp.onnx")
        symbolic = self.save_model(mlp("N"), "mlp_n.onnx")
        out = []
        for name, model, flags in (
                ("single", static, []),
                ("pinned", static, ["--devices=cpu,sim:0,sim:1",
                                    "--pin", pins]),
                ("data", symbolic, ["--devices=sim:0,sim:1",
                                    "--placement=data:2",
                                    "--input-shape=x=8x16"]),
                ("symbolic", symbolic, [])):
            artifact, proc = self.compile(model, name + ".kiln", *flags)
            kt.assert_success(self, proc)
            out.append((name, artifact, x))
        return out

    def stress(self, binary):
        path = kt.tool(binary)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            # kiln-stress-tsan is not built in a build sanitized as a whole
            # (scripts/build --sanitize).
            self.skipTest("%s not built (KILN_BIN=%s)" % (binary, kt.KILN_BIN))
        if kt.SANITIZE:
            # Kernels compiled with --sanitize need an AddressSanitizer
            # process; the stress tools are built without one (TSan and ASan
            # do not mix), and this test is the thread sanitizer's own.
            self.skipTest("KILN_E2E_SANITIZE=%s: %s cannot load kernels compiled "
                          "with --sanitize" % (kt.SANITIZE, binary))
        env = dict(os.environ)
        env["TSAN_OPTIONS"] = "halt_on_error=1 second_deadlock_stack=1"
        env.setdefault("OMP_NUM_THREADS", "2")
        for name, artifact, x in self.plans():
            with self.subTest(plan=name):
                proc = subprocess.run(
                    [path, artifact, x, "--threads", str(THREADS),
                     "--runs", str(RUNS)],
                    capture_output=True, text=True, env=env, timeout=600)
                self.assertEqual(proc.returncode, 0, kt.describe(proc))
                self.assertNotIn("ThreadSanitizer", proc.stderr)
                self.assertIn("0 mismatches, 0 errors", proc.stdout)

    def test_processes_sharing_a_fresh_code_cache(self):
        # Six kilnc processes at once compile the same model into one empty
        # code cache (KILN_CACHE_DIR): each entry is written by one and read
        # by the others, none half-written; every artifact then runs right,
        # and so does one compiled afterwards from the filled cache.
        cache = self.path("cache")
        env = dict(os.environ, KILN_CACHE_DIR=cache)
        model = self.save_model(mlp(8), "mlp_cache.onnx")
        procs = [subprocess.Popen(
            [kt.tool("kilnc"), model, "-o", self.path("c%d.kiln" % i)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            for i in range(6)]
        for p in procs:
            _, err = p.communicate(timeout=600)
            self.assertEqual(p.returncode, 0, err)
        self.assertTrue(os.listdir(os.path.join(cache, "code")))
        x = np.random.default_rng(9).standard_normal((8, 16)).astype(np.float32)
        from onnx.reference import ReferenceEvaluator
        (want,) = ReferenceEvaluator(mlp(8)).run(None, {"x": x})
        for i in range(6):
            (got,), _ = self.run_artifact(self.path("c%d.kiln" % i), [x])
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        proc = subprocess.run([kt.tool("kilnc"), model, "-o",
                               self.path("again.kiln")],
                              capture_output=True, text=True, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        (got,), _ = self.run_artifact(self.path("again.kiln"), [x])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def test_concurrent_runs_match_runs_alone(self):
        self.stress("kiln-stress")

    def test_concurrent_runs_under_thread_sanitizer(self):
        self.stress("kiln-stress-tsan")


if __name__ == "__main__":
    unittest.main()
