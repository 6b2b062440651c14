"""Random draws (RandomUniform/Normal(Like), Bernoulli, training Dropout).

Their values cannot match any reference's draws, so they are checked by the
statistics of large draws (means, spreads, a 10-bin histogram, the kept
fraction of Dropout, each within about five standard errors) and by their
structure: Dropout's output is 0 or x / (1 - ratio) as its mask says, a
ratio of 0 is the identity, a seed gives the same draws on every run, and
two generators without seeds draw different numbers.
"""

import unittest

import numpy as np

import kiln_testing as kt

N = 200_000




class RandomDraws(kt.KilnTestCase):
    def test_uniform_and_normal(self):
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model([h.make_node("RandomUniform", [], ["u"], shape=[N], low=-2.0,
                               high=3.0, seed=7.0),
                   h.make_node("RandomNormalLike", ["x"], ["n"], mean=1.5, scale=2.0),
                   h.make_node("RandomUniformLike", ["x"], ["u2"])],
                  [h.make_tensor_value_info("x", T.DOUBLE, [400, N // 400])],
                  [h.make_tensor_value_info("u", T.FLOAT, None),
                   h.make_tensor_value_info("n", T.DOUBLE, None),
                   h.make_tensor_value_info("u2", T.DOUBLE, None)], 15)
        x = np.zeros((400, N // 400))
        u, n, u2 = self.run_onnx(m, "gen", [x])
        self.assertEqual((u.dtype, u.shape), (np.float32, (N,)))
        self.assertEqual((n.dtype, n.shape), (np.float64, x.shape))
        self.assertTrue(((u >= -2) & (u <= 3)).all())
        se = 5.0 / np.sqrt(12 * N)  # the uniform mean's standard error
        self.assertLess(abs(u.mean() - 0.5), 5 * se)
        counts, _ = np.histogram(u, bins=10, range=(-2, 3))
        self.assertLess(np.abs(counts - N / 10).max(), 5 * np.sqrt(N / 10))
        self.assertLess(abs(n.mean() - 1.5), 5 * 2 / np.sqrt(N))
        self.assertLess(abs(n.std() - 2.0), 0.05)
        # Without seeds, the two uniform draws differ.
        self.assertFalse(np.allclose(np.sort(u2.ravel())[:100],
                                     np.sort(((u + 2) / 5).astype(np.float64))[:100]))
        again = self.run_onnx(m, "gen", [x])
        np.testing.assert_array_equal(u, again[0])  # same seed, same draws

    def test_bernoulli_rate(self):
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model([h.make_node("Bernoulli", ["p"], ["y"], seed=3.0)],
                  [h.make_tensor_value_info("p", T.FLOAT, [N])],
                  [h.make_tensor_value_info("y", T.FLOAT, None)], 15)
        p = np.where(np.arange(N) % 2 == 0, 0.3, 0.9).astype(np.float32)
        (y,) = self.run_onnx(m, "bern", [p])
        self.assertTrue(np.isin(y, [0, 1]).all())
        for rate, half in ((0.3, y[0::2]), (0.9, y[1::2])):
            se = np.sqrt(rate * (1 - rate) / half.size)
            self.assertLess(abs(half.mean() - rate), 5 * se)

    def test_training_dropout(self):
        from onnx import TensorProto as T, helper as h
        m = kt.onnx_model([h.make_node("Dropout", ["x", "r", "t"], ["y", "mask"])],
                  [h.make_tensor_value_info("x", T.FLOAT, [N]),
                   h.make_tensor_value_info("r", T.FLOAT, []),
                   h.make_tensor_value_info("t", T.BOOL, [])],
                  [h.make_tensor_value_info("y", T.FLOAT, None),
                   h.make_tensor_value_info("mask", T.BOOL, None)], 13)
        x = np.random.default_rng(1).standard_normal(N).astype(np.float32)
        for ratio, training in ((0.25, True), (0.0, True), (0.6, False)):
            with self.subTest(ratio=ratio, training=training):
                y, mask = self.run_onnx(
                    m, "drop", [x, np.array(ratio, np.float32), np.array(training)])
                if not training or ratio == 0:
                    np.testing.assert_array_equal(y, x)
                    self.assertTrue(mask.all())
                    continue
                scale = np.float32(1) / np.float32(1 - ratio)
                np.testing.assert_allclose(y, np.where(mask, x * scale, 0), rtol=1e-6)
                se = np.sqrt(ratio * (1 - ratio) / N)
                self.assertLess(abs(mask.mean() - (1 - ratio)), 5 * se)


if __name__ == "__main__":
    unittest.main()
