#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets into corpus/<target>/.

    ~/.cache/kiln/venv/bin/python tests/libfuzzer/make_seeds.py [--kilnc build/bin/kilnc]

The repository has .npy files but no .pb, .safetensors or .kiln ones, so the
seeds are made here: small files covering each format's variants (dtypes,
rank 0, empty tensors, format versions, typed fields next to raw_data,
sequences and optionals, BF16 and key prefixes, static, symbolic and
multi-device and cuda plans). Artifacts come from kilnc on tiny generated models,
with the code section replaced by a few bytes (the fuzz target never loads
it) so the corpus stays small. The output is deterministic, and the seeds
are committed; rerun this only to change them.
"""
import argparse
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def put(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def npy_bytes(array, version=None):
    out = io.BytesIO()
    if version is None:
        np.save(out, array)
    else:
        np.lib.format.write_array(out, array, version=version)
    return out.getvalue()


def npy_seeds():
    rng = np.random.default_rng(0)
    put("npy", "f32-2x3.npy", npy_bytes(rng.standard_normal((2, 3)).astype(np.float32)))
    put("npy", "f16-4.npy", npy_bytes(np.arange(4, dtype=np.float16)))
    put("npy", "f64-scalar.npy", npy_bytes(np.array(1.5)))
    put("npy", "i64-empty.npy", npy_bytes(np.zeros((0, 3), np.int64)))
    put("npy", "bool-2x2.npy", npy_bytes(np.array([[True, False], [False, True]])))
    put("npy", "u8-5.npy", npy_bytes(np.arange(5, dtype=np.uint8)))
    put("npy", "i8-u16-u32-u64.npy", npy_bytes(np.arange(3, dtype=np.uint32)))
    put("npy", "fortran-3x1.npy", npy_bytes(np.asfortranarray(np.ones((3, 1), np.int32))))
    put("npy", "fortran-2x2.npy", npy_bytes(np.asfortranarray(np.ones((2, 2), np.int16))))
    put("npy", "big-endian.npy", npy_bytes(np.arange(2, dtype=">i4")))
    put("npy", "v2.npy", npy_bytes(np.arange(3, dtype=np.float32), (2, 0)))
    put("npy", "v3.npy", npy_bytes(np.arange(3, dtype=np.int64), (3, 0)))
    # ml_dtypes arrays: numpy saves them as untyped void ('<V2', '|V1').
    put("npy", "bf16-void.npy", npy_bytes(np.arange(3).astype(ml_dtypes.bfloat16)))
    put("npy", "f8e4m3-void.npy", npy_bytes(np.arange(3).astype(ml_dtypes.float8_e4m3fn)))
    put("npy", "i4-void.npy", npy_bytes(np.arange(-2, 2).astype(ml_dtypes.int4)))
    # The names kiln's own writer uses for narrow types.
    header = "{'descr': 'bfloat16', 'fortran_order': False, 'shape': (2,), }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    put("npy", "bf16-named.npy",
        b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
        + b"\x80\x3f\x00\x40")


def pb_seeds():
    put("onnx_pb", "f32-raw.pb",
        numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "x").SerializeToString())
    put("onnx_pb", "i64-raw-scalar.pb",
        numpy_helper.from_array(np.array(7, np.int64), "n").SerializeToString())
    put("onnx_pb", "bool-raw.pb",
        numpy_helper.from_array(np.array([True, False, True]), "b").SerializeToString())
    put("onnx_pb", "f16-raw-empty.pb",
        numpy_helper.from_array(np.zeros((0, 2), np.float16), "e").SerializeToString())
    # The typed repeated fields instead of raw_data.
    typed = [
        ("float_data", TensorProto.FLOAT, [1.0, -2.5]),
        ("int32_data-i8", TensorProto.INT8, [-3, 4]),
        ("int32_data-f16", TensorProto.FLOAT16, [15360, 16384]),
        ("int32_data-bf16", TensorProto.BFLOAT16, [16256]),
        ("int32_data-bool", TensorProto.BOOL, [1, 0]),
        ("int32_data-u16", TensorProto.UINT16, [65535]),
        ("int32_data-i4", TensorProto.INT4, [0x7F]),
        ("int32_data-f8", TensorProto.FLOAT8E4M3FN, [0x38]),
        ("int64_data", TensorProto.INT64, [1, -1]),
        ("double_data", TensorProto.DOUBLE, [0.5]),
        ("uint64_data-u32", TensorProto.UINT32, [4000000000]),
        ("uint64_data-u64", TensorProto.UINT64, [2**63]),
    ]
    for name, dtype, values in typed:
        t = helper.make_tensor(name, dtype, [len(values)], values, raw=False)
        put("onnx_pb", name + ".pb", t.SerializeToString())
    # Packed int4 in raw_data: two per byte.
    t = helper.make_tensor("u4", TensorProto.UINT4, [3], [1, 2, 3])
    put("onnx_pb", "u4-typed.pb", t.SerializeToString())
    seq = numpy_helper.from_list(
        [np.arange(2, dtype=np.float32), np.ones((1, 2), np.float32)], "s")
    put("onnx_pb", "sequence.pb", seq.SerializeToString())
    opt = numpy_helper.from_optional(np.arange(2, dtype=np.int32), "o")
    put("onnx_pb", "optional-tensor.pb", opt.SerializeToString())
    opt = numpy_helper.from_optional(
        [np.arange(2, dtype=np.int32)], "os",
        dtype=onnx.OptionalProto.SEQUENCE)
    put("onnx_pb", "optional-sequence.pb", opt.SerializeToString())
    put("onnx_pb", "optional-none.pb",
        onnx.OptionalProto(name="n", elem_type=onnx.OptionalProto.TENSOR).SerializeToString())


def safetensors_bytes(tensors, metadata=None):
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    f32 = np.arange(6, dtype=np.float32).tobytes()
    put("safetensors", "f32.safetensors",
        safetensors_bytes({"w": ("F32", [2, 3], f32)}, {"format": "pt"}))
    put("safetensors", "mixed.safetensors", safetensors_bytes({
        "module.fc.weight": ("BF16", [2], np.array([1, 2], ml_dtypes.bfloat16).tobytes()),
        "module.fc.bias": ("F16", [1], np.ones(1, np.float16).tobytes()),
        "step": ("I64", [], np.array(3, np.int64).tobytes()),
        "mask": ("BOOL", [3], np.array([1, 0, 1], np.uint8).tobytes()),
        "empty": ("U8", [0, 4], b""),
        "i8": ("I8", [2], b"\x01\xff"),
        "u16": ("U16", [1], b"\x01\x02"),
        "u32": ("U32", [1], b"\x01\x02\x03\x04"),
        "u64": ("U64", [1], b"\x01" * 8),
        "i16": ("I16", [1], b"\x01\x02"),
        "i32": ("I32", [1], b"\x01\x02\x03\x04"),
        "f64": ("F64", [1], b"\x00" * 8),
    }))
    put("safetensors", "collision.safetensors", safetensors_bytes({
        "module.a": ("U8", [1], b"\x01"), "a": ("U8", [1], b"\x02")}))


def repack(path):
    """A kilnc artifact with its code and ptx sections replaced by a few
    bytes: the fuzz target loads neither."""
    data = open(path, "rb").read()
    (size,) = struct.unpack_from("<I", data, 12)
    manifest = json.loads(data[20:20 + size])
    sections = []
    for entry in manifest["sections"]:
        raw = data[entry["offset"]:entry["offset"] + entry["size"]]
        if entry["name"] == "code":
            raw = b"\x7fELF-not-loaded!"
        elif entry["name"] == "ptx":
            raw = b"// not loaded\n"
        sections.append((entry["name"], raw))
    # As artifact::write lays it out: sections 64-byte aligned after the
    # manifest, whose size depends on the offsets it records.
    align = lambda n: (n + 63) // 64 * 64
    start = -1
    for _ in range(8):
        entries, offset = [], None
        text = json.dumps(manifest, indent=1).encode()
        offset = align(20 + len(text))
        if offset == start:
            break
        start = offset
        for name, raw in sections:
            entries.append({"name": name, "offset": offset, "size": len(raw),
                            "crc32": zlib.crc32(raw)})
            offset = align(offset + len(raw))
        manifest["sections"] = entries
    text = json.dumps(manifest, indent=1).encode()
    out = bytearray(b"KILNART\0" + struct.pack("<III", 2, len(text), zlib.crc32(text)))
    out += text
    for (name, raw), entry in zip(sections, manifest["sections"]):
        out += b"\0" * (entry["offset"] - len(out))
        out += raw
    return bytes(out)


def kiln_seeds(kilnc):
    def model(name, nodes, inputs, outputs, inits=()):
        graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])

    f = TensorProto.FLOAT
    models = {
        "add-static": (model("add", [helper.make_node("Add", ["x", "y"], ["z"])],
                             [helper.make_tensor_value_info("x", f, [2, 3]),
                              helper.make_tensor_value_info("y", f, [3])],
                             [helper.make_tensor_value_info("z", f, [2, 3])],
                             [numpy_helper.from_array(np.ones(3, np.float32), "y")]), []),
        "reshape-symbolic": (model("rs", [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Reshape", ["r", "s"], ["z"])],
            [helper.make_tensor_value_info("x", f, ["N", 4])],
            [helper.make_tensor_value_info("z", f, ["M", 2])],
            [numpy_helper.from_array(np.array([-1, 2], np.int64), "s")]), []),
        "matmul-pipeline": (model("mm", [
            helper.make_node("MatMul", ["x", "w"], ["h"]),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("MatMul", ["r", "w2"], ["z"])],
            [helper.make_tensor_value_info("x", f, ["N", 3])],
            [helper.make_tensor_value_info("z", f, ["N", 2])],
            [numpy_helper.from_array(np.ones((3, 3), np.float32), "w"),
             numpy_helper.from_array(np.ones((3, 2), np.float32), "w2")]),
            ["--input-shape", "x=4x3", "--devices", "sim:0,sim:1",
             "--placement=pipeline:2", "--microbatches", "2"]),
        "matmul-data": (model("mmd", [helper.make_node("MatMul", ["x", "w"], ["z"])],
            [helper.make_tensor_value_info("x", f, ["N", 3])],
            [helper.make_tensor_value_info("z", f, ["N", 3])],
            [numpy_helper.from_array(np.ones((3, 3), np.float32), "w")]),
            ["--input-shape", "x=4x3", "--devices", "sim:0,sim:1",
             "--placement=data:2"]),
        # A cuda role: steps carry "cuda" launch descriptions (a cuBLAS GEMM
        # and a generated kernel). kilnc needs NVRTC for it, not a GPU.
        "matmul-relu-cuda": (model("mmc", [
            helper.make_node("MatMul", ["x", "w"], ["h"]),
            helper.make_node("Relu", ["h"], ["z"])],
            [helper.make_tensor_value_info("x", f, [2, 3])],
            [helper.make_tensor_value_info("z", f, [2, 4])],
            [numpy_helper.from_array(np.ones((3, 4), np.float32), "w")]),
            ["--device", "cuda:0"]),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, (m, flags) in models.items():
            onnx.checker.check_model(m)
            src = os.path.join(tmp, name + ".onnx")
            onnx.save(m, src)
            out = os.path.join(tmp, name + ".kiln")
            r = subprocess.run([kilnc, src, "-o", out] + flags,
                               capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"kilnc failed on {name}: {r.stderr}")
            put("kiln", name + ".kiln", repack(out))


def onnx_import_seeds(count=32):
    """Small graphs of the differential fuzzer's generator (tests/fuzz),
    every op family it draws, static and with every input dim symbolic;
    and If and Loop, which it does not draw."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "fuzz"))
    import generate as G
    for idx in range(count):
        opset, ir = G.pick_opset(11, idx)
        g = G.generate_graph(11, idx, opset, None, 12, 400, "s%d_" % idx)
        model, _ = G.assemble([g], opset, ir, name="seed%d" % idx)
        put("onnx_import", "graph%02d.onnx" % idx, model.SerializeToString())
        for vi in model.graph.input:
            for k, d in enumerate(vi.type.tensor_type.shape.dim):
                d.dim_param = "%s_d%d" % (vi.name, k)
        del model.graph.value_info[:]
        put("onnx_import", "graph%02d_symbolic.onnx" % idx, model.SerializeToString())
    f = TensorProto.FLOAT
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", f, [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", f, [2])])
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "x"], ["acc_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", f, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", f, [2])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Loop", ["n", "", "y"], ["z"], body=body),
         helper.make_node("Add", ["z", "z"], ["w"])], "control",
        [helper.make_tensor_value_info("x", f, [2]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("n", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("w", f, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    put("onnx_import", "control.onnx", model.SerializeToString())


def placement_json_seeds():
    """The first byte picks the reader (even: pins, odd: a device profile);
    the rest is the file, as the docs and tests write them."""
    pins = {
        "rules_object": {"rules": [
            {"op": "Relu", "device": "sim:0"},
            {"node": "/enc/layers\\.[0-9]+/.*", "device": "sim:1"},
            {"op": "kiln.softmax", "node": "head/.*", "device": "cpu"}]},
        "bare_list": [{"node": "head\\..*|/enc/relu", "device": "cuda:0"},
                      {"op": "MatMul", "device": "sim:3"}],
        "unknown_field": [{"op": "Add", "device": "cpu", "why": 1}],
        "bad_regex": [{"node": "(a|", "device": "cpu"}],
        "bad_device": [{"op": "Add", "device": "tpu:0"}],
    }
    for name, rules in pins.items():
        put("placement_json", "pins_" + name, b"\x00" + json.dumps(rules).encode())
    profiles = {
        "full": {"device": "sim:0", "comment": "a slow link", "peak_gflops": 30,
                 "memory_gbps": 12, "capacity_bytes": 1073741824, "link_gbps": 10,
                 "link_latency_us": 5, "launch_us": 2, "ops": ["*"],
                 "unsupported_ops": ["kiln.conv", "softmax"]},
        "ops_only": {"ops": ["matmul", "relu"]},
        "zeros": {"peak_gflops": 0, "memory_gbps": 0, "link_gbps": 0},
        "negative": {"launch_us": -1},
    }
    for name, profile in profiles.items():
        put("placement_json", "profile_" + name, b"\x01" + json.dumps(profile).encode())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kilnc", default=os.path.join(ROOT, "build", "bin", "kilnc"))
    p.add_argument("--only", help="one target's seeds (default: all)")
    args = p.parse_args()
    makers = {"npy": npy_seeds, "onnx_pb": pb_seeds,
              "safetensors": safetensors_seeds,
              "kiln": lambda: kiln_seeds(args.kilnc),
              "onnx_import": onnx_import_seeds,
              "placement_json": placement_json_seeds}
    for target, make in makers.items():
        if args.only and target != args.only:
            continue
        shutil.rmtree(os.path.join(HERE, "corpus", target), ignore_errors=True)
        make()


if __name__ == "__main__":
    main()
