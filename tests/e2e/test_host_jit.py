"""examples/host-jit built against the installed kiln package: `cmake
--install` of this build into a temporary prefix, the example configured with
find_package(kiln) and built, then run twice as two processes sharing one
cache folder. The first compiles, the second must report a cache hit and
compile at least 10x faster; both must match numpy within 1e-5 relative L2.
The weights are written here with "module."-prefixed keys, as a
torch.nn.DataParallel checkpoint has them.
"""

import os
import re
import shutil
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln_testing as kt  # noqa: E402

IN, HIDDEN, OUT = 784, 128, 10


class HostJitTest(kt.KilnTestCase):

    def setUp(self):
        self.build = os.path.dirname(os.path.abspath(kt.KILN_BIN))
        if not os.path.isfile(os.path.join(self.build, "cmake_install.cmake")):
            self.skipTest("KILN_BIN is not inside a CMake build folder")
        for tool in ("cmake", "ninja"):
            if not shutil.which(tool):
                self.skipTest("%s is not on PATH" % tool)

    def step(self, argv, **kwargs):
        proc = subprocess.run(argv, capture_output=True, text=True,
                              timeout=kt.TIMEOUT, **kwargs)
        self.assertEqual(proc.returncode, 0, "%s failed:\n%s\n%s" % (
            " ".join(argv), proc.stdout[-3000:], proc.stderr[-3000:]))
        return proc

    def test_installed_package_example(self):
        prefix = self.path("prefix")
        self.step(["cmake", "--install", self.build, "--prefix", prefix])
        for header in ("kiln.h", "runtime.h", "safetensors.h"):
            self.assertTrue(os.path.isfile(
                os.path.join(prefix, "include", "kiln", header)), header)

        example = os.path.join(kt.KILN_SOURCE, "examples", "host-jit")
        build = self.path("example-build")
        self.step(["cmake", "-S", example, "-B", build, "-G", "Ninja",
                   "-DCMAKE_PREFIX_PATH=" + prefix])
        self.step(["cmake", "--build", build])

        rng = np.random.default_rng(0)
        weights = {
            "fc1.weight": rng.standard_normal((HIDDEN, IN)) / np.sqrt(IN),
            "fc1.bias": rng.standard_normal(HIDDEN) * 0.1,
            "fc2.weight": rng.standard_normal((OUT, HIDDEN)) / np.sqrt(HIDDEN),
            "fc2.bias": rng.standard_normal(OUT) * 0.1,
        }
        weights = {k: v.astype(np.float32) for k, v in weights.items()}
        checkpoint = kt.save_safetensors(
            self.path("mlp.safetensors"),
            {"module." + k: v for k, v in weights.items()})

        env = dict(os.environ, KILN_CACHE_DIR=self.path("cache"))
        times = []
        for run, expected in enumerate(("cache miss", "cache hit")):
            out = self.path("out%d" % run)
            os.makedirs(out)
            proc = self.step([os.path.join(build, "host-jit"), checkpoint, out],
                             env=env)
            kt.note("host-jit run %d:\n%s" % (run, proc.stdout.strip()))
            match = re.search(r"compile: ([0-9.]+) s \((cache \w+)\)",
                              proc.stdout)
            self.assertIsNotNone(match, proc.stdout)
            self.assertEqual(match.group(2), expected)
            times.append(float(match.group(1)))
            for n in (3, 8):
                x = np.load(os.path.join(out, "x_%d.npy" % n))
                y = np.load(os.path.join(out, "y_%d.npy" % n))
                self.assertEqual(x.shape, (n, IN))
                ref = np.maximum(x.astype(np.float64) @ weights["fc1.weight"].T
                                 + weights["fc1.bias"], 0)
                ref = ref @ weights["fc2.weight"].T + weights["fc2.bias"]
                err = kt.rel_l2(y, ref)
                self.assertLess(err, 1e-5, "batch %d: rel L2 %.3g" % (n, err))
        kt.note("compile: first process %.4f s, second %.4f s (%.0fx)"
                % (times[0], times[1], times[0] / max(times[1], 1e-9)))
        self.assertGreaterEqual(times[0], 10 * times[1])


if __name__ == "__main__":
    unittest.main()
