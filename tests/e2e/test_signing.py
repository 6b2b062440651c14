"""Signed artifacts: kilnc --sign-key writes OUT.kiln.sig (an HMAC-SHA256
of the artifact), kiln-run --require-signature KEYFILE loads only an
artifact whose signature matches, checked before any of its code is loaded.
"""

import os
import shutil
import unittest

import numpy as np

import kiln_testing as kt


class Signing(kt.KilnTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model([h.make_node("Relu", ["x"], ["y"])],
                          [h.make_tensor_value_info("x", T.FLOAT, [4])],
                          [h.make_tensor_value_info("y", T.FLOAT, [4])], 13)
        cls.model = cls.save_model(m, "relu.onnx")
        cls.key = cls.path("key")
        with open(cls.key, "wb") as f:
            f.write(os.urandom(32))
        cls.other_key = cls.path("other_key")
        with open(cls.other_key, "wb") as f:
            f.write(os.urandom(32))
        cls.x = np.array([-1, 0, 2, -3], np.float32)

    def signed(self, name):
        artifact, proc = self.compile(self.model, name, "--sign-key", self.key)
        kt.assert_success(self, proc)
        self.assertTrue(os.path.exists(artifact + ".sig"))
        return artifact

    def run_signed(self, artifact, key):
        return kt.kiln_run(artifact, self.save_npy(self.x, "x.npy"),
                           "--require-signature", key)

    def test_signed_artifact_runs(self):
        artifact = self.signed("ok.kiln")
        proc = self.run_signed(artifact, self.key)
        kt.assert_success(self, proc)
        (got,), _ = self.run_artifact(
            artifact, [self.x], options=["--require-signature", self.key])
        np.testing.assert_array_equal(got, np.maximum(self.x, 0))

    def test_wrong_key_missing_signature_and_tampering_are_errors(self):
        artifact = self.signed("bad.kiln")
        proc = self.run_signed(artifact, self.other_key)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("signature mismatch", proc.stderr)
        # A byte of the artifact changed after signing (its checksums are
        # not what is checked first).
        tampered = self.path("tampered.kiln")
        shutil.copy(artifact, tampered)
        shutil.copy(artifact + ".sig", tampered + ".sig")
        with open(tampered, "r+b") as f:
            f.seek(os.path.getsize(tampered) // 2)
            b = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([b[0] ^ 1]))
        proc = self.run_signed(tampered, self.key)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("signature mismatch", proc.stderr)
        # No signature beside it.
        os.remove(tampered + ".sig")
        proc = self.run_signed(tampered, self.key)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("a signature is required", proc.stderr)
        # Without --require-signature an unsigned artifact still loads.
        unsigned, proc = self.compile(self.model, "unsigned.kiln")
        kt.assert_success(self, proc)
        self.assertFalse(os.path.exists(unsigned + ".sig"))
        kt.assert_success(self, kt.kiln_run(unsigned,
                                            self.save_npy(self.x, "x.npy")))

    def test_bad_keys_are_usage_errors(self):
        short = self.path("short_key")
        with open(short, "wb") as f:
            f.write(b"tiny")
        _, proc = self.compile(self.model, "short.kiln", "--sign-key", short)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("at least 16", proc.stderr)
        _, proc = self.compile(self.model, "nokey.kiln", "--sign-key",
                               self.path("no_such_key"))
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("cannot read", proc.stderr)
        artifact = self.signed("usage.kiln")
        proc = self.run_signed(artifact, self.path("no_such_key"))
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--require-signature", proc.stderr)


if __name__ == "__main__":
    unittest.main()
