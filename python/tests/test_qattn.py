"""CPU tests of python/qattn: presets and parsing, the float64 reference on a
hand-computed case and against numpy, the emulation's properties (layouts,
GQA, packed sequences, fp16 close to float64), and every bad input's message."""
import math
import unittest

import numpy as np

import qattn


def numpy_attention(q, k, v, causal=False):
    """float64 attention of [B, H, N, d] arrays, kv heads repeated for GQA"""
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1).astype(np.float64), np.repeat(v, rep, axis=1).astype(np.float64)
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    return np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), v), (m + np.log(p.sum(-1, keepdims=True)))[..., 0]


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class Presets(unittest.TestCase):
    def test_version(self):
        self.assertRegex(qattn.version(), r"^\d+\.\d+")

    def test_schemes_parse_to_their_spec(self):
        s = qattn.schemes()
        names = [x.name for x in s]
        self.assertEqual(len(names), len(set(names)))
        self.assertIn("sage2-8b-sm90", names)
        for x in s:
            self.assertEqual(qattn.parse(x.name), qattn.parse(x.spec))

    def test_parse_canonical(self):
        self.assertTrue(qattn.parse("sage2-8b-sm90").startswith("q=int8@thread:16/8/1 k=int8@thread:128/8/2"))

    def test_kernels_listed_with_paths(self):
        for kern in qattn.kernels():
            self.assertIn(kern.path, ("portable", "mma", "mfma", "wgmma"))
            self.assertIn(kern.family, ("quant", "attn-fwd", "decode", "sparse"))


class Reference(unittest.TestCase):
    def test_hand_computed(self):
        # two tokens, d = 2 (second channel 0), scale 1: row 0 scores [1, 0], row 1 [0, 0]
        q = np.array([[[[1, 0], [0, 0]]]], np.float32)
        k = np.array([[[[1, 0], [0, 0]]]], np.float32)
        v = np.array([[[[1, 0], [3, 0]]]], np.float32)
        o, lse = qattn.reference(q, k, v, scale=1.0, return_lse=True)
        e = math.e
        self.assertAlmostEqual(o[0, 0, 0, 0], (e * 1 + 3) / (e + 1), places=12)
        self.assertAlmostEqual(o[0, 0, 1, 0], 2.0, places=12)
        self.assertAlmostEqual(lse[0, 0, 0], math.log(e + 1), places=12)
        self.assertAlmostEqual(lse[0, 0, 1], math.log(2), places=12)
        o, lse = qattn.reference(q, k, v, scale=1.0, causal=True, return_lse=True)
        self.assertAlmostEqual(o[0, 0, 0, 0], 1.0, places=12)
        self.assertAlmostEqual(lse[0, 0, 0], 1.0, places=12)

    def test_matches_numpy(self):
        q, k, v = rand(2, 4, 50, 32, seed=1), rand(2, 2, 50, 32, seed=2), rand(2, 2, 50, 32, seed=3)
        for causal in (False, True):
            o, lse = qattn.reference(q, k, v, causal=causal, return_lse=True)
            on, lsen = numpy_attention(q, k, v, causal)
            self.assertLess(np.abs(o - on).max(), 1e-5)
            self.assertLess(np.abs(lse - lsen).max(), 1e-5)


class Emulation(unittest.TestCase):
    def setUp(self):
        self.q, self.k, self.v = rand(2, 4, 70, 64, seed=4), rand(2, 2, 70, 64, seed=5), rand(2, 2, 70, 64, seed=6)

    def test_fp16_close_to_float64(self):
        o, lse = qattn.emulate(self.q, self.k, self.v, scheme="fp16", causal=True, return_lse=True)
        r, lser = qattn.reference(self.q, self.k, self.v, causal=True, return_lse=True)
        self.assertEqual(o.dtype, np.float32)
        self.assertLess(np.abs(o - r).max(), 5e-3)
        self.assertLess(np.abs(lse - lser).max(), 2e-3)

    def test_quantized_scheme_differs_but_stays_close(self):
        o = qattn.emulate(self.q, self.k, self.v, scheme="sage2-8b-sm90")
        r = qattn.reference(self.q, self.k, self.v)
        err = np.abs(o - r).max()
        self.assertGreater(err, 0.0)
        self.assertLess(err, 0.1)
        cos = (o * r).sum() / np.sqrt((o * o).sum() * (r * r).sum())
        self.assertGreater(cos, 0.999)

    def test_layouts_agree(self):
        t = lambda x: np.ascontiguousarray(np.transpose(x, (0, 2, 1, 3)))
        a = qattn.emulate(self.q, self.k, self.v, scheme="sage2-8b")
        b = qattn.emulate(t(self.q), t(self.k), t(self.v), scheme="sage2-8b", layout="bnhd")
        np.testing.assert_array_equal(t(a), b)

    def test_gqa_equals_repeated_kv_heads(self):
        a = qattn.emulate(self.q, self.k, self.v, scheme="sage2-8b-sm90")
        b = qattn.emulate(self.q, np.repeat(self.k, 2, axis=1), np.repeat(self.v, 2, axis=1), scheme="sage2-8b-sm90")
        np.testing.assert_array_equal(a, b)

    def test_packed_sequences_equal_separate_calls(self):
        q, k, v = self.q[:1], self.k[:1], self.v[:1]
        o = qattn.emulate(q, k, v, scheme="fp16", causal=True, cu_seqlens=[0, 27, 70])
        first = qattn.emulate(q[:, :, :27], k[:, :, :27], v[:, :, :27], scheme="fp16", causal=True)
        second = qattn.emulate(q[:, :, 27:], k[:, :, 27:], v[:, :, 27:], scheme="fp16", causal=True)
        np.testing.assert_array_equal(o, np.concatenate([first, second], axis=2))

    def test_torch_in_torch_out(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")
        o = qattn.emulate(torch.from_numpy(self.q), torch.from_numpy(self.k), torch.from_numpy(self.v), scheme="fp16")
        self.assertIsInstance(o, torch.Tensor)
        np.testing.assert_array_equal(o.numpy(), qattn.emulate(self.q, self.k, self.v, scheme="fp16"))


class BadInput(unittest.TestCase):
    def setUp(self):
        self.q, self.k, self.v = rand(1, 4, 16, 32), rand(1, 2, 16, 32, seed=1), rand(1, 2, 16, 32, seed=2)

    def check(self, pattern, fn, *args, **kw):
        with self.assertRaisesRegex(qattn.QattnError, pattern):
            fn(*args, **kw)

    def test_unknown_scheme(self):
        self.check("unknown scheme or preset 'sage9'", qattn.emulate, self.q, self.k, self.v, scheme="sage9")
        self.check("int9", qattn.parse, "q=int9 k=int8")

    def test_nan(self):
        q = self.q.copy()
        q[0, 1, 3, 5] = np.nan
        self.check("q has a non-finite value", qattn.emulate, q, self.k, self.v, scheme="fp16")
        v = self.v.copy()
        v[0, 0, 0, 0] = np.inf
        self.check("v has a non-finite value", qattn.reference, self.q, self.k, v)

    def test_shapes(self):
        self.check("expected 4 dimensions", qattn.emulate, self.q[0], self.k, self.v)
        self.check("not a multiple of", qattn.emulate, rand(1, 3, 16, 32), self.k, self.v, scheme="fp16")
        self.check("differ in batch or head dim", qattn.reference, self.q, rand(1, 2, 16, 64), rand(1, 2, 16, 64))
        self.check("same shape", qattn.reference, self.q, self.k, rand(1, 2, 15, 32))
        self.check("layout must be", qattn.reference, self.q, self.k, self.v, layout="nhd")
        self.check("not a number type", qattn.reference, np.array([[[["a"]]]]), self.k, self.v)

    def test_masks_and_scale(self):
        self.check("diagonal", qattn.reference, self.q, self.k, self.v, mask="diagonal")
        self.check("not both", qattn.reference, self.q, self.k, self.v, causal=True, mask="causal")
        self.check("scale must be positive", qattn.reference, self.q, self.k, self.v, scale=-1.0)

    def test_cu_seqlens(self):
        self.check("rise from 0 to the 16 tokens", qattn.reference, self.q, self.k, self.v, cu_seqlens=[0, 5, 12])
        self.check("one packed batch", qattn.reference, rand(2, 4, 16, 32), rand(2, 2, 16, 32), rand(2, 2, 16, 32),
                   cu_seqlens=[0, 16])


if __name__ == "__main__":
    unittest.main()
