"""Bad input must give a clear error (exit code 1, a message on stderr that
says what is wrong) and never a crash: unsupported models, files that are not
models, damaged artifacts, and inputs that do not fit the model."""

import json
import os
import re
import struct
import unittest
import zlib

import numpy as np

import kiln_testing as kt

# The .kiln layout (runtime/Artifact.h): magic, u32 version, u32 manifest
# size, u32 manifest CRC-32, JSON manifest, 64-byte aligned sections.
MAGIC = b"KILNART\0"
HEADER = 20


def parse_artifact(data):
    """(manifest dict, {section name: (offset, size)}) of a valid artifact."""
    assert data[:8] == MAGIC, "bad magic"
    size = struct.unpack_from("<I", data, 12)[0]
    manifest = json.loads(data[HEADER:HEADER + size])
    sections = {s["name"]: (s["offset"], s["size"]) for s in manifest["sections"]}
    return manifest, sections


def rewrite_manifest(data, edit):
    """Applies edit(manifest) and stores the result with a correct checksum,
    keeping every offset: the new JSON must not be longer than the old (it is
    written compactly and padded with spaces). None if it does not fit."""
    size = struct.unpack_from("<I", data, 12)[0]
    manifest = json.loads(data[HEADER:HEADER + size])
    edit(manifest)
    text = json.dumps(manifest, separators=(",", ":")).encode()
    if len(text) > size:
        return None
    text += b" " * (size - len(text))
    out = bytearray(data)
    out[HEADER:HEADER + size] = text
    struct.pack_into("<I", out, 16, zlib.crc32(text) & 0xFFFFFFFF)
    return bytes(out)


def onnx_model(nodes, inputs, outputs, initializers=(), opset=17):
    from onnx import helper as h
    graph = h.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


def tensor(name, shape, elem=None):
    from onnx import TensorProto, helper as h
    return h.make_tensor_value_info(name, elem or TensorProto.FLOAT, shape)


class CompileFailureTest(kt.KilnTestCase):
    """compile_fails for the classes below."""

    def compile_fails(self, model, name, *expected, extra=(), case_sensitive=True):
        path = self.save_model(model, name + ".onnx")
        out = self.path(name + ".kiln")
        proc = kt.kilnc(path, "-o", out, *extra)
        kt.assert_clean_failure(self, proc, *expected, case_sensitive=case_sensitive)
        self.assertFalse(os.path.exists(out), "kilnc wrote an artifact anyway")
        return proc


class UnsupportedModelTest(CompileFailureTest):
    """kilnc on valid ONNX models it cannot compile."""

    def test_two_unsupported_ops_are_both_named(self):
        from onnx import helper as h, numpy_helper as nh
        tfidf = h.make_node("TfIdfVectorizer", ["x"], ["c"], name="tfidf_1",
                            max_gram_length=1, max_skip_count=0, min_gram_length=1,
                            mode="TF", ngram_counts=[0], ngram_indexes=[0],
                            pool_int64s=[1])
        model = onnx_model(
            [tfidf, h.make_node("ImageDecoder", ["c"], ["p"], name="decoder_1"),
             h.make_node("Relu", ["p"], ["y"], name="relu_1")],
            [tensor("x", [1, 1, 6, 6])], [tensor("y", [1, 1, 2, 2])],
            [nh.from_array(np.ones((1, 1, 3, 3), np.float32), "w")], opset=20)
        proc = self.compile_fails(model, "two_unsupported",
                                  "tfidf_1", "decoder_1", "TfIdfVectorizer",
                                  "ImageDecoder")
        # The supported op is not blamed.
        for line in proc.stderr.splitlines():
            if "unsupported" in line.lower() or "not supported" in line.lower():
                self.assertNotIn("Relu", line, kt.describe(proc))
                self.assertNotIn("relu_1", line, kt.describe(proc))

    def test_unnamed_unsupported_node_still_identified(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("Relu", ["x"], ["r"]),
                            h.make_node("ImageDecoder", ["r"], ["y"])],
                           [tensor("x", [2, 3])], [tensor("y", [2, 3])], opset=20)
        self.compile_fails(model, "unnamed_unsupported", "ImageDecoder")

    def test_custom_domain_op(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("FusedGemm", ["x", "x"], ["y"], name="fused_1",
                                        domain="com.microsoft")],
                           [tensor("x", [2, 2])], [tensor("y", [2, 2])])
        model.opset_import.append(h.make_opsetid("com.microsoft", 1))
        self.compile_fails(model, "custom_domain", "FusedGemm")

    def test_unsupported_element_type(self):
        from onnx import TensorProto, helper as h
        # float4e2m1 has no MLIR 19 type (bfloat16 and float8 are supported).
        model = onnx_model([h.make_node("Identity", ["x"], ["y"])],
                           [tensor("x", [4], TensorProto.FLOAT4E2M1)],
                           [tensor("y", [4], TensorProto.FLOAT4E2M1)])
        self.compile_fails(model, "float4_input", "float4e2m1", "element type",
                           case_sensitive=False)

    def test_float_only_op_on_unsigned(self):
        # Unsigned integers are supported, but Sqrt is not defined on them.
        from onnx import TensorProto, helper as h
        model = onnx_model([h.make_node("Sqrt", ["x"], ["y"])],
                           [tensor("x", [3], TensorProto.UINT16)],
                           [tensor("y", [3], TensorProto.UINT16)])
        self.compile_fails(model, "sqrt_uint16", "kiln.sqrt", "floating-point",
                           "ui16")

    def test_bitshift_bad_direction(self):
        from onnx import TensorProto, helper as h
        model = onnx_model([h.make_node("BitShift", ["x", "x"], ["y"],
                                        direction="UP")],
                           [tensor("x", [3], TensorProto.UINT8)],
                           [tensor("y", [3], TensorProto.UINT8)])
        self.compile_fails(model, "bitshift_up", "BitShift", "LEFT or RIGHT",
                           "'UP'")

    def test_sequence_input(self):
        from onnx import TensorProto, helper as h
        seq = h.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2])
        model = onnx_model([h.make_node("Identity", ["s"], ["y"])], [seq],
                           [h.make_tensor_sequence_value_info("y", TensorProto.FLOAT, [2])],
                           opset=16)
        self.compile_fails(model, "sequence_input", "sequence", case_sensitive=False)

    def test_undefined_node_input(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("Add", ["x", "ghost_value"], ["y"])],
                           [tensor("x", [2])], [tensor("y", [2])])
        self.compile_fails(model, "undefined_input", "ghost_value")

    def test_bad_gelu_attribute(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("Gelu", ["x"], ["y"], approximate="bogus_mode")],
                           [tensor("x", [2])], [tensor("y", [2])], opset=20)
        self.compile_fails(model, "bad_gelu", "bogus_mode")

    def test_incompatible_broadcast_shapes(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("Add", ["x", "z"], ["y"], name="add_bad")],
                           [tensor("x", [2, 3]), tensor("z", [4])], [tensor("y", [2, 3])])
        self.compile_fails(model, "bad_broadcast", ("broadcast", "incompatible", "mismatch"),
                           "[2,3]", "[4]", case_sensitive=False)

    def test_matmul_inner_dims_mismatch(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("MatMul", ["a", "b"], ["y"], name="mm_bad")],
                           [tensor("a", [2, 3]), tensor("b", [4, 5])], [tensor("y", [2, 5])])
        self.compile_fails(model, "bad_matmul", "[2,3]", "[4,5]")

    def test_symbolic_dims_that_disagree_at_run_time(self):
        # x and y share the symbolic dim N; given different sizes for it,
        # kiln-run names the step, the input shapes, and the node.
        from onnx import helper as h
        model = onnx_model([h.make_node("Add", ["x", "y"], ["z"], name="the_add")],
                           [tensor("x", ["N", 4]), tensor("y", ["N", 4])],
                           [tensor("z", ["N", 4])])
        path = self.path("symbolic_add.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        artifact = self.path("symbolic_add.kiln")
        kt.assert_success(self, kt.kilnc(path, "-o", artifact))
        x = self.save_npy(np.ones((2, 4), np.float32), "x2.npy")
        y = self.save_npy(np.ones((3, 4), np.float32), "y3.npy")
        proc = kt.kiln_run(artifact, x, y)
        kt.assert_clean_failure(self, proc, "f32[2,4], f32[3,4]", "the_add", "do not broadcast")
        (z,), _ = self.run_artifact(artifact, [np.ones((3, 4), np.float32),
                                               np.full((3, 4), 2, np.float32)])
        np.testing.assert_array_equal(z, np.full((3, 4), 3, np.float32))
        # A symbolic dim that is 1 at run time broadcasts, as numpy does.
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        y = np.arange(4, dtype=np.float32).reshape(1, 4)
        (z,), _ = self.run_artifact(artifact, [x, y], "broadcast")
        np.testing.assert_array_equal(z, x + y)

    def test_kernels_sharing_code_keep_their_own_node_in_errors(self):
        # Two matmul + add blocks compile to the same code: kilnc compiles it
        # and its dims function once and both steps call them, but each step
        # lists its own nodes for the dims function's messages, so sizes
        # that disagree in the second block name the second block.
        from onnx import helper as h, numpy_helper
        rng = np.random.default_rng(5)
        w1, w2 = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
        model = onnx_model(
            [h.make_node("MatMul", ["a", "w1"], ["s1"], name="first_mm"),
             h.make_node("Add", ["s1", "b"], ["t1"], name="first_add"),
             h.make_node("MatMul", ["t1", "w2"], ["s2"], name="second_mm"),
             h.make_node("Add", ["s2", "c"], ["t2"], name="second_add")],
            [tensor("a", ["N", 4]), tensor("b", ["N", 4]), tensor("c", ["M", 4])],
            [tensor("t2", ["N", 4])])
        model.graph.initializer.extend([numpy_helper.from_array(w1, "w1"),
                                        numpy_helper.from_array(w2, "w2")])
        path = self.path("shared_code.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        artifact = self.path("shared_code.kiln")
        kt.assert_success(self, kt.kilnc(path, "-o", artifact))
        with open(artifact, "rb") as f:
            manifest, _ = parse_artifact(f.read())
        steps = [s for s in manifest["steps"] if "kernel" in s]
        self.assertEqual([s["kernel"] for s in steps], ["kiln_k0", "kiln_k0"])
        self.assertEqual([s["dims"] for s in steps], ["kiln_k0_dims", "kiln_k0_dims"])
        self.assertEqual([s["dims_nodes"] for s in steps], [["first_add"], ["second_add"]])
        a, b = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
        c = rng.standard_normal((3, 4)).astype(np.float32)
        (t2,), _ = self.run_artifact(artifact, [a, b, c])
        np.testing.assert_allclose(t2, (a @ w1 + b) @ w2 + c, rtol=1e-5, atol=1e-5)
        files = [self.save_npy(v, n) for v, n in ((a, "a.npy"), (b, "b.npy"))]
        c2 = self.save_npy(np.ones((2, 4), np.float32), "c2.npy")
        proc = kt.kiln_run(artifact, *files, c2)
        kt.assert_clean_failure(self, proc, "second_add", "do not broadcast")
        self.assertNotIn("first_add", proc.stderr)

    def test_cpu_kernels_do_not_borrow_a_cuda_kernels_symbol(self):
        # Data parallel over cuda:0 and cpu gives each replica the same
        # kernels; the cpu replica's must keep C++ functions of their own,
        # not the cuda kernels' twins, whose steps the cuda backend
        # describes (a cpu step naming one was refused at load). Without a
        # GPU the cuda role runs its twins on the cpu.
        from onnx import helper as h, numpy_helper
        rng = np.random.default_rng(6)
        w = rng.standard_normal((4, 4)).astype(np.float32)
        model = onnx_model(
            [h.make_node("MatMul", ["a", "w"], ["s"], name="mm"),
             h.make_node("Relu", ["s"], ["y"], name="relu")],
            [tensor("a", ["N", 4])], [tensor("y", ["N", 4])])
        model.graph.initializer.append(numpy_helper.from_array(w, "w"))
        path = self.path("replicas.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        artifact = self.path("replicas.kiln")
        kt.assert_success(self, kt.kilnc(path, "-o", artifact, "--input-shape", "a=4x4",
                                         "--devices", "cuda:0,cpu", "--placement=data:2"))
        with open(artifact, "rb") as f:
            manifest, _ = parse_artifact(f.read())
        kinds = {}  # the kinds of device the steps naming each kernel run on
        for step in manifest["steps"]:
            if "kernel" in step:
                kind = manifest["devices"][step["device"]]["kind"]
                kinds.setdefault(step["kernel"], set()).add(kind)
        self.assertTrue(all(len(k) == 1 for k in kinds.values()), kinds)
        self.assertIn({"cpu"}, kinds.values())
        a = rng.standard_normal((4, 4)).astype(np.float32)
        (y,), _ = self.run_artifact(artifact, [a])
        np.testing.assert_allclose(y, np.maximum(a @ w, 0), rtol=1e-5, atol=1e-6)

    def test_bad_input_shape_options(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("Relu", ["x"], ["y"])],
                           [tensor("x", ["N", 3])], [tensor("y", ["N", 3])])
        for option, expected in [("x=abc", ["x=abc"]), ("nonsense", ["nonsense"]),
                                 ("x=-1x3", ["x=-1x3"]), ("x=2x3x4", ["rank"]),
                                 ("nosuchinput=2x3", ["nosuchinput"]),
                                 # The declared dim 3 contradicts the given 5:
                                 # the message must show the given shape.
                                 ("x=2x5", ["2x5"])]:
            with self.subTest(option=option):
                self.compile_fails(model, "bad_shape_option", *expected,
                                   extra=("--input-shape", option), case_sensitive=False)

    def test_unwritable_output_path(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("Relu", ["x"], ["y"])],
                           [tensor("x", [2])], [tensor("y", [2])])
        path = self.save_model(model, "relu.onnx")
        out = self.path("no", "such", "dir", "out.kiln")
        proc = kt.kilnc(path, "-o", out)
        kt.assert_clean_failure(self, proc, out)


class InvalidModelTest(CompileFailureTest):
    """kilnc on models that break the ONNX rules (those onnx.checker and
    onnxruntime enforce): each problem is an error naming the node and the
    attribute or opset concerned, all of them listed."""

    def relu_model(self, opsets=(("", 17),), **attributes):
        from onnx import helper as h
        graph = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu_1",
                                          **attributes)],
                             "g", [tensor("x", [2])], [tensor("y", [2])])
        model = h.make_model(graph, opset_imports=[h.make_opsetid(d, v)
                                                   for d, v in opsets])
        model.ir_version = 10
        return model

    def compiles(self, model, name):
        path = self.save_model(model, name + ".onnx")
        proc = kt.kilnc(path, "--emit=mlir", "-o", self.path(name + ".mlir"))
        kt.assert_success(self, proc)

    def test_no_opset_import(self):
        proc = self.compile_fails(self.relu_model(opsets=()), "no_opset",
                                  "empty opset_import", "relu_1", "'ai.onnx'")
        self.assertIn("node 'relu_1': error:", proc.stderr)

    def test_opset_newer_than_kiln_knows(self):
        self.compile_fails(self.relu_model(opsets=(("", 99),)), "opset_99",
                           "opset 99", "'ai.onnx'", "newer than the newest kiln knows")

    def test_opset_listed_twice(self):
        # "" and "ai.onnx" name the same domain.
        self.compile_fails(self.relu_model(opsets=(("", 17), ("ai.onnx", 18))),
                           "opset_twice", "'ai.onnx' twice", "17", "18")

    def test_ir_version(self):
        model = self.relu_model()
        model.ir_version = 0
        self.compile_fails(model, "no_ir_version", "no ir_version")
        model.ir_version = 99
        self.compile_fails(model, "ir_version_99", "IR version 99", "newer")

    def test_two_nodes_write_one_output(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("Relu", ["x"], ["y"], name="relu_1"),
                            h.make_node("Neg", ["x"], ["y"], name="neg_1")],
                           [tensor("x", [2])], [tensor("y", [2])])
        proc = self.compile_fails(model, "output_twice", "node 'neg_1'", "output 'y'",
                                  "already defined by node 'relu_1'")
        self.assertNotIn("node 'relu_1': error", proc.stderr)

    def test_output_shadows_input_and_initializer(self):
        from onnx import helper as h, numpy_helper as nh
        model = onnx_model([h.make_node("Relu", ["x"], ["x"], name="over_input"),
                            h.make_node("Neg", ["w"], ["w"], name="over_weight"),
                            h.make_node("Add", ["x", "w"], ["y"], name="add_1")],
                           [tensor("x", [2])], [tensor("y", [2])],
                           [nh.from_array(np.ones(2, np.float32), "w")])
        self.compile_fails(model, "shadowing",
                           "node 'over_input': error: output 'x' is already a graph input",
                           "node 'over_weight': error: output 'w' is already an initializer")

    def test_subgraph_output_shadows_outer_value(self):
        from onnx import TensorProto, helper as h
        def branch(op):
            return h.make_graph([h.make_node(op, ["x"], ["x"], name=op.lower() + "_in_branch")],
                                op, [], [tensor("x", [2])])
        model = onnx_model([h.make_node("If", ["c"], ["y"], name="if_1",
                                        then_branch=branch("Relu"),
                                        else_branch=branch("Neg"))],
                           [tensor("c", [], TensorProto.BOOL), tensor("x", [2])],
                           [tensor("y", [2])])
        self.compile_fails(model, "subgraph_shadowing", "node 'relu_in_branch'",
                           "node 'neg_in_branch'", "output 'x' is already a graph input")

    def test_attribute_the_op_does_not_define(self):
        self.compile_fails(self.relu_model(alpha=0.5), "relu_alpha", "node 'relu_1'",
                           "attribute 'alpha' is not defined for op 'Relu' in opset 17")

    def test_attribute_of_a_newer_opset(self):
        # Split's num_outputs appeared in opset 18.
        from onnx import helper as h
        def split_model(opset):
            return onnx_model([h.make_node("Split", ["x"], ["a", "b"], name="split_1",
                                           axis=0, num_outputs=2)],
                              [tensor("x", [4])], [tensor("a", [2]), tensor("b", [2])],
                              opset=opset)
        self.compile_fails(split_model(17), "split_17", "node 'split_1'",
                           "attribute 'num_outputs'", "opset 17", "axis")
        self.compiles(split_model(18), "split_18")

    def test_op_of_a_newer_opset(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("Gelu", ["x"], ["y"], name="gelu_1")],
                           [tensor("x", [2])], [tensor("y", [2])], opset=17)
        self.compile_fails(model, "gelu_17", "node 'gelu_1'", "'Gelu'",
                           "not defined in opset 17", "opset 20")

    def test_deprecated_op(self):
        from onnx import helper as h, numpy_helper as nh
        model = onnx_model([h.make_node("Upsample", ["x", "s"], ["y"], name="up_1")],
                           [tensor("x", [1, 1, 2, 2])], [tensor("y", [1, 1, 4, 4])],
                           [nh.from_array(np.array([1, 1, 2, 2], np.float32), "s")],
                           opset=10)
        self.compile_fails(model, "upsample_10", "node 'up_1'", "'Upsample'",
                           "deprecated in opset 10")

    def test_attribute_types(self):
        from onnx import AttributeProto, helper as h
        node = h.make_node("LeakyRelu", ["x"], ["y"], name="leaky_1", alpha=1)
        twice = h.make_node("Elu", ["y"], ["z"], name="elu_1", alpha=1.0)
        twice.attribute.append(h.make_attribute("alpha", 2.0))
        untyped = h.make_node("Selu", ["z"], ["w"], name="selu_1", gamma=1.0)
        untyped.attribute[0].type = AttributeProto.UNDEFINED
        mixed = h.make_node("Celu", ["w"], ["v"], name="celu_1", alpha=1.0)
        mixed.attribute[0].i = 3
        model = onnx_model([node, twice, untyped, mixed], [tensor("x", [2])],
                           [tensor("v", [2])])
        self.compile_fails(model, "attribute_types",
                           "node 'leaky_1': error: attribute 'alpha' of op 'LeakyRelu' is INT, must be FLOAT",
                           "node 'elu_1': error: attribute 'alpha' is given more than once",
                           "node 'selu_1': error: attribute 'gamma' has no type",
                           "node 'celu_1': error: attribute 'alpha' holds more than one value")

    def test_required_attribute_missing(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("Cast", ["x"], ["y"], name="cast_1")],
                           [tensor("x", [2])], [tensor("y", [2])])
        self.compile_fails(model, "cast_without_to", "node 'cast_1'",
                           "required attribute 'to' of op 'Cast' is missing")

    def test_input_counts(self):
        from onnx import helper as h, numpy_helper as nh
        model = onnx_model([h.make_node("Clip", ["x", "", "x", "x"], ["c"], name="clip_1"),
                            h.make_node("Conv", ["c", ""], ["y"], name="conv_1")],
                           [tensor("x", [1, 1, 3, 3])], [tensor("y", [1, 1, 3, 3])],
                           [nh.from_array(np.ones((1, 1, 1, 1), np.float32), "w")])
        self.compile_fails(model, "input_counts",
                           "node 'clip_1': error: op 'Clip' takes 1 to 3 inputs in opset 17, the node has 4",
                           "node 'conv_1': error: input 1 ('W') of op 'Conv' is required")

    def test_domain_not_imported(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("Binarizer", ["x"], ["t"], name="bin_1",
                                        domain="ai.onnx.ml"),
                            h.make_node("Binarizer", ["t"], ["y"], name="bin_2",
                                        domain="ai.onnx.ml")],
                           [tensor("x", [2])], [tensor("y", [2])])
        self.compile_fails(model, "ml_not_imported", "node 'bin_1'", "'ai.onnx.ml'",
                           "opset_import does not list", "1 more node")

    def test_custom_domain_attributes_pass(self):
        # No schema for com.microsoft: its ops are unsupported, not invalid.
        from onnx import helper as h
        model = onnx_model([h.make_node("FusedGemm", ["x", "x"], ["y"], name="fused_1",
                                        domain="com.microsoft", activation="Relu",
                                        anything=3)],
                           [tensor("x", [2, 2])], [tensor("y", [2, 2])])
        model.opset_import.append(h.make_opsetid("com.microsoft", 1))
        proc = self.compile_fails(model, "custom_attributes", "unsupported ONNX op")
        self.assertNotIn("attribute '", proc.stderr)

    def test_names_defined_once_and_before_use(self):
        from onnx import helper as h, numpy_helper as nh
        w = nh.from_array(np.ones(2, np.float32), "w")
        model = onnx_model([h.make_node("Relu", ["t"], ["y"], name="late_reader"),
                            h.make_node("Neg", ["x"], ["t"], name="writer")],
                           [tensor("x", [2]), tensor("x", [2])],
                           [tensor("y", [2]), tensor("never", [2])], [w, w])
        self.compile_fails(model, "names",
                           "graph input 'x' is listed twice",
                           "initializer 'w' is defined twice",
                           "node 'late_reader': error: input 't' is not produced by any earlier node",
                           "graph output 'never' is never produced")

    def test_every_problem_is_listed(self):
        from onnx import helper as h
        model = onnx_model([h.make_node("Relu", ["x"], ["r"], name="relu_1", alpha=1.0),
                            h.make_node("Cast", ["r"], ["r"], name="cast_1"),
                            h.make_node("Gelu", ["r"], ["y"], name="gelu_1")],
                           [tensor("x", [2])], [tensor("y", [2])])
        proc = self.compile_fails(model, "three_problems", "relu_1", "cast_1", "gelu_1")
        self.assertEqual(proc.stderr.count("error:"), 4, kt.describe(proc))

    def test_negative_and_overflowing_sizes(self):
        # Declared sizes feed shape arithmetic everywhere: a negative dim, or
        # a tensor whose byte count overflows int64, is refused where it is
        # declared (onnx.checker accepts both), not wrapped into a small size.
        from onnx import TensorProto, helper as h, numpy_helper as nh
        identity = [h.make_node("Identity", ["x"], ["y"], name="id_1")]
        self.compile_fails(onnx_model(identity, [tensor("x", [-4])], [tensor("y", None)]),
                           "negative_input", "input 'x'", "negative dim (-4)")
        self.compile_fails(onnx_model(identity, [tensor("x", [2**31, 2**31])],
                                      [tensor("y", None)]),
                           "huge_input", "input 'x'", "2147483648x2147483648",
                           "more bytes than int64")
        # 2^32 x 2^32 elements wrap to 0, which the empty raw data would match.
        c = TensorProto(name="c", data_type=TensorProto.FLOAT, dims=[2**32, 2**32], raw_data=b"")
        add = [h.make_node("Add", ["x", "c"], ["y"], name="add_1")]
        self.compile_fails(onnx_model(add, [tensor("x", [2])], [tensor("y", None)], [c]),
                           "huge_initializer", "tensor 'c'", "more bytes than int64")
        c = TensorProto(name="c", data_type=TensorProto.FLOAT, dims=[-3], raw_data=b"")
        self.compile_fails(onnx_model(add, [tensor("x", [2])], [tensor("y", None)], [c]),
                           "negative_initializer", "tensor 'c'", "negative dim (-3)")
        expand = [h.make_node("Expand", ["x", "s"], ["y"], name="big_expand")]
        s = nh.from_array(np.array([2**40, 2**40, 2], np.int64), "s")
        self.compile_fails(onnx_model(expand, [tensor("x", [2])], [tensor("y", None)], [s]),
                           "huge_result", "big_expand", "output 0 of 'Expand'",
                           "more bytes than int64")

    def test_valid_models_with_lenient_attributes_compile(self):
        from onnx import helper as h, numpy_helper as nh
        # Attributes named "__..." are internal to tools; LayerNormalization
        # of opset 17 accepts any attribute (OpSchema::AllowUncheckedAttributes).
        self.compiles(self.relu_model(__exporter_note="kept"), "internal_attribute")
        model = onnx_model([h.make_node("LayerNormalization", ["x", "s"], ["y"],
                                        name="ln_1", axis=-1, legacy_flag=1)],
                           [tensor("x", [2, 4])], [tensor("y", [2, 4])],
                           [nh.from_array(np.ones(4, np.float32), "s")])
        self.compiles(model, "layernorm_extra_attribute")


class BadModelFileTest(kt.KilnTestCase):
    """kilnc on files that are not ONNX models."""

    GENERIC = ("not a valid", "parse", "malformed", "invalid", "corrupt", "truncated",
               "no graph", "empty")

    def compile_file(self, path):
        out = self.path(os.path.basename(path) + ".kiln")
        proc = kt.kilnc(path, "-o", out)
        self.assertFalse(os.path.exists(out), "kilnc wrote an artifact anyway")
        return proc

    def write(self, name, data):
        path = self.path(name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_random_bytes(self):
        rng = np.random.default_rng(2024)
        for size in (1, 100, 4096):
            with self.subTest(size=size):
                path = self.write("random%d.onnx" % size, rng.bytes(size))
                proc = self.compile_file(path)
                kt.assert_clean_failure(self, proc, os.path.basename(path), self.GENERIC)

    def test_empty_file(self):
        path = self.write("empty.onnx", b"")
        kt.assert_clean_failure(self, self.compile_file(path), "empty.onnx", self.GENERIC)

    def test_truncated_model(self):
        from onnx import helper as h, numpy_helper as nh
        model = onnx_model([h.make_node("MatMul", ["x", "w"], ["y"])],
                           [tensor("x", [2, 64])], [tensor("y", [2, 64])],
                           [nh.from_array(np.ones((64, 64), np.float32), "w")])
        data = model.SerializeToString()
        for cut in (len(data) // 2, len(data) - 1):
            with self.subTest(cut=cut):
                path = self.write("truncated%d.onnx" % cut, data[:cut])
                proc = self.compile_file(path)
                kt.assert_clean_failure(self, proc, "truncated%d.onnx" % cut, self.GENERIC)

    def test_missing_file(self):
        path = self.path("does_not_exist.onnx")
        kt.assert_clean_failure(self, self.compile_file(path), "does_not_exist.onnx",
                                ("no such file", "cannot open", "not found", "does not exist"))

    def test_directory(self):
        path = self.path("a_directory.onnx")
        os.mkdir(path)
        kt.assert_clean_failure(self, self.compile_file(path), "a_directory.onnx",
                                ("directory", "cannot read", "not a regular file",
                                 "not a valid"))

    def test_kiln_artifact_given_to_kilnc(self):
        path = self.write("looks_like.onnx", MAGIC + b"\x01\0\0\0" + b"\0" * 40)
        kt.assert_clean_failure(self, self.compile_file(path), "looks_like.onnx", self.GENERIC)


class ArtifactCorruptionTest(kt.KilnTestCase):
    """kiln-run on damaged .kiln files: every byte is checked."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        from onnx import helper as h, numpy_helper as nh
        rng = np.random.default_rng(5)
        cls.w = rng.standard_normal((3, 4)).astype(np.float32)
        cls.b = rng.standard_normal(4).astype(np.float32)
        cls.x = rng.standard_normal((2, 3)).astype(np.float32)
        model = onnx_model(
            [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "b"], ["s"]),
             h.make_node("Relu", ["s"], ["y"])],
            [tensor("x", [2, 3])], [tensor("y", [2, 4])],
            [nh.from_array(cls.w, "w"), nh.from_array(cls.b, "b")])
        cls.artifact, cls.compile_proc = cls.compile(cls.save_model(model, "small.onnx"),
                                                     "small.kiln")
        cls.data = None
        if cls.artifact:
            with open(cls.artifact, "rb") as f:
                cls.data = f.read()
        cls.x_file = cls.save_npy(cls.x, "x.npy")

    def setUp(self):
        kt.assert_success(self, self.compile_proc)

    def run_bytes(self, data, name):
        path = self.path(name)
        with open(path, "wb") as f:
            f.write(data)
        return kt.kiln_run(path, self.x_file)

    def test_intact_artifact_runs_correctly(self):
        outputs, _ = self.run_artifact(self.artifact, [self.x_file])
        expected = np.maximum(self.x @ self.w + self.b, 0)
        np.testing.assert_allclose(outputs[0], expected, rtol=1e-5, atol=1e-6)

    def test_layout(self):
        # The positions below rely on this layout; if it changes, fix them.
        manifest, sections = parse_artifact(self.data)
        self.assertEqual(struct.unpack_from("<I", self.data, 8)[0], 2)
        self.assertIn("code", sections)
        self.assertIn("weights", sections)
        self.assertGreaterEqual(sections["weights"][1], (12 + 4) * 4)
        end = max(o + s for o, s in sections.values())
        self.assertEqual(end, len(self.data))

    def test_truncated(self):
        n = len(self.data)
        for cut in (0, 10, HEADER, HEADER + 50, n // 2, n - 1):
            with self.subTest(length=cut):
                proc = self.run_bytes(self.data[:cut], "cut%d.kiln" % cut)
                if cut < HEADER:
                    expected = ("truncated", "bad magic", "not a kiln artifact", "too short",
                                "empty")
                else:
                    expected = "truncated"
                kt.assert_clean_failure(self, proc, "cut%d.kiln" % cut, expected)

    def test_bit_flips(self):
        manifest, sections = parse_artifact(self.data)
        msize = struct.unpack_from("<I", self.data, 12)[0]
        code_off, code_size = sections["code"]
        w_off, w_size = sections["weights"]
        bad_sum = ("corrupt", "checksum", "crc")
        positions = [
            ("magic", 0, ("bad magic", "not a kiln artifact")),
            ("magic_last", 7, ("bad magic", "not a kiln artifact")),
            ("version", 8, "version"),
            ("manifest_size", 12, bad_sum + ("truncated",)),
            ("manifest_size_high", 14, bad_sum + ("truncated",)),
            ("manifest_crc", 17, bad_sum),
            ("manifest_start", HEADER, bad_sum),
            ("manifest_middle", HEADER + msize // 2, bad_sum),
            ("manifest_end", HEADER + msize - 1, bad_sum),
            ("code_start", code_off, bad_sum + ("code",)),
            ("code_middle", code_off + code_size // 2, bad_sum + ("code",)),
            ("code_end", code_off + code_size - 1, bad_sum + ("code",)),
            ("weights_start", w_off, bad_sum + ("weights",)),
            ("weights_middle", w_off + w_size // 2, bad_sum + ("weights",)),
            ("last_byte", len(self.data) - 1, bad_sum),
        ]
        if code_off > HEADER + msize:  # alignment padding before the code
            positions.append(("padding", code_off - 1, bad_sum + ("padding",)))
        for label, pos, expected in positions:
            for mask in (0x01, 0x80):
                with self.subTest(where=label, byte=pos, mask=mask):
                    data = bytearray(self.data)
                    data[pos] ^= mask
                    proc = self.run_bytes(bytes(data), "flip_%s.kiln" % label)
                    kt.assert_clean_failure(self, proc, "flip_%s.kiln" % label, expected)
                    if "code" in label or "weights" in label:
                        # Says which part is damaged.
                        kt.assert_clean_failure(self, proc, label.split("_")[0])

    def test_trailing_bytes(self):
        for extra in (b"\0", b"junk" * 16):
            with self.subTest(extra=len(extra)):
                proc = self.run_bytes(self.data + extra, "trailing.kiln")
                kt.assert_clean_failure(self, proc, ("corrupt", "unexpected", "trailing"))

    def crafted(self, edit, name):
        data = rewrite_manifest(self.data, edit)
        if data is None:
            self.skipTest("edited manifest does not fit in place")
        return self.run_bytes(data, name)

    def test_manifest_checksum_is_verified(self):
        # Sanity check of rewrite_manifest: an unchanged manifest still runs.
        proc = self.crafted(lambda m: None, "rewritten.kiln")
        kt.assert_success(self, proc)

    def test_crafted_manifest_dynamic_dims_without_dims_function(self):
        # A kernel whose argument turns dynamic needs a dims function.
        def edit(m):
            m["values"][m["inputs"][0]["value"]]["shape"][0] = -1
        proc = self.crafted(edit, "dynamic_no_dims.kiln")
        kt.assert_clean_failure(self, proc, "dynamic arguments but no dims function")

    def test_crafted_manifest_dynamic_constant(self):
        def edit(m):
            constant = next(v for v in m["values"] if v["kind"] == "constant")
            constant["shape"][0] = -1
        proc = self.crafted(edit, "dynamic_constant.kiln")
        kt.assert_clean_failure(self, proc, "has a dynamic shape")

    def test_crafted_manifest_unknown_kernel(self):
        def edit(m):
            m["steps"][0]["kernel"] = "no_such_kernel_fn"
        proc = self.crafted(edit, "bad_kernel.kiln")
        kt.assert_clean_failure(self, proc, "no_such_kernel_fn")

    def test_crafted_manifest_constant_outside_weights(self):
        def edit(m):
            for v in m["values"]:
                if v.get("kind") == "constant":
                    v["offset"] = 1 << 20
        proc = self.crafted(edit, "bad_const.kiln")
        kt.assert_clean_failure(self, proc, "weights")

    def test_crafted_manifest_value_out_of_range(self):
        def edit(m):
            m["steps"][0]["args"][0] = 999
        proc = self.crafted(edit, "bad_value.kiln")
        kt.assert_clean_failure(self, proc, "999")

    def test_crafted_manifest_missing_key(self):
        def edit(m):
            del m["steps"]
        proc = self.crafted(edit, "no_steps.kiln")
        kt.assert_clean_failure(self, proc, ("manifest", "steps"))

    def test_onnx_model_given_to_kiln_run(self):
        proc = kt.kiln_run(self.path("small.onnx"), self.x_file)
        kt.assert_clean_failure(self, proc, "small.onnx", ("bad magic", "not a kiln artifact"))

    def test_missing_artifact(self):
        proc = kt.kiln_run(self.path("nope.kiln"), self.x_file)
        kt.assert_clean_failure(self, proc, "nope.kiln",
                                ("no such file", "cannot open", "not found", "does not exist"))

    def test_directory_as_artifact(self):
        path = self.path("dir.kiln")
        os.makedirs(path, exist_ok=True)
        proc = kt.kiln_run(path, self.x_file)
        kt.assert_clean_failure(self, proc, "dir.kiln",
                                ("directory", "not a regular file", "cannot read"))
        self.assertNotIn("out of memory", proc.stderr, kt.describe(proc))


class InputValidationTest(kt.KilnTestCase):
    """kiln-run with inputs that do not fit the model: y = a - b, a and b
    f32[2,3] (the order matters, so swapped inputs show in the result)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        from onnx import helper as h
        model = onnx_model([h.make_node("Sub", ["a", "b"], ["y"])],
                           [tensor("a", [2, 3]), tensor("b", [2, 3])], [tensor("y", [2, 3])])
        cls.artifact, cls.compile_proc = cls.compile(cls.save_model(model, "sub.onnx"),
                                                     "sub.kiln")
        rng = np.random.default_rng(9)
        cls.a = rng.standard_normal((2, 3)).astype(np.float32)
        cls.b = rng.standard_normal((2, 3)).astype(np.float32)
        cls.a_file = cls.save_npy(cls.a, "a.npy")
        cls.b_file = cls.save_npy(cls.b, "b.npy")

    def setUp(self):
        kt.assert_success(self, self.compile_proc)

    def run_ok(self, *args):
        outputs, proc = self.run_artifact(self.artifact, list(args))
        self.assertEqual(len(outputs), 1)
        np.testing.assert_allclose(outputs[0], self.a - self.b, rtol=1e-6, atol=1e-7)
        return proc

    def run_bad(self, *args, expected=()):
        proc = kt.kiln_run(self.artifact, *args)
        kt.assert_clean_failure(self, proc, *expected)
        return proc

    # -- inputs that are fine --------------------------------------------

    def test_positional_inputs(self):
        self.run_ok(self.a_file, self.b_file)

    def test_named_inputs_in_any_order(self):
        self.run_ok("b=" + self.b_file, "a=" + self.a_file)

    def test_named_and_positional_inputs(self):
        self.run_ok("b=" + self.b_file, self.a_file)

    def test_summary_line_names_the_output(self):
        proc = self.run_ok(self.a_file, self.b_file)
        self.assertRegex(proc.stdout, r"output_0 y f32\[2,3\]")

    def test_bench(self):
        proc = self.run_ok(self.a_file, self.b_file, "--bench", "3")
        self.assertRegex(proc.stdout, r"latency over 3 runs: median [0-9.]+ ms, min [0-9.]+ ms")

    def test_bench_versus(self):
        # --versus runs another artifact on the same inputs: the same model
        # compiled again gives bit-identical outputs, a + b differs from
        # a - b by ||2b|| / ||a - b||; then both are timed run by run.
        from onnx import helper as h
        add = onnx_model([h.make_node("Add", ["a", "b"], ["y"])],
                         [tensor("a", [2, 3]), tensor("b", [2, 3])], [tensor("y", [2, 3])])
        add_artifact, proc = self.compile(self.save_model(add, "add.onnx"), "add.kiln")
        kt.assert_success(self, proc)
        proc = self.run_ok(self.a_file, self.b_file, "--bench", "5", "--versus", self.artifact,
                           "--versus", add_artifact)
        self.assertIn("versus %s: outputs bit-identical" % self.artifact, proc.stdout)
        found = re.search(r"versus %s: outputs differ: largest rel L2 ([0-9.e+-]+) \(output_0\)"
                          % re.escape(add_artifact), proc.stdout)
        self.assertIsNotNone(found, kt.describe(proc))
        expected = np.linalg.norm(2 * self.b) / np.linalg.norm(self.a - self.b)
        self.assertAlmostEqual(float(found.group(1)) / expected, 1.0, places=2)
        for path in (self.artifact, add_artifact):
            self.assertRegex(proc.stdout, r"versus %s: median [0-9.]+ ms, min [0-9.]+ ms; "
                             r"run by run [0-9.]+x \(quartiles [0-9.]+-[0-9.]+\)" % re.escape(path))

    def test_versus_errors(self):
        from onnx import helper as h
        one = onnx_model([h.make_node("Relu", ["x"], ["y"])], [tensor("x", [4])],
                         [tensor("y", [4])])
        other, proc = self.compile(self.save_model(one, "relu.onnx"), "relu.kiln")
        kt.assert_success(self, proc)
        self.run_bad(self.a_file, self.b_file, "--versus", self.artifact,
                     expected=("--versus", "--bench"))
        self.run_bad(self.a_file, self.b_file, "--bench", "2", "--versus",
                     self.path("missing.kiln"), expected=("missing.kiln",))
        # The other artifact takes other inputs: named, with what it wants.
        self.run_bad(self.a_file, self.b_file, "--bench", "2", "--versus", other,
                     expected=("relu.kiln", "f32[4]"))

    # -- inputs that are not -----------------------------------------------

    def test_wrong_shape(self):
        bad = self.save_npy(np.zeros((3, 2), np.float32), "a_3x2.npy")
        proc = self.run_bad(bad, self.b_file, expected=("a_3x2.npy", "f32[2,3]", "[3,2]"))
        self.assertRegex(proc.stderr, r"\ba\b", "the input's name is not given")

    def test_wrong_rank(self):
        bad = self.save_npy(np.zeros(6, np.float32), "a_6.npy")
        self.run_bad(bad, self.b_file, expected=("a_6.npy", "f32[2,3]", "[6]"))

    def test_scalar_instead_of_tensor(self):
        bad = self.save_npy(np.float32(1.0), "a_scalar.npy")
        self.run_bad(bad, self.b_file, expected=("a_scalar.npy", "f32[2,3]"))

    def test_wrong_dtype_float64(self):
        bad = self.save_npy(self.a.astype(np.float64), "a_f64.npy")
        self.run_bad(bad, self.b_file, expected=("a_f64.npy", "f32[2,3]",
                                                 ("f64", "float64", "double")))

    def test_wrong_dtype_int32(self):
        bad = self.save_npy(self.a.astype(np.int32), "a_i32.npy")
        self.run_bad(self.a_file, bad, expected=("a_i32.npy", "f32[2,3]", ("i32", "int32")))

    def test_too_few_inputs(self):
        for args in ((), (self.a_file,), ("b=" + self.b_file,)):
            with self.subTest(args=args):
                self.run_bad(*args, expected=("2", "f32[2,3]"))

    def test_too_many_inputs(self):
        self.run_bad(self.a_file, self.b_file, self.a_file, expected=("2", "3", "f32[2,3]"))

    def test_unknown_input_name(self):
        proc = self.run_bad("nosuchname=" + self.a_file, self.b_file,
                            expected=("nosuchname", "f32[2,3]"))
        # It lists the real input names.
        self.assertRegex(proc.stderr, r"\ba f32\[2,3\]", kt.describe(proc))
        self.assertRegex(proc.stderr, r"\bb f32\[2,3\]", kt.describe(proc))

    def test_input_named_twice(self):
        self.run_bad("a=" + self.a_file, "a=" + self.a_file,
                     expected=(("more than once", "twice", "duplicate"),))

    def test_missing_input_file(self):
        missing = self.path("missing_input.npy")
        self.run_bad(missing, self.b_file, expected=(
            "missing_input.npy", ("no such file", "cannot open", "not found", "does not exist")))

    def test_missing_input_file_by_name(self):
        missing = self.path("missing_named.npy")
        self.run_bad("b=" + missing, self.a_file, expected=("missing_named.npy",))

    def test_garbage_input_files(self):
        rng = np.random.default_rng(3)
        cases = {
            "empty.npy": b"",
            "random.npy": rng.bytes(200),
            "bad_header.npy": b"\x93NUMPY\x01\x00\x10\x00{'descr': 'x'  }\n",
            # A valid header whose data is cut short.
            "short_data.npy": None,
            "random.pb": rng.bytes(64),
        }
        import io
        buf = io.BytesIO()
        np.save(buf, self.a)
        cases["short_data.npy"] = buf.getvalue()[:-5]
        for name, data in cases.items():
            with self.subTest(file=name):
                path = self.path(name)
                with open(path, "wb") as f:
                    f.write(data)
                self.run_bad(path, self.b_file, expected=(name,))

    def test_fortran_order_input(self):
        # Either read correctly or refused with a message about the layout.
        path = self.path("a_fortran.npy")
        np.save(path, np.asfortranarray(self.a))
        proc = kt.kiln_run(self.artifact, path, self.b_file, "--output-dir", self.path("fo"))
        if proc.returncode == 0:
            np.testing.assert_allclose(np.load(self.path("fo", "output_0.npy")),
                                       self.a - self.b, rtol=1e-6, atol=1e-7)
        else:
            kt.assert_clean_failure(self, proc, "a_fortran.npy", "fortran")

    def test_output_dir_is_a_file(self):
        blocker = self.path("blocker")
        with open(blocker, "w") as f:
            f.write("x")
        self.run_bad(self.a_file, self.b_file, "--output-dir", blocker, expected=("blocker",))
        self.run_bad(self.a_file, self.b_file, "--output-dir", os.path.join(blocker, "sub"),
                     expected=("blocker",))

    def test_bad_options(self):
        for args, expected in [(("--bench", "zero"), "--bench"), (("--bench", "-3"), "--bench"),
                               (("--no-such-flag",), "--no-such-flag"),
                               (("--output-dir",), "--output-dir")]:
            with self.subTest(args=args):
                self.run_bad(self.a_file, self.b_file, *args, expected=(expected,))


if __name__ == "__main__":
    unittest.main()
