"""Window and layout ops over shapes known only at run time, each model
compiled once and run at several sizes.

References: torch (conv2d, depthwise conv2d, conv1d with groups, conv_transpose2d, fold, pixel_shuffle /
pixel_unshuffle), ONNX's reference evaluator (ConvTranspose with auto_pad
SAME) and numpy (slicing, padding, reshape with allowzero).
"""

import unittest

import numpy as np

import kiln_testing as kt


def tensor(name, elem, dims):
    from onnx import helper as h
    return h.make_tensor_value_info(name, elem, dims)


def conv3x3(rng, c, m_out, bias, pads, out):
    """A 3x3 Conv node of c -> m_out channels with random constant weights
    (and bias); returns the node, its initializers, w and b (None without
    bias)."""
    from onnx import helper as h, numpy_helper as nh
    w = rng.standard_normal((m_out, c, 3, 3)).astype(np.float32) * 0.2
    b = rng.standard_normal(m_out).astype(np.float32) if bias else None
    inits = [nh.from_array(w, "w")] + ([nh.from_array(b, "b")] if bias else [])
    node = h.make_node("Conv", ["x", "w"] + (["b"] if bias else []), [out], pads=pads)
    return node, inits, w, b


class DynamicWindows(kt.KilnTestCase):
    def compiled(self, model, tag):
        artifact, proc = self.compile(self.save_model(model, tag + ".onnx"),
                                      tag + ".kiln")
        kt.assert_success(self, proc)
        return artifact

    def run_at(self, artifact, tag, inputs):
        outputs, _ = self.run_artifact(artifact, inputs, out_name=tag)
        return outputs

    def test_grouped_conv_of_run_time_channels(self):
        """A grouped conv (constant weight) of an input whose channel dim is
        symbolic: the groups' channels come from the weight (it did not
        compile: fuzz seed 31415), and an input with another channel count is
        a run-time error (it ran, reading past the input)."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        rng = np.random.default_rng(12)
        w = rng.standard_normal((12, 2, 3)).astype(np.float32)
        graph = h.make_graph(
            [h.make_node("Conv", ["x", "w"], ["y"], group=4, strides=[2])],
            "grouped", [tensor("x", T.FLOAT, ["n", "c", 17])],
            [tensor("y", T.FLOAT, None)], [nh.from_array(w, "w")])
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        artifact = self.compiled(model, "grouped_rt")
        for n in (1, 3):
            x = rng.standard_normal((n, 8, 17)).astype(np.float32)
            (got,) = self.run_at(artifact, "grouped_rt_%d" % n, [x])
            want = torch.nn.functional.conv1d(torch.from_numpy(x), torch.from_numpy(w),
                                              stride=2, groups=4).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        bad = self.save_npy(np.ones((1, 6, 17), np.float32), "grouped_bad.npy")
        kt.assert_clean_failure(self, kt.kiln_run(artifact, bad),
                                "conv input needs 8 channels (4 groups of 2)")

    def test_conv_with_a_weight_sized_at_run_time(self):
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h
        for group in (1, 2):
            with self.subTest(group=group):
                m = kt.onnx_model(
                    [h.make_node("Conv", ["x", "w", "b"], ["y"], group=group,
                                 pads=[1, 0, 2, 1], strides=[2, 1],
                                 dilations=[1, 2])],
                    [tensor("x", T.FLOAT, ["n", "c", "h", "w"]),
                     tensor("w", T.FLOAT, ["m", "cg", "kh", "kw"]),
                     tensor("b", T.FLOAT, ["m"])],
                    [tensor("y", T.FLOAT, None)], 17)
                artifact = self.compiled(m, "conv_g%d" % group)
                rng = np.random.default_rng(group)
                for n, c, hw, m_out, k in ((1, 2, 7, 4, 3), (2, 4, 9, 6, 2)):
                    x = rng.standard_normal((n, c, hw, hw + 1)).astype(np.float32)
                    w = rng.standard_normal((m_out, c // group, k, k + 1)).astype(np.float32)
                    b = rng.standard_normal(m_out).astype(np.float32)
                    (got,) = self.run_at(artifact, "conv_g%d_%d" % (group, n), [x, w, b])
                    xp = torch.nn.functional.pad(torch.from_numpy(x), (0, 1, 1, 2))
                    want = torch.nn.functional.conv2d(
                        xp, torch.from_numpy(w), torch.from_numpy(b), stride=(2, 1),
                        dilation=(1, 2), groups=group).numpy()
                    self.assertEqual(got.shape, want.shape)
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def test_depthwise_conv_after_its_padding(self):
        """A padded depthwise conv (weights known, taps unrolled), with ReLU6
        or alone: without a channel multiplier the CPU code pads each
        (image, channel) plane just before the window reads it; a static
        plane narrower than kSplitPlaneWidth (24) at stride 1 runs its rows
        flattened, and one at least that wide at stride 2 is padded straight
        into rows split by 2. Static and run-time batch and sizes, strides 1 and
        2, channel multipliers 1 and 2."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        c = 6
        for dims in (["n", c, "h", "w"], [1, c, 9, 10], [1, c, 9, 50]):
            for relu6 in ((True,) if dims[0] == "n" else (True, False)):
                for stride in (1, 2):
                    for mult in (1, 2):
                        kind = "sym" if dims[0] == "n" else "static%d" % dims[3]
                        tag = "dw_%s_s%d_m%d%s" % (kind, stride, mult, "_relu6" if relu6 else "")
                        with self.subTest(tag):
                            self.check_depthwise(torch, tag, dims, relu6, stride, mult)

    def check_depthwise(self, torch, tag, dims, relu6, stride, mult):
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        c = dims[1]
        rng = np.random.default_rng(stride * 10 + mult)
        w = rng.standard_normal((c * mult, 1, 3, 3)).astype(np.float32)
        b = rng.standard_normal(c * mult).astype(np.float32)
        nodes = [h.make_node("Conv", ["x", "w", "b"], ["y0" if relu6 else "y"], group=c,
                             pads=[1, 1, 1, 1], strides=[stride, stride])]
        inits = [nh.from_array(w, "w"), nh.from_array(b, "b")]
        if relu6:
            nodes.append(h.make_node("Clip", ["y0", "lo", "hi"], ["y"]))
            inits += [nh.from_array(np.array(0, np.float32), "lo"),
                      nh.from_array(np.array(6, np.float32), "hi")]
        graph = h.make_graph(nodes, tag, [tensor("x", T.FLOAT, dims)],
                             [tensor("y", T.FLOAT, None)], inits)
        m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        path, cpp = self.emit_cpp(m, tag)
        # A multiplier reads channel c // 2: no whole planes to share out,
        # so the pad runs whole first.
        (self.assertIn if mult == 1 else self.assertNotIn)("one plane", cpp)
        static = dims[0] != "n"
        (self.assertIn if static and mult == 1 and stride == 1 and dims[3] < 24
         else self.assertNotIn)("rows flattened", cpp)
        (self.assertIn if static and mult == 1 and stride == 2 and dims[3] >= 48
         else self.assertNotIn)("a pad, by rows, split by 2", cpp)
        artifact = self.compiled(m, tag)
        sizes = ((2, 9, 10), (1, 5, 7)) if dims[0] == "n" else ((1, dims[2], dims[3]),)
        for n, hh, ww in sizes:
            x = rng.standard_normal((n, c, hh, ww)).astype(np.float32) * 3
            (got,) = self.run_at(artifact, "%s_%d_%d" % (tag, n, hh), [x])
            want = torch.nn.functional.conv2d(
                torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                stride=stride, padding=1, groups=c)
            if relu6:
                want = want.clamp(0, 6)
            want = want.numpy()
            self.assertEqual(got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def test_strided_max_pools_with_taps_innermost(self):
        """Max pools of stride 2 whose rows are at least 24 wide loop their
        taps innermost, padded (the plane split by 2) or not; NaN wins
        wherever a window holds one, as in torch."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h
        rng = np.random.default_rng(7)
        for k, pad in ((2, 0), (3, 0), (3, 1)):
            tag = "maxpool_k%d_p%d" % (k, pad)
            with self.subTest(tag):
                m = kt.onnx_model(
                    [h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[k, k],
                                 strides=[2, 2], pads=[pad] * 4)],
                    [tensor("x", T.FLOAT, ["n", 3, 20, 60])],
                    [tensor("y", T.FLOAT, None)], 13)
                path, cpp = self.emit_cpp(m, tag)
                (self.assertIn if pad else self.assertNotIn)(
                    "a pad, by rows, split by 2", cpp)
                artifact = self.compiled(m, tag)
                x = rng.standard_normal((2, 3, 20, 60)).astype(np.float32)
                x[0, 1, 4, 7] = np.nan
                x[1, 2, 11, 40] = np.nan
                (got,) = self.run_at(artifact, tag, [x])
                want = torch.nn.functional.max_pool2d(
                    torch.from_numpy(x), k, stride=2, padding=pad).numpy()
                self.assertEqual(got.shape, want.shape)
                self.assertTrue(np.isnan(got).any())
                np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
                np.testing.assert_allclose(got, want, rtol=0, atol=0)

    def test_strided_windows_padded_into_split_rows(self):
        """A pad that makes a strided window's plane writes its rows split by
        the stride, column c at (c mod S, c div S): odd and even widths,
        strides 2 and 3, pads on one side or both, of different sizes. Max
        pools compare exactly with numpy, so any column out of place shows."""
        from onnx import TensorProto as T, helper as h
        rng = np.random.default_rng(11)
        cases = [  # (width, kernel, stride, pads [top, left, bottom, right])
            (61, 3, 2, [1, 1, 1, 1]), (61, 3, 2, [0, 1, 2, 0]),
            (60, 2, 2, [1, 0, 0, 1]), (59, 3, 2, [2, 2, 2, 2]),
            (77, 3, 3, [1, 1, 1, 2]), (76, 4, 3, [0, 2, 1, 0]),
        ]
        for width, k, stride, pads in cases:
            tag = "split_w%d_k%d_s%d_p%s" % (width, k, stride, "".join(map(str, pads)))
            with self.subTest(tag):
                m = kt.onnx_model(
                    [h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[k, k],
                                 strides=[stride, stride], pads=pads)],
                    [tensor("x", T.FLOAT, [2, 3, 11, width])],
                    [tensor("y", T.FLOAT, None)], 13)
                path, cpp = self.emit_cpp(m, tag)
                self.assertIn("a pad, by rows, split by %d" % stride, cpp)
                x = rng.standard_normal((2, 3, 11, width)).astype(np.float32)
                (got,) = self.run_at(self.compiled(m, tag), tag, [x])
                xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
                            constant_values=-np.inf)
                oh = (xp.shape[2] - k) // stride + 1
                ow = (xp.shape[3] - k) // stride + 1
                want = np.full((2, 3, oh, ow), -np.inf, np.float32)
                for i in range(k):
                    for j in range(k):
                        want = np.maximum(want, xp[:, :, i:i + stride * oh:stride,
                                                   j:j + stride * ow:stride])
                self.assertEqual(got.shape, want.shape)
                np.testing.assert_array_equal(got, want)

    def test_conv_kernel_run_image_by_image(self):
        """A conv kernel (pad, im2col, GEMM, then its bias, a residual add
        and ReLU; dilated, so that it does not run as Winograd) whose largest
        tensor is over 8 MiB for the batch runs its body image by image;
        below that, one pass over the batch. The residual's batch is its own
        symbolic dim, so at run time it can be 1 and broadcast over the
        images, or the conv's input can. (With the conv's input of batch 1
        and the residual of 4, the epilogue once overwrote in place the conv
        result it broadcast: 42% of the output was wrong.)"""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        rng = np.random.default_rng(11)
        w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1
        b = rng.standard_normal(32).astype(np.float32)
        graph = h.make_graph(
            [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[2, 2, 2, 2],
                         dilations=[2, 2]),
             h.make_node("Add", ["c", "r"], ["s"]),
             h.make_node("Relu", ["s"], ["y"])], "images",
            [tensor("x", T.FLOAT, ["n", 16, 64, 64]),
             tensor("r", T.FLOAT, ["m", 32, 64, 64])],
            [tensor("y", T.FLOAT, None)],
            [nh.from_array(w, "w"), nh.from_array(b, "b")])
        m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        path, cpp = self.emit_cpp(m, "images")
        # One image's im2col buffer: 16 * 9 * 64 * 64 floats.
        self.assertIn("images * 2359296 <= 8388608", cpp)
        artifact = self.compiled(m, "images")
        # 4 images: 9 MiB of im2col, image by image; 2 images: one pass.
        for n, m_res in ((4, 4), (4, 1), (1, 4), (2, 2), (1, 1)):
            with self.subTest(n=n, m=m_res):
                x = rng.standard_normal((n, 16, 64, 64)).astype(np.float32)
                r = rng.standard_normal((m_res, 32, 64, 64)).astype(np.float32)
                (got,) = self.run_at(artifact, "images_%d_%d" % (n, m_res), [x, r])
                want = torch.relu(torch.nn.functional.conv2d(
                    torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                    padding=2, dilation=2) + torch.from_numpy(r)).numpy()
                self.assertEqual(got.shape, want.shape)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def test_winograd_conv(self):
        """A 3x3 stride-1 conv with a constant weight on planes at least 7
        wide runs as Winograd F(2x2, 3x3) on the CPU: even and odd plane
        sizes (tiles cut short), asymmetric pads, no bias, several images
        (in one chunk of transformed tiles, or in several, or one image at
        a time when the kernel runs image by image), and without oneDNN
        (KILN_DNNL=none: the direct loops instead). Under 32 tiles in all
        (a 7x7 or 8x7 output at batch 1: 16 tiles), or where the GEMMs are
        small (tiles x m x c under 2^19 multiply-adds: most cases here) the
        kernel runs im2col and one GEMM on the weight instead; the 48x48
        and 128x128 planes run Winograd by bands of an image's tiles, the
        128 channels at 7x7 and batch 3 Winograd by chunks of images (more
        channels than an image's tiles)."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h
        from unittest import mock
        cases = [  # c, m, (h, w), pads, bias, batches
            (16, 24, (14, 16), [1, 1, 1, 1], True, (1, 3)),
            (16, 16, (15, 17), [1, 1, 1, 1], True, (1, 3)),
            (24, 16, (16, 17), [0, 2, 1, 0], False, (1, 3)),
            (64, 16, (48, 48), [1, 1, 1, 1], True, (1, 3)),
            (32, 32, (7, 7), [1, 1, 1, 1], True, (1, 3)),
            (24, 16, (9, 7), [0, 2, 1, 0], False, (1, 3)),
            (128, 128, (7, 7), [1, 1, 1, 1], True, (1, 3)),
            # 4 padded inputs of 2.1 MiB: image by image.
            (32, 32, (128, 128), [1, 1, 1, 1], True, (4,)),
        ]
        for i, (c, m_out, (hh, ww), pads, bias, batches) in enumerate(cases):
            with self.subTest(c=c, m=m_out, hw=(hh, ww), pads=pads):
                rng = np.random.default_rng(20 + i)
                conv, inits, w, b = conv3x3(rng, c, m_out, bias, pads, "c")
                graph = h.make_graph(
                    [conv, h.make_node("Relu", ["c"], ["y"])], "winograd",
                    [tensor("x", T.FLOAT, ["n", c, hh, ww])],
                    [tensor("y", T.FLOAT, None)], inits)
                model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
                tag = "winograd%d" % i
                path, cpp = self.emit_cpp(model, tag)
                kernels = cpp.split("// kiln kernel", 1)[1]
                self.assertIn("kiln_winograd3x3(", kernels)
                if batches == (4,):
                    self.assertIn("images * 2163200 <= 8388608", kernels)
                artifact = self.compiled(model, tag)
                for n in batches:
                    x = rng.standard_normal((n, c, hh, ww)).astype(np.float32)
                    xt = torch.nn.functional.pad(
                        torch.from_numpy(x), (pads[1], pads[3], pads[0], pads[2]))
                    want = torch.relu(torch.nn.functional.conv2d(
                        xt, torch.from_numpy(w),
                        torch.from_numpy(b) if bias else None)).numpy()
                    (got,) = self.run_at(artifact, "%s_%d" % (tag, n), [x])
                    self.assertEqual(got.shape, want.shape)
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
                    if n == batches[-1]:
                        with mock.patch.dict("os.environ", {"KILN_DNNL": "none"}):
                            (loops,) = self.run_at(artifact, "%s_none" % tag, [x])
                        np.testing.assert_allclose(loops, want, rtol=1e-4, atol=1e-4)

    def test_stem_conv_before_pooled_planes_at_a_run_time_batch(self):
        """squeezenet1_1's first kernel with the batch sized at run time: a
        stem conv by rows, its bias and ReLU run plane by plane inside the
        ceil-mode max pool's loops, then a 1x1 conv. The conv was once left
        out of the kernel altogether (a fusion asked about sizes not yet
        named, deferred it to an epilogue the pool then took), and the
        kernel read its per-thread plane buffer as the conv's output."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        F = torch.nn.functional
        rng = np.random.default_rng(11)
        w = (rng.standard_normal((64, 3, 3, 3)) / 5).astype(np.float32)
        b = rng.standard_normal(64).astype(np.float32)
        w2 = (rng.standard_normal((16, 64, 1, 1)) / 8).astype(np.float32)
        b2 = rng.standard_normal(16).astype(np.float32)
        nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2]),
                 h.make_node("Relu", ["c"], ["r"]),
                 h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3],
                             strides=[2, 2], ceil_mode=1),
                 h.make_node("Conv", ["p", "w2", "b2"], ["q"]),
                 h.make_node("Relu", ["q"], ["y"])]
        graph = h.make_graph(nodes, "stem", [tensor("x", T.FLOAT, ["n", 3, 224, 224])],
                             [tensor("y", T.FLOAT, None)],
                             [nh.from_array(v, k) for k, v in
                              (("w", w), ("b", b), ("w2", w2), ("b2", b2))])
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        artifact = self.compiled(model, "stem_planes")
        for n in (1, 3):
            x = rng.standard_normal((n, 3, 224, 224)).astype(np.float32)
            t = F.relu(F.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                torch.from_numpy(b), stride=2))
            t = F.max_pool2d(t, 3, 2, ceil_mode=True)
            want = F.relu(F.conv2d(t, torch.from_numpy(w2), torch.from_numpy(b2))).numpy()
            (got,) = self.run_at(artifact, "stem_planes_%d" % n, [x])
            self.assertEqual(got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

    def test_winograd_conv_on_planes_sized_at_run_time(self):
        """A 3x3 stride-1 conv with a constant weight whose planes are known
        only at run time has no im2col GEMM to run: it runs as Winograd
        (with or without bias, 8 input channels as well as 16 and more),
        compiled once and run at even and odd sizes (the last tiles cut
        short, its input padded by the pads alone), wide and narrow, and
        without oneDNN (its loops). 3 input channels (27 taps, which
        unroll) stay loops."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h
        from unittest import mock
        cases = [  # c, m, pads, bias, winograd
            (16, 24, [1, 1, 1, 1], True, True),
            (8, 24, [1, 1, 1, 1], False, True),
            (32, 8, [0, 2, 1, 0], True, True),
            (3, 16, [1, 1, 1, 1], True, False),
        ]
        for i, (c, m_out, pads, bias, winograd) in enumerate(cases):
            with self.subTest(c=c, m=m_out, pads=pads, bias=bias):
                rng = np.random.default_rng(40 + i)
                conv, inits, w, b = conv3x3(rng, c, m_out, bias, pads, "y")
                graph = h.make_graph([conv], "winograd_planes",
                    [tensor("x", T.FLOAT, ["n", c, "h", "w"])],
                    [tensor("y", T.FLOAT, None)], inits)
                model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
                tag = "winograd_planes%d" % i
                path, cpp = self.emit_cpp(model, tag)
                kernels = cpp.split("// kiln kernel", 1)[1]
                (self.assertIn if winograd else self.assertNotIn)(
                    "kiln_winograd3x3(", kernels)
                artifact = self.compiled(model, tag)
                for n, hh, ww in ((1, 9, 7), (2, 16, 13), (1, 3, 4), (1, 40, 33)):
                    x = rng.standard_normal((n, c, hh, ww)).astype(np.float32)
                    xt = torch.nn.functional.pad(
                        torch.from_numpy(x), (pads[1], pads[3], pads[0], pads[2]))
                    want = torch.nn.functional.conv2d(
                        xt, torch.from_numpy(w),
                        torch.from_numpy(b) if bias else None).numpy()
                    run = "%s_%d_%dx%d" % (tag, n, hh, ww)
                    (got,) = self.run_at(artifact, run, [x])
                    self.assertEqual(got.shape, want.shape)
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
                    if hh == 16:
                        with mock.patch.dict("os.environ", {"KILN_DNNL": "none"}):
                            (loops,) = self.run_at(artifact, run + "_none", [x])
                        np.testing.assert_allclose(loops, want, rtol=1e-4, atol=1e-4)

    def test_gemm_epilogue_on_tiles(self):
        """A GEMM whose result only an elementwise op reads runs that
        epilogue on each tile right after computing it (kiln_sgemm_tiles):
        1x1 convs with bias and ReLU6 or a residual add, an im2col conv, and
        a matmul whose rows are two dims (batch and sequence) with a GELU;
        one image and several, and without oneDNN (KILN_DNNL=none: the
        GEMM's loops, then the epilogue's)."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        from unittest import mock
        F = torch.nn.functional
        rng = np.random.default_rng(7)

        def weight(*shape):
            return (rng.standard_normal(shape) * 0.2).astype(np.float32)

        w1, b1 = weight(96, 16, 1, 1), weight(96)
        w2, b2 = weight(32, 64, 1, 1), weight(32)
        w3, b3 = weight(24, 8, 3, 3), weight(24)
        w4, b4 = weight(64, 128), weight(128)
        sqrt2 = nh.from_array(np.array(2 ** 0.5, np.float32), "sqrt2")
        one = nh.from_array(np.array(1.0, np.float32), "one")
        half = nh.from_array(np.array(0.5, np.float32), "half")
        lo = nh.from_array(np.array(0.0, np.float32), "lo")
        hi = nh.from_array(np.array(6.0, np.float32), "hi")
        cases = [  # tag, nodes, inits, inputs (shape without batch), reference
            ("relu6", [h.make_node("Conv", ["x", "w", "b"], ["c"]),
                       h.make_node("Clip", ["c", "lo", "hi"], ["y"])],
             [nh.from_array(w1, "w"), nh.from_array(b1, "b"), lo, hi], [(16, 28, 28)],
             lambda x: F.conv2d(x, torch.from_numpy(w1), torch.from_numpy(b1)).clamp(0, 6)),
            ("residual", [h.make_node("Conv", ["x", "w", "b"], ["c"]),
                          h.make_node("Add", ["c", "r"], ["s"]),
                          h.make_node("Relu", ["s"], ["y"])],
             [nh.from_array(w2, "w"), nh.from_array(b2, "b")], [(64, 7, 7), (32, 7, 7)],
             lambda x, r: torch.relu(
                 F.conv2d(x, torch.from_numpy(w2), torch.from_numpy(b2)) + r)),
            ("im2col", [h.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2],
                                    pads=[1, 1, 1, 1]),
                        h.make_node("Relu", ["c"], ["y"])],
             [nh.from_array(w3, "w"), nh.from_array(b3, "b")], [(8, 15, 15)],
             lambda x: torch.relu(F.conv2d(x, torch.from_numpy(w3), torch.from_numpy(b3),
                                           stride=2, padding=1))),
            ("gelu", [h.make_node("MatMul", ["x", "w"], ["m"]),
                      h.make_node("Add", ["m", "b"], ["a"]),
                      h.make_node("Div", ["a", "sqrt2"], ["d"]),
                      h.make_node("Erf", ["d"], ["e"]),
                      h.make_node("Add", ["e", "one"], ["e1"]),
                      h.make_node("Mul", ["a", "e1"], ["p"]),
                      h.make_node("Mul", ["p", "half"], ["y"])],
             [nh.from_array(w4, "w"), nh.from_array(b4, "b"), sqrt2, one, half], [(24, 64)],
             lambda x: F.gelu(x @ torch.from_numpy(w4) + torch.from_numpy(b4))),
        ]
        for tag, nodes, inits, shapes, reference in cases:
            with self.subTest(case=tag):
                names = ["x", "r"][:len(shapes)]
                graph = h.make_graph(
                    nodes, tag, [tensor(n, T.FLOAT, ["n", *s]) for n, s in zip(names, shapes)],
                    [tensor("y", T.FLOAT, None)], inits)
                model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
                path, cpp = self.emit_cpp(model, "tiles_" + tag)
                self.assertIn("kiln_sgemm_tiles(", cpp)
                artifact = self.compiled(model, "tiles_" + tag)
                for n in (1, 3):
                    xs = [rng.standard_normal((n, *s)).astype(np.float32) for s in shapes]
                    want = reference(*map(torch.from_numpy, xs)).numpy()
                    (got,) = self.run_at(artifact, "tiles_%s_%d" % (tag, n), xs)
                    self.assertEqual(got.shape, want.shape)
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
                    if n == 3:
                        with mock.patch.dict("os.environ", {"KILN_DNNL": "none"}):
                            (loops,) = self.run_at(artifact, "tiles_%s_none" % tag, xs)
                        np.testing.assert_allclose(loops, want, rtol=1e-4, atol=1e-4)

    def test_causal_conv_with_channels_counted_at_run_time(self):
        """CausalConvWithState becomes a depthwise conv whose group count is
        the input's channels, read at run time."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model(
            [h.make_node("CausalConvWithState", ["x", "w"], ["y", "state"])],
            [tensor("x", T.FLOAT, ["b", "c", "t"]),
             tensor("w", T.FLOAT, ["c", 1, "k"])],
            [tensor("y", T.FLOAT, None), tensor("state", T.FLOAT, None)], 27)
        artifact = self.compiled(m, "causal")
        rng = np.random.default_rng(4)
        for b, c, t, k in ((1, 3, 6, 2), (2, 5, 4, 4)):
            x = rng.standard_normal((b, c, t)).astype(np.float32)
            w = rng.standard_normal((c, 1, k)).astype(np.float32)
            y, state = self.run_at(artifact, "causal_%d" % c, [x, w])
            padded = np.concatenate([np.zeros((b, c, k - 1), np.float32), x], axis=2)
            want = torch.nn.functional.conv1d(torch.from_numpy(padded),
                                              torch.from_numpy(w), groups=c).numpy()
            np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(state, padded[:, :, -(k - 1):])

    def test_col2im_matches_torch_fold(self):
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model(
            [h.make_node("Col2Im", ["cols", "image", "block"], ["y"],
                         strides=[2, 1], pads=[1, 0, 1, 2], dilations=[1, 2])],
            [tensor("cols", T.FLOAT, ["n", "ck", "l"]),
             tensor("image", T.INT64, [2]), tensor("block", T.INT64, [2])],
            [tensor("y", T.FLOAT, [None, None, None, None])], 18)
        artifact = self.compiled(m, "col2im")
        rng = np.random.default_rng(5)
        for n, c, image, block in ((1, 1, (5, 6), (2, 2)), (2, 3, (7, 4), (3, 2))):
            # torch's padding is symmetric: pad explicitly (1 top/bottom,
            # 0 left, 2 right) by folding into the padded image and cropping.
            padded = (image[0] + 2, image[1] + 2)
            fold = torch.nn.Fold(padded, block, dilation=(1, 2), stride=(2, 1))
            blocks = [(padded[i] - ((block[i] - 1) * (1, 2)[i] + 1)) // (2, 1)[i] + 1
                      for i in range(2)]
            cols = rng.standard_normal(
                (n, c * block[0] * block[1], blocks[0] * blocks[1])).astype(np.float32)
            want = fold(torch.from_numpy(cols)).numpy()[:, :, 1:1 + image[0], 0:image[1]]
            (got,) = self.run_at(artifact, "col2im_%d" % n,
                                 [cols, np.array(image, np.int64), np.array(block, np.int64)])
            self.assertEqual(got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def test_conv_transpose_at_run_time_sizes(self):
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model(
            [h.make_node("ConvTranspose", ["x", "w", "b"], ["y"], group=2,
                         strides=[2, 3], pads=[1, 0, 0, 1], dilations=[1, 2],
                         output_padding=[1, 0])],
            [tensor("x", T.FLOAT, ["n", "c", "h", "w"]),
             tensor("w", T.FLOAT, ["c", "mg", "kh", "kw"]),
             tensor("b", T.FLOAT, ["m"])],
            [tensor("y", T.FLOAT, None)], 17)
        artifact = self.compiled(m, "deconv")
        rng = np.random.default_rng(8)
        for n, c, mg, hw, k in ((1, 2, 1, 3, 2), (2, 4, 3, 4, 3)):
            x = rng.standard_normal((n, c, hw, hw + 1)).astype(np.float32)
            w = rng.standard_normal((c, mg, k, k)).astype(np.float32)
            b = rng.standard_normal(2 * mg).astype(np.float32)
            (got,) = self.run_at(artifact, "deconv_%d" % n, [x, w, b])
            # torch pads symmetrically: transpose without padding, then crop
            # ONNX's pads (1 top, 0 left, 0 bottom, 1 right).
            full = torch.nn.functional.conv_transpose2d(
                torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                stride=(2, 3), output_padding=(1, 0), groups=2,
                dilation=(1, 2)).numpy()
            want = full[:, :, 1:, :full.shape[3] - 1]
            self.assertEqual(got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def test_conv_transpose_at_a_run_time_batch(self):
        """ConvTranspose with a constant weight and only the batch sized at
        run time stays a convolution of the input with zeros inserted (by
        pads, as no zeros constant of a symbolic shape exists), not Col2Im's
        scatter-add, which took 0.74 s for a 64 -> 32 2x2 one at 16x16 and
        made a U-Net run for minutes: strides 2 and 3, groups, dilation,
        output_padding and a negative (cropping) pad, at batch 1 and 3."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        cases = [  # c, m per group, groups, k, strides, pads, dilations, out pad
            (8, 4, 1, [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], [0, 0]),
            (6, 2, 3, [3, 3], [2, 3], [1, 0, 0, 1], [1, 2], [1, 0]),
            (4, 3, 2, [4, 2], [3, 2], [2, 1, 3, 0], [1, 1], [0, 1]),
        ]
        for i, (c, mg, groups, k, strides, pads, dil, extra) in enumerate(cases):
            with self.subTest(case=i):
                rng = np.random.default_rng(60 + i)
                w = rng.standard_normal((c, mg) + tuple(k)).astype(np.float32)
                b = rng.standard_normal(mg * groups).astype(np.float32)
                node = h.make_node("ConvTranspose", ["x", "w", "b"], ["y"], group=groups,
                                   strides=strides, pads=pads, dilations=dil,
                                   output_padding=extra)
                graph = h.make_graph([node], "deconv_batch",
                                     [tensor("x", T.FLOAT, ["n", c, 7, 6])],
                                     [tensor("y", T.FLOAT, None)],
                                     [nh.from_array(w, "w"), nh.from_array(b, "b")])
                model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
                tag = "deconv_batch%d" % i
                # The convolution's few kernels (pads, conv, bias), not
                # Col2Im's 30-odd index computations and scatter.
                _, cpp = self.emit_cpp(model, tag)
                self.assertLess(cpp.count("// kiln kernel "), 12)
                artifact = self.compiled(model, tag)
                for n in (1, 3):
                    x = rng.standard_normal((n, c, 7, 6)).astype(np.float32)
                    full = torch.nn.functional.conv_transpose2d(
                        torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                        stride=strides, output_padding=extra, groups=groups,
                        dilation=dil).numpy()
                    want = full[:, :, pads[0]:full.shape[2] - pads[2],
                                pads[1]:full.shape[3] - pads[3]]
                    (got,) = self.run_at(artifact, "%s_%d" % (tag, n), [x])
                    self.assertEqual(got.shape, want.shape)
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

    def test_conv_transpose_by_blocks(self):
        """Strides equal to the kernel, no pads, dilation or groups (a
        U-Net's up-convs): a 1x1 conv to M * K1 * .. * Kr channels spread
        over the output's blocks, not a conv over the input with zeros
        inserted; 1-d, 2-d with a non-square kernel, and 3-d, with and
        without bias and with output_shape, at a run-time batch, against
        torch."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        cases = [  # c, m, kernel (= strides), spatial, bias, output_shape
            (5, 3, [2], [7], True, False),
            (8, 4, [2, 3], [5, 4], True, True),
            (3, 2, [2, 2, 2], [3, 4, 2], False, False),
        ]
        convs = {1: torch.nn.functional.conv_transpose1d,
                 2: torch.nn.functional.conv_transpose2d,
                 3: torch.nn.functional.conv_transpose3d}
        for i, (c, m, k, spatial, bias, out_shape) in enumerate(cases):
            with self.subTest(case=i):
                rng = np.random.default_rng(70 + i)
                w = rng.standard_normal((c, m) + tuple(k)).astype(np.float32)
                b = rng.standard_normal(m).astype(np.float32)
                attrs = {"strides": k}
                if out_shape:
                    attrs["output_shape"] = [s * kk for s, kk in zip(spatial, k)]
                node = h.make_node("ConvTranspose", ["x", "w"] + (["b"] if bias else []),
                                   ["y"], **attrs)
                inits = [nh.from_array(w, "w")] + ([nh.from_array(b, "b")] if bias else [])
                graph = h.make_graph([node], "deconv_blocks",
                                     [tensor("x", T.FLOAT, ["n", c] + spatial)],
                                     [tensor("y", T.FLOAT, None)], inits)
                model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
                tag = "deconv_blocks%d" % i
                mlir = kt.kilnc(self.save_model(model, tag + ".onnx"), "--emit=mlir",
                                "-o", "-").stdout
                ones = "x".join(["1"] * len(k))
                # The conv's weight (lowered): M * K1 * .. * Kr by C by 1s.
                self.assertIn("tensor<%dx%dx%sxf32>) outs(" % (
                    m * int(np.prod(k)), c, ones), mlir)
                self.assertIn('kiln.conv = "gemm"', mlir)
                artifact = self.compiled(model, tag)
                for n in (1, 3):
                    x = rng.standard_normal((n, c) + tuple(spatial)).astype(np.float32)
                    want = convs[len(k)](torch.from_numpy(x), torch.from_numpy(w),
                                         torch.from_numpy(b) if bias else None,
                                         stride=k).numpy()
                    (got,) = self.run_at(artifact, "%s_%d" % (tag, n), [x])
                    self.assertEqual(got.shape, want.shape)
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def test_conv_transpose_edges(self):
        """output_padding not below the stride (allowed when below the
        dilation), against torch; auto_pad SAME with a negative begin pad,
        against ONNX's reference evaluator."""
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h
        rng = np.random.default_rng(9)
        m = kt.onnx_model(
            [h.make_node("ConvTranspose", ["x", "w"], ["y"], dilations=[2, 2],
                         output_padding=[1, 1])],
            [tensor("x", T.FLOAT, ["n", "c", "h", "w"]),
             tensor("w", T.FLOAT, ["c", "m", "kh", "kw"])],
            [tensor("y", T.FLOAT, None)], 17)
        artifact = self.compiled(m, "deconv_pad")
        x = rng.standard_normal((1, 1, 2, 2)).astype(np.float32)
        w = rng.standard_normal((1, 1, 2, 2)).astype(np.float32)
        (got,) = self.run_at(artifact, "deconv_pad", [x, w])
        want = torch.nn.functional.conv_transpose2d(
            torch.from_numpy(x), torch.from_numpy(w), output_padding=1,
            dilation=2).numpy()
        self.assertEqual(got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        for mode in ("SAME_UPPER", "SAME_LOWER"):
            with self.subTest(auto_pad=mode):
                m = kt.onnx_model(
                    [h.make_node("ConvTranspose", ["x", "w"], ["y"],
                                 strides=[3], auto_pad=mode)],
                    [tensor("x", T.FLOAT, ["n", "c", "d"]),
                     tensor("w", T.FLOAT, ["c", "m", "k"])],
                    [tensor("y", T.FLOAT, None)], 17)
                artifact = self.compiled(m, "deconv_" + mode)
                x = rng.standard_normal((1, 2, 4)).astype(np.float32)
                w = rng.standard_normal((2, 3, 1)).astype(np.float32)
                (got,) = self.run_at(artifact, "deconv_" + mode, [x, w])
                # onnxruntime clamps the negative total pad to 0 and gives
                # 10 positions; ONNX's spec and reference give D * s = 12.
                from onnx.reference import ReferenceEvaluator
                (want,) = ReferenceEvaluator(m).run(None, {"x": x, "w": w})
                self.assertEqual(got.shape, want.shape)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    def test_pixel_shuffle_both_ways(self):
        torch = kt.import_or_skip("torch")
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model(
            [h.make_node("DepthToSpace", ["x"], ["up"], blocksize=2, mode="CRD"),
             h.make_node("SpaceToDepth", ["up"], ["down"], blocksize=2)],
            [tensor("x", T.FLOAT, ["n", "c", "h", "w"])],
            [tensor("up", T.FLOAT, None), tensor("down", T.FLOAT, None)], 13)
        artifact = self.compiled(m, "shuffle")
        rng = np.random.default_rng(6)
        for shape in ((1, 4, 2, 3), (2, 8, 3, 1)):
            x = rng.standard_normal(shape).astype(np.float32)
            up, down = self.run_at(artifact, "shuffle_%d" % shape[0], [x])
            want_up = torch.nn.functional.pixel_shuffle(torch.from_numpy(x), 2)
            np.testing.assert_array_equal(up, want_up.numpy())
            # SpaceToDepth is DCR: the block offsets lead the channels.
            n, c, hh, ww = want_up.shape
            want_down = want_up.numpy().reshape(n, c, hh // 2, 2, ww // 2, 2) \
                .transpose(0, 3, 5, 1, 2, 4).reshape(n, c * 4, hh // 2, ww // 2)
            np.testing.assert_array_equal(down, want_down)

    def test_slice_with_specs_of_run_time_length(self):
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model(
            [h.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
            [tensor("x", T.FLOAT, [4, 5, 6])] +
            [tensor(n, T.INT64, ["k"]) for n in ("starts", "ends", "axes", "steps")],
            [tensor("y", T.FLOAT, None)], 13)
        artifact = self.compiled(m, "slice")
        x = np.arange(120, dtype=np.float32).reshape(4, 5, 6)
        cases = [([1], [3], [0], [1], (slice(1, 3),)),
                 ([-1, 0], [-6, 100], [2, 1], [-2, 2],
                  (slice(None), slice(0, None, 2), slice(-1, -6, -2))),
                 ([0, 0, 1], [1, 5, 6], [0, 1, 2], [1, 1, 5],
                  (slice(0, 1), slice(0, 5), slice(1, 6, 5)))]
        for i, (s, e, a, t, index) in enumerate(cases):
            with self.subTest(length=len(s)):
                (got,) = self.run_at(artifact, "slice_%d" % i,
                                     [x] + [np.array(v, np.int64) for v in (s, e, a, t)])
                np.testing.assert_array_equal(got, x[index])

    def test_pad_with_axes_of_run_time_length(self):
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model(
            [h.make_node("Pad", ["x", "pads", "value", "axes"], ["y"])],
            [tensor("x", T.FLOAT, [2, 3, 4]), tensor("pads", T.INT64, ["p"]),
             tensor("value", T.FLOAT, []), tensor("axes", T.INT64, ["a"])],
            [tensor("y", T.FLOAT, None)], 18)
        artifact = self.compiled(m, "pad")
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        cases = [([1, 2], [-1], ((0, 0), (0, 0), (1, 2))),
                 ([0, 1, 2, 0], [2, 0], ((1, 0), (0, 0), (0, 2))),
                 ([1, 0, 1, 1, 2, 0], [0, 1, 2], ((1, 1), (0, 2), (1, 0)))]
        for i, (pads, axes, widths) in enumerate(cases):
            with self.subTest(axes=axes):
                (got,) = self.run_at(artifact, "pad_%d" % i,
                                     [x, np.array(pads, np.int64),
                                      np.array(-1.5, np.float32),
                                      np.array(axes, np.int64)])
                np.testing.assert_array_equal(
                    got, np.pad(x, widths, constant_values=-1.5))

    def test_reshape_allowzero_at_run_time(self):
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model(
            [h.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1)],
            [tensor("x", T.FLOAT, ["a", "b"]), tensor("shape", T.INT64, [3])],
            [tensor("y", T.FLOAT, None)], 14)
        artifact = self.compiled(m, "allowzero")
        for i, (x_shape, shape) in enumerate((((0, 6), [3, 0, 2]), ((2, 6), [3, -1, 2]))):
            x = np.ones(x_shape, np.float32)
            (got,) = self.run_at(artifact, "allowzero_%d" % i,
                                 [x, np.array(shape, np.int64)])
            self.assertEqual(got.shape, x.reshape(shape).shape)


if __name__ == "__main__":
    unittest.main()
