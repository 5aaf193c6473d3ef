"""What qattn.attention costs the host over the C plan it runs (issue 26: under 20 us).

Times qattn.attention in batches of 20 calls between synchronisations (no
back-pressure from the GPU's launch queue), with the library's
qattn_lib_gpu_run timed inside the call: the rest is the Python layer
(checks skipped on a known call shape, the output's allocation, the key, the
pointers). Adds what a failing 13-argument ctypes call costs (the part of
the ctypes call that belongs to Python) and takes off the timing wrapper's
own cost. Five repeats; needs a CUDA device and libqattn with kernels.

    QATTN_LIB=... PYTHONPATH=python python3 python/bench_overhead.py
"""
import ctypes
import time

import torch

import qattn

B, H, N, D, BATCH, BATCHES = 1, 8, 256, 128, 20, 100


def best_us(f, reps=20000):
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        best = min(best, (time.perf_counter() - t0) / reps * 1e6)
    return best


def main():
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    for _ in range(50):
        qattn.attention(q, k, v)
    torch.cuda.synchronize()
    lib, run, inside = qattn._L, qattn._L.qattn_lib_gpu_run, [0.0]

    def timed_run(*a):
        t0 = time.perf_counter()
        r = run(*a)
        inside[0] += time.perf_counter() - t0
        return r

    class Timed:  # the library with its run function timed
        qattn_lib_gpu_run = staticmethod(timed_run)

        def __getattr__(self, name):
            return getattr(lib, name)

    err = ctypes.create_string_buffer(512)
    null = best_us(lambda: run(-1, 1, 1, 1, 1, None, None, None, 1, 1, None, err, 512))
    acc = [0.0]

    def wrap(f, *a):
        t0 = time.perf_counter()
        r = f(*a)
        acc[0] += time.perf_counter() - t0
        return r
    wrapper = best_us(lambda: wrap(len, ())) - best_us(lambda: len(()))
    print("%s; q, k, v %d x %d x %d x %d fp16, sage2-8b-sm90; a failing ctypes run call %.2f us, the timing "
          "wrapper %.2f us" % (torch.cuda.get_device_name(), B, H, N, D, null, wrapper))
    qattn._L = Timed()
    try:
        for rep in range(5):
            inside[0], total = 0.0, 0.0
            for _ in range(BATCHES):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(BATCH):
                    qattn.attention(q, k, v)
                total += time.perf_counter() - t0
            torch.cuda.synchronize()
            n = BATCH * BATCHES
            call, c_run = total / n * 1e6, inside[0] / n * 1e6
            print("repeat %d: a call %.1f us, qattn_lib_gpu_run %.1f us, the Python layer %.1f us: overhead over "
                  "the C plan %.1f us" % (rep + 1, call, c_run, call - c_run - wrapper,
                                          call - c_run - wrapper + null))
    finally:
        qattn._L = lib


if __name__ == "__main__":
    main()
