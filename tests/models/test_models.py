"""Real models: torchvision resnet18 and mobilenet_v2 (random init, fixed
seed, BatchNorm statistics calibrated on random data) and a BERT-style
encoder, each checked to be a fair reference (its output depends on its
input), exported from PyTorch with both exporters and a symbolic batch,
compiled once with kilnc (the batch stays symbolic), run at batch 1 and 3
from that one artifact and compared with PyTorch eager: relative L2 <= 1e-5.
The
multi-device and CUDA checks bind the batch (--input-shape). Each model also
compiles for x86-64-v3 and x86-64-v4 on any x86 machine, and runs at the
levels this CPU has.

    KILN_BIN=build/bin $VENV/bin/python -m unittest discover -v \
        -s tests/models -p "test_*.py"
"""
import os
import re
import sys
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
sys.path.insert(0, HERE)

import kiln_testing as kt  # noqa: E402

TOLERANCE = 1e-5


class ModelTest(kt.KilnTestCase):
    model = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if cls.model is None:
            raise unittest.SkipTest("base class")
        try:
            import torch  # noqa: F401
            import export_models
        except ImportError as e:
            kt.note("skipping model tests: %s" % e)
            raise unittest.SkipTest(str(e))
        cls.export_models = export_models
        torch_model, _ = export_models.build(cls.model)
        cls.x = export_models.example(cls.model, 3)
        with torch.no_grad():
            cls.reference = torch_model(cls.x).numpy()
        cls.input_effect = export_models.input_effect(
            torch_model, lambda batch, seed: (export_models.example(cls.model, batch, seed),))

    def test_reference_depends_on_input(self):
        """A reference whose output barely moves with the input (saturated
        or vanished activations) would let a wrong kernel pass."""
        kt.note("%s: two inputs' outputs differ by %.2f (relative L2)" % (
            self.model, self.input_effect))
        self.assertGreater(self.input_effect, 1e-2)

    def check(self, exporter):
        path = self.path("%s.%s.onnx" % (self.model, exporter))
        self.export_models.export(self.model, exporter, path)
        start = time.time()
        artifact, proc = self.compile(path, "%s.%s.kiln" % (self.model, exporter))
        compile_s = time.time() - start
        kt.assert_success(self, proc)
        if not kt.SANITIZE:  # sanitized kernels compile several times slower
            self.assertLess(compile_s, 60, "compile took %.1f s" % compile_s)
        for batch in (1, 3):
            with self.subTest(batch=batch):
                (y,), _ = self.run_artifact(artifact, [self.x[:batch].numpy()],
                                            "%s.b%d" % (exporter, batch))
                err = kt.rel_l2(y, self.reference[:batch])
                kt.note("%s %s batch %d: rel L2 %.2e, compile %.1f s" %
                        (self.model, exporter, batch, err, compile_s))
                self.assertLessEqual(err, TOLERANCE)

    def test_torchscript_exporter(self):
        self.check("torchscript")

    def test_dynamo_exporter(self):
        self.check("dynamo")

    def test_multi_device(self):
        """The model split over sim devices by its class's strategy (batch
        3, TorchScript export): within tolerance of eager, and bit-identical
        to the same plan with every role bound to the cpu."""
        path = self.path("%s.multi.onnx" % self.model)
        self.export_models.export(self.model, "torchscript", path)
        artifact, proc = self.compile(
            path, "%s.multi.kiln" % self.model, "--input-shape",
            self.export_models.input_shape(self.model, 3), *self.multi_device)
        kt.assert_success(self, proc)
        x = [self.x[:3].numpy()]
        (y,), _ = self.run_artifact(artifact, x, "multi")
        (on_cpu,), _ = self.run_artifact(artifact, x, "multi_cpu",
                                         options=("--device", "cpu"))
        err = kt.rel_l2(y, self.reference[:3])
        kt.note("%s %s: rel L2 %.2e" % (self.model, " ".join(self.multi_device),
                                         err))
        self.assertLessEqual(err, TOLERANCE)
        self.assertEqual(y.tobytes(), on_cpu.tobytes(),
                         "sim and cpu bindings of one plan differ")


    def test_x86_levels(self):
        """The model compiles for each x86-64 level kilnc offers above the
        baseline, whatever this CPU has, so that every level's kernel paths
        (vectors of 8 on AVX2, of 16 and the micro-kernels on AVX-512) build
        on any x86 machine. A level this CPU runs is run and compared with
        eager; one it cannot must be refused at load, naming a feature that
        /proc/cpuinfo indeed lacks."""
        import platform
        import re
        if platform.machine() not in ("x86_64", "AMD64"):
            self.skipTest("x86-64 levels on a %s machine" % platform.machine())
        path = self.path("%s.levels.onnx" % self.model)
        self.export_models.export(self.model, "torchscript", path)
        x = self.save_npy(self.x[:1].numpy(), "%s.levels.in.npy" % self.model)
        for level in ("x86-64-v3", "x86-64-v4"):
            with self.subTest(level=level):
                artifact, proc = self.compile(
                    path, "%s.%s.kiln" % (self.model, level),
                    "--target-cpu=" + level)
                kt.assert_success(self, proc)
                out_dir = self.path("%s.%s.out" % (self.model, level))
                proc = kt.kiln_run(artifact, x, "--output-dir", out_dir)
                refused = re.search(r"compiled for CPUs with (\w+), which "
                                    r"this CPU lacks", proc.stderr)
                if not refused:
                    kt.assert_success(self, proc)
                    y = np.load(os.path.join(out_dir, "output_0.npy"))
                    err = kt.rel_l2(y, self.reference[:1])
                    kt.note("%s %s: rel L2 %.2e" % (self.model, level, err))
                    self.assertLessEqual(err, TOLERANCE)
                    continue
                self.assertNotEqual(proc.returncode, 0)
                with open("/proc/cpuinfo") as f:
                    flags = re.search(r"^flags\s*:(.*)$", f.read(), re.M)
                self.assertIsNotNone(flags, "no flags line in /proc/cpuinfo")
                self.assertNotIn(refused.group(1), flags.group(1).split(),
                                 proc.stderr)
                kt.note("%s %s: compiles; refused here (no %s)" %
                        (self.model, level, refused.group(1)))

    def test_cuda_compile(self):
        """Every kernel of the model placed on cuda:0 compiles through NVRTC
        to PTX and through ptxas for the H200 (sm_90). Run by the
        cuda-compile ctest (KILN_CUDA_COMPILE=1)."""
        if os.environ.get("KILN_CUDA_COMPILE") != "1":
            self.skipTest("run by the cuda-compile ctest (KILN_CUDA_COMPILE=1)")
        ptxas = os.path.join(kt.cuda_home(), "bin", "ptxas")
        if not kt.nvrtc_available() or not os.access(ptxas, os.X_OK):
            self.skipTest("no CUDA toolkit (NVRTC, ptxas) at %s" % kt.cuda_home())
        path = self.path("%s.cuda.onnx" % self.model)
        self.export_models.export(self.model, "torchscript", path)
        ptx = self.path("%s.ptx" % self.model)
        proc = kt.kilnc(path, "--device", "cuda:0", "--emit=ptx", "-o", ptx,
                        "--input-shape", self.export_models.input_shape(self.model, 3))
        kt.assert_success(self, proc)
        with open(ptx) as f:
            entries = f.read().count(".entry ")
        self.assertGreater(entries, 5)  # resnet18: 10 (17 convs fused)
        proc = kt._run([ptxas, "-arch=sm_90", ptx, "-o", os.devnull])
        kt.assert_success(self, proc)
        # The launches: every conv but depthwise and 1x1 ones goes to cuDNN.
        mlir = self.path("%s.cuda.mlir" % self.model)
        proc = kt.kilnc(path, "--device", "cuda:0", "--emit=mlir", "-o", mlir,
                        "--input-shape", self.export_models.input_shape(self.model, 3))
        kt.assert_success(self, proc)
        proc = kt._run([kt.tool("kiln-translate"), "--kiln-to-cuda", mlir])
        kt.assert_success(self, proc)
        launches = "".join(line for line in proc.stdout.splitlines()
                           if line.startswith("// slots"))
        convs = launches.count(" conv{")
        self.assertEqual(convs, self.cudnn_convs, launches[:2000])
        # The whole artifact, its roles bound to the cpu: the C++ twins of
        # the cuda kernels (the direct windows cuDNN gets included) against
        # eager.
        artifact, proc = self.compile(
            path, "%s.cuda.kiln" % self.model, "--device", "cuda:0",
            "--input-shape", self.export_models.input_shape(self.model, 3))
        kt.assert_success(self, proc)
        (y,), _ = self.run_artifact(artifact, [self.x[:3].numpy()], "cuda_twins",
                                    options=("--bind", "0=cpu"))
        err = kt.rel_l2(y, self.reference[:3])
        self.assertLessEqual(err, TOLERANCE)
        kt.note("%s: %d CUDA entry points assemble for sm_90, %d cuDNN convs; "
                "its C++ twins rel L2 %.2e" % (self.model, entries, convs, err))

    def test_cuda_emulated(self):
        """The model compiled for cuda:0 runs on the fake driver with every
        generated CUDA kernel executed on the host (tests/emu) and the fake
        cuBLAS and cuDNN: kiln's real launch sequence, slots and scratch,
        against eager. Run by the cuda-compile ctest (KILN_CUDA_COMPILE=1)."""
        if os.environ.get("KILN_CUDA_COMPILE") != "1":
            self.skipTest("run by the cuda-compile ctest (KILN_CUDA_COMPILE=1)")
        if not kt.nvrtc_available():
            self.skipTest("no CUDA toolkit (NVRTC) at %s" % kt.cuda_home())
        path = self.path("%s.emu.onnx" % self.model)
        self.export_models.export(self.model, "torchscript", path)
        artifact, env = self.cuda_emulated(
            path, "%s.emu" % self.model, "--input-shape",
            self.export_models.input_shape(self.model, 3))
        env["FAKE_CUDA_REPORT"] = "1"
        start = time.time()
        (y,), proc = self.run_artifact(artifact, [self.x[:3].numpy()], "emu", env=env)
        err = kt.rel_l2(y, self.reference[:3])
        report = re.search(r"fake cuda: (\d+) emulated kernel launches, (\d+) GEMMs, "
                           r"(\d+) convs \((\d+) fused\)", proc.stderr)
        self.assertIsNotNone(report, proc.stderr[-2000:])
        kernels, gemms, convs, fused = map(int, report.groups())
        kt.note("%s on emulated cuda:0: rel L2 %.2e; %d kernels, %d GEMMs, "
                "%d convs, %d of them fused with bias and ReLU (%.1f s)" %
                (self.model, err, kernels, gemms, convs, fused, time.time() - start))
        self.assertGreater(kernels, 0)
        self.assertEqual(convs, self.cudnn_convs)
        self.assertEqual(fused, self.fused_convs)
        self.assertLessEqual(err, TOLERANCE)
        # The same artifact where neither cuBLAS nor cuDNN loads: every GEMM
        # and conv runs its generated stand-in (codegen/cuda/CudaFallback.cpp).
        start = time.time()
        (y,), proc = self.run_artifact(artifact, [self.x[:3].numpy()], "emu_stand_ins",
                                       env=dict(env, KILN_CUBLAS="none", KILN_CUDNN="none"))
        err = kt.rel_l2(y, self.reference[:3])
        report = re.search(r"fake cuda: (\d+) emulated kernel launches, (\d+) GEMMs, "
                           r"(\d+) convs", proc.stderr)
        self.assertIsNotNone(report, proc.stderr[-2000:])
        kt.note("%s on emulated cuda:0 without cuBLAS and cuDNN: rel L2 %.2e; %s kernels "
                "(%.1f s)" % (self.model, err, report.group(1), time.time() - start))
        self.assertEqual((int(report.group(2)), int(report.group(3))), (0, 0))
        self.assertEqual(int(report.group(1)), kernels + gemms + convs)
        self.assertLessEqual(err, TOLERANCE)
        # The class's multi-device split with its sim devices made GPUs: two
        # emulated devices, steps ordered by CUDA events across them.
        devices = [a.replace("sim:", "cuda:") for a in self.multi_device]
        artifact, env = self.cuda_emulated(
            path, "%s.emu2" % self.model, "--input-shape",
            self.export_models.input_shape(self.model, 3), *devices)
        env.update(FAKE_CUDA_REPORT="1", FAKE_CUDA_DEVICES="2")
        (y,), proc = self.run_artifact(artifact, [self.x[:3].numpy()], "emu2", env=env)
        err = kt.rel_l2(y, self.reference[:3])
        waits = re.search(r"(\d+) stream waits on events", proc.stderr)
        self.assertIsNotNone(waits, proc.stderr[-2000:])
        kt.note("%s %s on emulated GPUs: rel L2 %.2e, %s stream waits on events" %
                (self.model, " ".join(devices), err, waits.group(1)))
        self.assertGreater(int(waits.group(1)), 0)
        self.assertLessEqual(err, TOLERANCE)


class ResNet18(ModelTest):
    model = "resnet18"
    cudnn_convs = 20  # the stem, 16 3x3 convs, 3 strided 1x1 downsamples
    # The stem and each block's first conv (bias, ReLU) and second (bias,
    # the residual, ReLU): 1 + 8 + 8; the downsamples have no ReLU.
    fused_convs = 17
    multi_device = ("--devices", "sim:0,sim:1", "--placement=pipeline:2",
                    "--microbatches", "3")


class MobileNetV2(ModelTest):
    model = "mobilenet_v2"
    cudnn_convs = 1  # the stem; the depthwise and 1x1 ones are not cuDNN's
    fused_convs = 0  # its ReLU6 is a clip, which cuDNN's fused call lacks
    multi_device = ("--devices", "cpu,sim:0,sim:1", "--placement=data:3")


class BertEncoder(ModelTest):
    model = "bert"
    cudnn_convs = 0
    fused_convs = 0
    multi_device = ("--devices", "sim:0,sim:1", "--placement=data:2")


del ModelTest

if __name__ == "__main__":
    unittest.main()
