"""Tests of qattn.hf, the transformers attention implementation. On the CPU
(torch needed; scripts/test installs Debian's python3-torch): the attention
function against qattn.emulate with a stand-in attention module, its masks,
the kbias augmentation, and its refusals. With transformers and a CUDA device
(the GPU machine): a small Qwen2 model through use(), against torch SDPA."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import warnings

import numpy as np

import qattn

try:
    import torch
except ImportError:
    torch = None
try:
    import transformers
except ImportError:
    transformers = None
if torch is not None:
    import qattn.hf as hf


class Config:
    def __init__(self, scheme, kbias=0.0):
        self.qattn_scheme, self.qattn_kbias = scheme, kbias


class Module:
    def __init__(self, scheme, kbias=0.0, is_causal=True):
        self.config, self.is_causal = Config(scheme, kbias), is_causal


def rand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


@unittest.skipIf(torch is None, "torch is not installed (Debian: python3-torch)")
class AttentionFunction(unittest.TestCase):
    def setUp(self):
        self.q, self.k, self.v = rand(2, 4, 37, 64, seed=1), rand(2, 2, 37, 64, seed=2), rand(2, 2, 37, 64, seed=3)

    def test_equals_the_emulation(self):
        hf.reset_calls()
        for scheme in ("sage2-8b", "fp16"):
            o, w = hf.attention_forward(Module(scheme), self.q, self.k, self.v, None, scaling=0.1)
            self.assertIsNone(w)
            self.assertEqual(tuple(o.shape), (2, 37, 4, 64))  # [B, N, H, d]
            self.assertEqual(o.dtype, self.q.dtype)
            oe = qattn.emulate(self.q, self.k, self.v, scheme=scheme, causal=True, scale=0.1)
            self.assertTrue(torch.equal(o, oe.transpose(1, 2)), scheme)
        self.assertEqual(hf.calls, {"gpu": 0, "emulate": 2})

    def test_mixed_dtypes_meet_in_the_narrowest(self):
        # autocast with float32 weights: RoPE leaves q and k in float32, v comes out of a bf16 matmul
        o, _ = hf.attention_forward(Module("bf16"), self.q, self.k, self.v.bfloat16(), None)
        self.assertEqual(o.dtype, torch.bfloat16)
        oe = qattn.emulate(self.q.bfloat16(), self.k.bfloat16(), self.v.bfloat16(), scheme="bf16", causal=True)
        self.assertTrue(torch.equal(o, oe.bfloat16().transpose(1, 2)))

    def test_masks(self):
        m = Module("bf16")
        o, _ = hf.attention_forward(m, self.q, self.k, self.v, None)
        ref = qattn.reference(self.q, self.k, self.v, causal=True).float()
        self.assertLess((o.transpose(1, 2) - ref).abs().max().item(), 0.02)
        # a decode step over a cache: the last query sees every key (bottom-right)
        o1, _ = hf.attention_forward(m, self.q[:, :, -1:], self.k, self.v, None)
        self.assertLess((o1.transpose(1, 2) - ref[:, :, -1:]).abs().max().item(), 0.02)
        o2, _ = hf.attention_forward(Module("bf16", is_causal=False), self.q, self.k, self.v, None)
        ref2 = qattn.reference(self.q, self.k, self.v).float()
        self.assertLess((o2.transpose(1, 2) - ref2).abs().max().item(), 0.02)
        o3, _ = hf.attention_forward(m, self.q, self.k, self.v, None, is_causal=False)
        self.assertTrue(torch.equal(o3, o2))

    def test_kbias(self):
        k = self.k * 0.5 + 0.3
        b = hf.kbias_offsets(k, 4.0)
        self.assertEqual(tuple(b.shape), (2, 2, 1, 64))
        kk = k[0, 1].double()
        want = 4.0 * kk.std(0) * torch.where(kk.mean(0) >= 0, 1.0, -1.0)
        self.assertLess((b[0, 1, 0].double() - want).abs().max().item(), 2e-3 * want.abs().max().item())
        # exact attention does not see the offset; int8 without smoothing does, smoothing K takes it out
        ref = qattn.reference(self.q, k, self.v, causal=True)
        refb = qattn.reference(self.q, k + b, self.v, causal=True)
        self.assertLess((ref - refb).abs().max().item(), 1e-5)  # float32 rounding of k + b
        for scheme, worse in (("q=int8@token k=int8@token p=fp16 v=fp16 smooth=none", True),
                              ("q=int8@token k=int8@token p=fp16 v=fp16 smooth=k", False)):
            errs = []
            for r in (0.0, 16.0):
                o, _ = hf.attention_forward(Module(scheme, r), self.q, k, self.v, None)
                errs.append((o.transpose(1, 2).double() - ref).abs().mean().item())
            if worse:
                self.assertGreater(errs[1], 3 * errs[0], scheme)
            else:
                self.assertLess(errs[1], 1.5 * errs[0] + 1e-4, "%s: %s" % (scheme, errs))

    def test_refusals(self):
        with self.assertRaisesRegex(qattn.QattnError, "no qattn_scheme"):
            hf.attention_forward(Module(None), self.q, self.k, self.v, None)
        with self.assertRaisesRegex(qattn.QattnError, r"not a mask tensor \(2, 1, 37, 37\)"):
            hf.attention_forward(Module("bf16"), self.q, self.k, self.v, torch.zeros(2, 1, 37, 37, dtype=torch.bool))
        with self.assertRaisesRegex(qattn.QattnError, "dropout"):
            hf.attention_forward(Module("bf16"), self.q, self.k, self.v, None, dropout=0.1)
        with self.assertRaisesRegex(qattn.QattnError, "unknown"):
            hf.attention_forward(Module("no-such-scheme"), self.q, self.k, self.v, None)


@unittest.skipUnless(torch is not None and transformers is not None and torch.cuda.is_available(),
                     "needs torch, transformers and a CUDA device")
class Transformers(unittest.TestCase):
    def model(self):
        from transformers import Qwen2Config, Qwen2ForCausalLM
        torch.manual_seed(0)
        cfg = Qwen2Config(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=256, use_cache=False)
        return Qwen2ForCausalLM(cfg).cuda().eval()

    def test_a_model_runs_the_scheme(self):
        m = self.model()
        x = torch.randint(0, 512, (2, 200), device="cuda")
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            ref = m(input_ids=x).logits.float()
            hf.reset_calls()
            hf.use(m, "bf16")
            got = m(input_ids=x).logits.float()
            self.assertEqual(hf.calls["gpu"], 2, hf.calls)
            hf.use(m, "sage2-8b-sm90")
            q8 = m(input_ids=x).logits.float()
            hf.use(m, None)
            back = m(input_ids=x).logits.float()
        err = lambda a: ((a - ref).norm() / ref.norm()).item()
        print("bf16 %.2e, sage2-8b-sm90 %.2e, restored %.2e" % (err(got), err(q8), err(back)))
        self.assertLess(err(got), 2e-2)
        self.assertLess(err(q8), 5e-2)
        self.assertGreater(err(q8), 0.0)
        self.assertEqual(err(back), 0.0)

    def test_the_example_script(self):
        from transformers import Qwen2Config, Qwen2ForCausalLM
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        with tempfile.TemporaryDirectory() as d:
            torch.manual_seed(0)
            cfg = Qwen2Config(vocab_size=8192, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512)
            Qwen2ForCausalLM(cfg).save_pretrained(d)
            shutil.copy(os.path.join(root, "data", "tokenizer.json"), d)
            with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
                json.dump({"tokenizer_class": "PreTrainedTokenizerFast"}, f)
            env = dict(os.environ, PYTHONPATH=os.path.join(root, "python"))
            r = subprocess.run([sys.executable, os.path.join(root, "examples", "hf_quantize.py"), d,
                                os.path.join(root, "README.md"), "sage2-4b"], capture_output=True, text=True, env=env)
            print(r.stdout.strip())
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            m = re.search(r"held-out loss (\d+\.\d{4}) -> (\d+\.\d{4}) nats/token with sage2-4b "
                          r"\((\d+) windows of 512 tokens\)", r.stdout)
            self.assertIsNotNone(m, r.stdout)
            self.assertGreater(int(m.group(3)), 1)

    def test_padding_is_refused(self):
        m = hf.use(self.model(), "bf16")
        x = torch.randint(0, 512, (2, 64), device="cuda")
        am = torch.ones_like(x)
        am[1, :10] = 0
        with torch.no_grad(), self.assertRaisesRegex(qattn.QattnError, "mask tensor"):
            m(input_ids=x, attention_mask=am)


if __name__ == "__main__":
    unittest.main()
