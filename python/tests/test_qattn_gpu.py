"""GPU tests of qattn.attention (torch CUDA tensors through libqattn's plan),
skipped without torch or a CUDA device: against the emulation of the same
scheme within `qattn gpu-check`'s tolerances (cos >= 0.99999, max error <=
0.02 max |O|, |dLSE| <= 1e-4), the fp16 baseline against torch SDPA, the
layouts and varlen, no synchronisation inside the call, and the host time
a call costs. On the CPU: the message when torch is missing or the tensors
are not CUDA tensors."""
import ctypes
import os
import time
import unittest

import numpy as np

import qattn

try:
    import torch
    HAVE_CUDA = torch.cuda.is_available() and qattn.kernels() != []
except ImportError:
    torch = None
    HAVE_CUDA = False


def median_batch_us(fs, batch=20, batches=60):
    """per function of fs, the median host microseconds a call over batches of calls, the
    functions' batches interleaved (so that the machine's drift touches all alike) and
    synchronised between batches"""
    t = [[] for _ in fs]
    for _ in range(batches):
        for i, f in enumerate(fs):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(batch):
                f()
            t[i].append((time.perf_counter() - t0) / batch * 1e6)
    torch.cuda.synchronize()
    return [float(np.median(x)) for x in t]


def close(o, oe, what, tol_err=0.02, tol_cos=0.99999):
    o, oe = o.float().cpu().numpy().astype(np.float64), np.asarray(oe, np.float64)
    err = np.abs(o - oe).max() / np.abs(oe).max()
    cos = (o * oe).sum() / np.sqrt((o * o).sum() * (oe * oe).sum())
    print("%-40s max err %.2e of max |O|, cos %.8f" % (what, err, cos))
    return err <= tol_err and cos >= tol_cos, "%s: err %.3g cos %.8f" % (what, err, cos)


class NoGpu(unittest.TestCase):
    def test_cpu_arrays_refused(self):
        q = np.zeros((1, 2, 8, 64), np.float32)
        with self.assertRaises(qattn.QattnError) as cm:
            qattn.attention(q, q, q)
        self.assertRegex(str(cm.exception), "torch CUDA tensors")


@unittest.skipUnless(HAVE_CUDA, "no CUDA device, torch or GPU kernels")
class Gpu(unittest.TestCase):
    def rand(self, *shape, seed=0, dtype=None):
        g = torch.Generator(device="cpu").manual_seed(seed)
        return torch.randn(*shape, generator=g).to(device="cuda", dtype=dtype or torch.float16)

    def test_against_the_emulation(self):
        b, hq, hkv, n, d = 2, 4, 2, 300, 128
        q, k, v = (self.rand(b, h, n, d, seed=s) for h, s in ((hq, 1), (hkv, 2), (hkv, 3)))
        for scheme in ("sage2-8b-sm90", "sage2-8b", "fa3-fp8", "sage1-b", "fp16"):
            for causal in (False, True):
                o, lse = qattn.attention(q, k, v, scheme=scheme, causal=causal, return_lse=True)
                oe, lse_e = qattn.emulate(q.float().cpu(), k.float().cpu(), v.float().cpu(), scheme=scheme,
                                          causal=causal, return_lse=True)
                ok, msg = close(o, oe, "%s causal=%d" % (scheme, causal))
                self.assertTrue(ok, msg)
                dl = (lse.cpu() - lse_e).abs().max().item()
                self.assertLessEqual(dl, 1e-4, "%s: max |dLSE| %.3g" % (scheme, dl))

    def test_layout_and_varlen(self):
        b, h, n, d = 2, 4, 200, 64
        q, k, v = (self.rand(b, n, h, d, seed=s) for s in (4, 5, 6))  # bnhd
        o = qattn.attention(q, k, v, scheme="sage2-8b-sm90", layout="bnhd")
        oe = qattn.emulate(q.float().cpu(), k.float().cpu(), v.float().cpu(), scheme="sage2-8b-sm90", layout="bnhd")
        ok, msg = close(o, oe, "bnhd")
        self.assertTrue(ok, msg)
        lens = [130, 70]
        cu = torch.tensor([0, 130, 200], dtype=torch.int32, device="cuda")
        qv, kv, vv = (x[0] for x in (q, k, v))  # [T, H, d], T = 200
        ov = qattn.attention(qv, kv, vv, scheme="sage2-8b-sm90", causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu,
                             max_seqlen_q=max(lens), max_seqlen_k=max(lens))
        oe = qattn.emulate(qv[None].float().cpu(), kv[None].float().cpu(), vv[None].float().cpu(),
                           scheme="sage2-8b-sm90", causal=True, layout="bnhd", cu_seqlens=[0, 130, 200])
        ok, msg = close(ov[None], oe, "varlen causal")
        self.assertTrue(ok, msg)

    def test_fp16_baseline_against_torch(self):
        q, k, v = (self.rand(2, 8, 1024, 128, seed=s) for s in (7, 8, 9))
        o = qattn.attention(q, k, v, scheme="fp16", causal=True)
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
        ok, msg = close(o, ref.cpu().numpy(), "fp16 against torch SDPA (fp32)", tol_err=0.01, tol_cos=0.99999)
        self.assertTrue(ok, msg)

    def test_no_sync(self):
        q, k, v = (self.rand(1, 8, 256, 128, seed=s) for s in (10, 11, 12))
        qattn.attention(q, k, v)  # the workspace size, measured once per shape
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(3):
                qattn.attention(q, k, v)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        reps = 300
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            qattn.attention(q, k, v)
        host = (time.perf_counter() - t0) / reps * 1e6
        torch.cuda.synchronize()
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev0.record()
        for _ in range(reps):
            qattn.attention(q, k, v)
        ev1.record()
        torch.cuda.synchronize()
        gpu = ev0.elapsed_time(ev1) / reps * 1e3
        print("qattn.attention: %.1f us of host time a call, %.1f us a call on the GPU (%s)"
              % (host, gpu, torch.cuda.get_device_name()))  # measured, reported: no timed assertion
        # Host cost without the GPU's back-pressure: batches of 20 calls (about 100 launches, far from
        # filling the launch queue), timed between synchronisations, median over 60 batches of each,
        # interleaved. The C plan alone: its prepared call through ctypes with fixed arguments, less a
        # call that fails at once (what a 13-argument ctypes call costs).
        L, plan = qattn._L, next(p for p in qattn._plans.values() if p.lse_shape == (8, 256))
        o = torch.empty_like(q, dtype=plan.out_dtype)
        ws = torch.empty(max(plan.ws_bytes, 1), dtype=torch.uint8, device="cuda")
        stream, err = torch.cuda.current_stream().cuda_stream, ctypes.create_string_buffer(512)
        args = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), None, None, None, ws.data_ptr(), ws.numel(),
                stream, err, 512)
        self.assertEqual(L.qattn_lib_gpu_run(plan.handle, *args), 0, err.value)
        full, raw, null = median_batch_us([lambda: qattn.attention(q, k, v),
                                           lambda: L.qattn_lib_gpu_run(plan.handle, *args),
                                           lambda: L.qattn_lib_gpu_run(-1, *args)])
        print("host time a call, median of batches of 20: qattn.attention %.1f us, C plan %.1f us (its ctypes run "
              "%.1f us less a failing ctypes call %.1f us): overhead over the C plan %.1f us"
              % (full, raw - null, raw, null, full - (raw - null)))

    def test_stale_handle_is_prepared_again(self):
        q, k, v = (self.rand(1, 4, 130, 64, seed=s) for s in (20, 21, 22))
        o1 = qattn.attention(q, k, v, scheme="fp16")
        st = (ctypes.c_int64 * 3)(0, 130 * 64, 64)
        size, err = ctypes.c_size_t(0), ctypes.create_string_buffer(512)
        for n in range(1, 300):  # more call shapes than the library keeps
            h = qattn._L.qattn_lib_gpu_prepare(b"fp16", b"none", 0.0, b"fp16", 1, 4, 4, 64, n, n, st, st, st, st, 0, 0,
                                               n, n, ctypes.byref(size), err, 512)
            self.assertGreaterEqual(h, 0, err.value)
        o2 = qattn.attention(q, k, v, scheme="fp16")
        self.assertTrue(torch.equal(o1, o2))

    def test_errors(self):
        q = self.rand(1, 2, 64, 96)
        with self.assertRaises(qattn.QattnError) as cm:
            qattn.attention(q, q, q, scheme="sage2-8b-sm90")
        self.assertRegex(str(cm.exception), "head dim")
        with self.assertRaises(qattn.QattnError):
            qattn.attention(q, q, q, scheme="nosuch")


if __name__ == "__main__":
    unittest.main()
