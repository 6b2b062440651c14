"""Values that are not tensors: sequences, optionals, and Loop unrolling.

kiln compiles a sequence input to a length fixed at compile time (kilnc
--sequence-length NAME=K), one tensor per element, and an optional input
given no value to nothing (--empty-optional NAME). kiln-run reads sequences
as folders of 0.npy, 1.npy, ... or ONNX SequenceProto .pb files and
optionals as OptionalProto .pb or .none files; it writes a sequence output
as a folder output_<i>/ and an optional output with no value as an empty
output_<i>.none.

References: onnxruntime for the sequence ops and Loop, numpy for
SplitToSequence with lengths read at run time and for the optional ops
(onnxruntime's Python API cannot feed an optional with no value).
"""

import os
import unittest

import numpy as np

import kiln_testing as kt


class SequenceTestCase(kt.KilnTestCase):
    def compile_ok(self, model, tag, *options):
        artifact, proc = self.compile(self.save_model(model, tag + ".onnx"),
                                      tag + ".kiln", *options)
        kt.assert_success(self, proc)
        return artifact

    def run_raw(self, artifact, args, tag):
        """Runs kiln-run with `args` as given; returns (output dir, proc)."""
        out_dir = self.path(tag + "_out")
        proc = kt.kiln_run(artifact, *args, "--output-dir", out_dir)
        kt.assert_success(self, proc)
        return out_dir, proc

    def save_folder(self, arrays, name):
        folder = self.path(name)
        os.makedirs(folder, exist_ok=True)
        for i, a in enumerate(arrays):
            np.save(os.path.join(folder, "%d.npy" % i), np.array(a, order="C"))
        return folder

    def save_proto(self, proto, name):
        path = self.path(name)
        with open(path, "wb") as f:
            f.write(proto.SerializeToString())
        return path

    def read_folder(self, folder):
        names = sorted(os.listdir(folder), key=lambda n: int(n.split(".")[0]))
        self.assertEqual(names, ["%d.npy" % i for i in range(len(names))])
        return [np.load(os.path.join(folder, n)) for n in names]


class SequenceOps(SequenceTestCase):
    def test_construct_at_erase_length_concat(self):
        """Sequences built inside the model; every output a tensor."""
        from onnx import TensorProto as T, helper as h
        m = kt.ort_model(
            [h.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             h.make_node("SequenceErase", ["s", "one"], ["s2"]),
             h.make_node("SequenceAt", ["s", "minus_one"], ["last"]),
             h.make_node("SequenceLength", ["s2"], ["n"]),
             h.make_node("ConcatFromSequence", ["s"], ["cat"], axis=1),
             h.make_node("ConcatFromSequence", ["s2"], ["stacked"], axis=0,
                         new_axis=1)],
            [h.make_tensor_value_info(n, T.FLOAT, [2, 3]) for n in "abc"],
            [h.make_tensor_value_info("last", T.FLOAT, [2, 3]),
             h.make_tensor_value_info("n", T.INT64, []),
             h.make_tensor_value_info("cat", T.FLOAT, [2, 9]),
             h.make_tensor_value_info("stacked", T.FLOAT, [2, 2, 3])], 17)
        m.graph.initializer.extend([
            h.make_tensor("one", T.INT64, [], [1]),
            h.make_tensor("minus_one", T.INT64, [], [-1])])
        rng = np.random.default_rng(5)
        feeds = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
        got = self.run_onnx(m, "construct", feeds)
        want = kt.onnxruntime_outputs(m, feeds)
        self.assertEqual(len(got), 4)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)

    def test_sequence_input_and_output_through_kiln_run(self):
        """A sequence in (folder and SequenceProto) and out (folder)."""
        from onnx import TensorProto as T, helper as h, numpy_helper as nh
        m = kt.ort_model(
            [h.make_node("SequenceInsert", ["s", "x", "pos"], ["grown"]),
             h.make_node("ConcatFromSequence", ["grown"], ["cat"], axis=0)],
            [h.make_tensor_sequence_value_info("s", T.FLOAT, None),
             h.make_tensor_value_info("x", T.FLOAT, [1, 4])],
            [h.make_tensor_sequence_value_info("grown", T.FLOAT, None),
             h.make_tensor_value_info("cat", T.FLOAT, None)], 17)
        m.graph.initializer.append(h.make_tensor("pos", T.INT64, [], [1]))
        artifact = self.compile_ok(m, "insert", "--sequence-length", "s=3",
                                   "--input-shape", "s=?x4")
        rng = np.random.default_rng(6)
        seq = [rng.standard_normal((n, 4)).astype(np.float32) for n in (2, 1, 3)]
        x = rng.standard_normal((1, 4)).astype(np.float32)
        want_seq, want_cat = kt.onnxruntime_outputs(m, [seq, x])
        x_path = self.save_npy(x, "insert_x.npy")
        inputs = {"folder": self.save_folder(seq, "seq_folder"),
                  "proto": self.save_proto(nh.from_list(seq, "s"), "seq.pb")}
        for how, path in inputs.items():
            with self.subTest(input=how):
                out_dir, proc = self.run_raw(artifact, ["s=" + path, x_path], how)
                got = self.read_folder(os.path.join(out_dir, "output_0"))
                self.assertEqual(len(got), 4)
                for g, w in zip(got, want_seq):
                    np.testing.assert_array_equal(g, w)
                np.testing.assert_array_equal(
                    np.load(os.path.join(out_dir, "output_1.npy")), want_cat)
                self.assertIn("output_0[3]", proc.stdout)

    def test_split_to_sequence_lengths_read_at_run_time(self):
        from onnx import TensorProto as T, helper as h
        m = kt.ort_model(
            [h.make_node("SplitToSequence", ["x", "lengths"], ["parts"], axis=1)],
            [h.make_tensor_value_info("x", T.FLOAT, [2, 7]),
             h.make_tensor_value_info("lengths", T.INT64, [3])],
            [h.make_tensor_sequence_value_info("parts", T.FLOAT, None)], 17)
        artifact = self.compile_ok(m, "split")
        x = np.arange(14, dtype=np.float32).reshape(2, 7)
        for lengths in ([1, 2, 4], [0, 7, 0], [3, 3, 1]):
            with self.subTest(lengths=lengths):
                tag = "split_%s" % "_".join(map(str, lengths))
                out_dir, _ = self.run_raw(
                    artifact, [self.save_npy(x, tag + "_x.npy"),
                               self.save_npy(np.array(lengths, np.int64),
                                             tag + "_l.npy")], tag)
                got = self.read_folder(os.path.join(out_dir, "output_0"))
                want = np.split(x, np.cumsum(lengths)[:-1], axis=1)
                self.assertEqual([g.shape for g in got], [w.shape for w in want])
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(g, w)

    def test_sequence_map_matches_onnxruntime(self):
        from onnx import TensorProto as T, helper as h
        body = h.make_graph(
            [h.make_node("Mul", ["e", "e"], ["sq"]),
             h.make_node("ReduceSum", ["sq"], ["r"], keepdims=0)],
            "body", [h.make_tensor_value_info("e", T.FLOAT, None)],
            [h.make_tensor_value_info("r", T.FLOAT, None)])
        m = kt.ort_model(
            [h.make_node("SequenceMap", ["s"], ["sums"], body=body),
             h.make_node("ConcatFromSequence", ["sums"], ["out"], axis=0,
                         new_axis=1)],
            [h.make_tensor_sequence_value_info("s", T.FLOAT, [None])],
            [h.make_tensor_value_info("out", T.FLOAT, [None])], 17)
        artifact = self.compile_ok(m, "map", "--sequence-length", "s=4")
        rng = np.random.default_rng(7)
        seq = [rng.standard_normal(n).astype(np.float32) for n in (3, 1, 5, 2)]
        (want,) = kt.onnxruntime_outputs(m, [seq])
        out_dir, _ = self.run_raw(artifact, [self.save_folder(seq, "map_in")], "map")
        np.testing.assert_allclose(np.load(os.path.join(out_dir, "output_0.npy")),
                                   want, rtol=1e-6)


class Optionals(SequenceTestCase):
    def model(self):
        from onnx import TensorProto as T, helper as h
        opt = h.make_tensor_type_proto(T.FLOAT, [3])
        return kt.onnx_model(
            [h.make_node("OptionalHasElement", ["o"], ["has"]),
             h.make_node("Identity", ["o"], ["same"])],
            [h.make_value_info("o", h.make_optional_type_proto(opt))],
            [h.make_tensor_value_info("has", T.BOOL, []),
             h.make_value_info("same", h.make_optional_type_proto(opt))], 18)

    def test_optional_with_a_value(self):
        from onnx import numpy_helper as nh
        artifact = self.compile_ok(self.model(), "opt_value")
        x = np.array([1.5, -2, 3], np.float32)
        for how, path in (("npy", self.save_npy(x, "opt_x.npy")),
                          ("proto", self.save_proto(nh.from_optional(x, "o"),
                                                    "opt_x.pb"))):
            with self.subTest(input=how):
                out_dir, _ = self.run_raw(artifact, [path], "opt_" + how)
                self.assertTrue(np.load(os.path.join(out_dir, "output_0.npy")))
                np.testing.assert_array_equal(
                    np.load(os.path.join(out_dir, "output_1.npy")), x)

    def test_optional_with_no_value(self):
        from onnx import numpy_helper as nh
        artifact = self.compile_ok(self.model(), "opt_none", "--empty-optional", "o")
        none_file = self.path("o.none")
        open(none_file, "w").close()
        empty = self.save_proto(nh.from_optional(None, "o"), "o_none.pb")
        for how, path in (("none", none_file), ("proto", empty)):
            with self.subTest(input=how):
                out_dir, proc = self.run_raw(artifact, [path], "none_" + how)
                self.assertFalse(np.load(os.path.join(out_dir, "output_0.npy")))
                none_out = os.path.join(out_dir, "output_1.none")
                self.assertTrue(os.path.isfile(none_out), os.listdir(out_dir))
                self.assertEqual(os.path.getsize(none_out), 0)
                self.assertFalse(os.path.exists(os.path.join(out_dir, "output_1.npy")))
                self.assertIn("optional with no value", proc.stdout)

    def test_value_given_where_none_was_compiled(self):
        artifact = self.compile_ok(self.model(), "opt_none2", "--empty-optional", "o")
        proc = kt.kiln_run(artifact, self.save_npy(np.zeros(3, np.float32), "z.npy"))
        kt.assert_clean_failure(self, proc, "--empty-optional", ".none")


class LoopUnrolling(SequenceTestCase):
    def loop_model(self, cond_body):
        """Loop of trip count 5 over a carried sum and a scan output; the body
        computes its condition with `cond_body` nodes ending in `cond_out`."""
        from onnx import TensorProto as T, helper as h
        body = h.make_graph(
            cond_body + [
                h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
                h.make_node("Mul", ["acc_in", "x"], ["scaled"]),
                h.make_node("Add", ["scaled", "fi"], ["acc_out"]),
                h.make_node("Identity", ["acc_out"], ["scan_out"])],
            "body",
            [h.make_tensor_value_info("i", T.INT64, []),
             h.make_tensor_value_info("cond_in", T.BOOL, []),
             h.make_tensor_value_info("acc_in", T.FLOAT, [2])],
            [h.make_tensor_value_info("cond_out", T.BOOL, []),
             h.make_tensor_value_info("acc_out", T.FLOAT, [2]),
             h.make_tensor_value_info("scan_out", T.FLOAT, [2])])
        m = kt.ort_model(
            [h.make_node("Loop", ["trips", "go", "acc0"], ["acc", "scans"], body=body)],
            [h.make_tensor_value_info("x", T.FLOAT, [2]),
             h.make_tensor_value_info("acc0", T.FLOAT, [2])],
            [h.make_tensor_value_info("acc", T.FLOAT, [2]),
             h.make_tensor_value_info("scans", T.FLOAT, [None, 2])], 17)
        m.graph.initializer.extend([h.make_tensor("trips", T.INT64, [], [5]),
                                    h.make_tensor("go", T.BOOL, [], [True])])
        return m

    def check(self, m, tag, iterations):
        feeds = [np.array([0.5, -1.25], np.float32), np.array([1, 2], np.float32)]
        got = self.run_onnx(m, tag, feeds)
        want = kt.onnxruntime_outputs(m, feeds)
        self.assertEqual(want[1].shape[0], iterations)  # the reference's count
        for g, w in zip(got, want):
            self.assertEqual(g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-6)

    def test_constant_trip_count(self):
        from onnx import helper as h
        self.check(self.loop_model([h.make_node("Identity", ["cond_in"], ["cond_out"])]),
                   "loop_all", 5)

    def test_condition_ends_the_loop_early(self):
        from onnx import TensorProto as T, helper as h
        m = self.loop_model([h.make_node("Less", ["i", "two"], ["cond_out"])])
        m.graph.node[0].attribute[0].g.initializer.append(
            h.make_tensor("two", T.INT64, [], [2]))
        self.check(m, "loop_early", 3)

    def test_run_time_trip_count_is_a_clear_error(self):
        m = self.loop_model([])
        from onnx import TensorProto as T, helper as h
        del m.graph.initializer[0]
        m.graph.input.append(h.make_tensor_value_info("trips", T.INT64, []))
        m.graph.node[0].attribute[0].g.node.insert(
            0, h.make_node("Identity", ["cond_in"], ["cond_out"]))
        proc = kt.kilnc(self.save_model(m, "loop_rt.onnx"), "-o",
                        self.path("loop_rt.kiln"))
        kt.assert_clean_failure(self, proc, "Loop", "trip count", "constant")


class SequenceErrors(SequenceTestCase):
    def model(self):
        from onnx import TensorProto as T, helper as h
        return kt.onnx_model(
            [h.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
            [h.make_tensor_sequence_value_info("s", T.FLOAT, [2])],
            [h.make_tensor_value_info("y", T.FLOAT, None)], 17)

    def kilnc_fails(self, *options, expected=()):
        path = self.save_model(self.model(), "err.onnx")
        out = self.path("err.kiln")
        proc = kt.kilnc(path, "-o", out, *options)
        kt.assert_clean_failure(self, proc, *expected)
        self.assertFalse(os.path.exists(out), "kilnc wrote an artifact anyway")

    def test_sequence_length_missing(self):
        self.kilnc_fails(expected=("'s'", "--sequence-length s="))

    def test_sequence_length_for_no_input(self):
        self.kilnc_fails("--sequence-length", "s=2", "--sequence-length", "t=1",
                         expected=("--sequence-length", "t"))

    def test_malformed_sequence_length(self):
        self.kilnc_fails("--sequence-length", "s=two",
                         expected=("sequence length", "s=two"))

    def test_empty_optional_on_a_plain_input(self):
        self.kilnc_fails("--sequence-length", "s=2", "--empty-optional", "s",
                         expected=("--empty-optional", "not optional"))

    def test_wrong_element_count_at_run_time(self):
        artifact = self.compile_ok(self.model(), "count", "--sequence-length", "s=2")
        folder = self.save_folder([np.zeros(2, np.float32)] * 3, "three")
        proc = kt.kiln_run(artifact, folder)
        kt.assert_clean_failure(self, proc, "sequence of 3", "--sequence-length s=3")

    def test_corrupt_sequence_proto(self):
        from onnx import numpy_helper as nh
        artifact = self.compile_ok(self.model(), "corrupt", "--sequence-length", "s=2")
        data = nh.from_list([np.ones(2, np.float32)] * 2, "s").SerializeToString()
        cases = {"truncated.pb": data[:len(data) // 2],
                 "garbage.pb": bytes(range(7, 250, 3)) * 4}
        for name, blob in cases.items():
            with self.subTest(file=name):
                path = self.path(name)
                with open(path, "wb") as f:
                    f.write(blob)
                proc = kt.kiln_run(artifact, path)
                kt.assert_clean_failure(self, proc, name)

    def test_element_of_the_wrong_dtype(self):
        artifact = self.compile_ok(self.model(), "dtype", "--sequence-length", "s=2")
        folder = self.save_folder([np.zeros(2, np.float32), np.zeros(2, np.int32)],
                                  "mixed")
        proc = kt.kiln_run(artifact, folder)
        kt.assert_clean_failure(self, proc, "s[1]", "i32")


if __name__ == "__main__":
    unittest.main()
