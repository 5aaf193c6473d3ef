/* The launches of the decode mma.sync instances (decode_mma.h): the kernel
 * variant (plain, speculating, sharing a cluster's chunks), the grid with its
 * splits and clusters, the combine kernels after it, and the instance macro
 * the generated files use. The comparison switches come in the params
 * (mma_off, mma_spec, mma_warps: the plan's fill read them). */
#ifndef QATTN_KERNELS_DECODE_MMA_LAUNCH_H
#define QATTN_KERNELS_DECODE_MMA_LAUNCH_H

#include "decode_mma.h" /* the kernel, its layout; the combine kernels */

/* a split's keys by the cache's capacity (the rules that must hold before the lengths are known) */
static inline int64_t qattn_decode_split_cap(const qattn_kernels_decode_params &p)
{
    return ((int64_t)p.cache.max_pages * p.cache.page_size + p.num_splits - 1) / p.num_splits;
}

template <int D, int CF, int QT, int W8>
static int qattn_decode_mma_launch_t(const qattn_kernels_decode_params &p, hipStream_t stream, qattn_err *err)
{
    typedef qattn_dmma_layout<D, CF, W8> L;
    void (*const k0)(qattn_kernels_decode_params) = &qattn_decode_mma_kernel<D, CF, QT, 0, W8, 0>; /* plain */
    void (*const ks)(qattn_kernels_decode_params) = &qattn_decode_mma_kernel<D, CF, QT, 1, W8, 0>; /* speculating */
    void (*const kh)(qattn_kernels_decode_params) = &qattn_decode_mma_kernel<D, CF, QT, 0, W8, 1>; /* sharing */
    /* once per instance and device (the host calls cost microseconds a decode step): the
     * shared-memory limit raised, the L2's size (0: unknown, no prefetch) */
    static int raised[64], l2_bytes[64], sms_of[64];
    int dev = 0, l2 = 0, sms = 0;
    QATTN_DECODE_CHECK(hipGetDevice(&dev), "decode: the current device");
    if (dev < 0 || dev >= 64 || !raised[dev]) {
        QATTN_DECODE_CHECK(hipFuncSetAttribute((const void *)k0, hipFuncAttributeMaxDynamicSharedMemorySize, L::BYTES),
                           "decode: raising the shared-memory limit");
        QATTN_DECODE_CHECK(hipFuncSetAttribute((const void *)ks, hipFuncAttributeMaxDynamicSharedMemorySize, L::BYTES),
                           "decode: raising the shared-memory limit");
        QATTN_DECODE_CHECK(hipFuncSetAttribute((const void *)kh, hipFuncAttributeMaxDynamicSharedMemorySize, L::BYTES),
                           "decode: raising the shared-memory limit");
        if (hipDeviceGetAttribute(&l2, hipDeviceAttributeL2CacheSize, dev) != hipSuccess)
            l2 = 0;
        if (hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, dev) != hipSuccess)
            sms = 0;
        (void)hipGetLastError();
        if (dev >= 0 && dev < 64)
            raised[dev] = 1, l2_bytes[dev] = l2, sms_of[dev] = sms;
    } else {
        l2 = l2_bytes[dev], sms = sms_of[dev];
    }
    const int rows = p.seqlen_q * (p.hq / p.hkv);
    const dim3 grid((unsigned)(p.hkv * ((rows + QATTN_DMMA_ROWS - 1) / QATTN_DMMA_ROWS)), (unsigned)p.nseq,
                    (unsigned)p.num_splits);
    /* up to 8 splits the combine runs in the split kernel, a row tile's splits as one cluster, when
     * all the grid's clusters are resident at once (else those left wait for a second round: 1.5x
     * the time at 32 clusters of 4, H200) */
    int cluster = p.stages == 0 && p.num_splits > 1 && p.num_splits <= QATTN_DECODE_CLUSTER_MAX &&
                  !(p.mma_off & QATTN_KERNELS_DECODE_OFF_CLUSTER) && qattn_port_overlap_ok();
    /* speculation where the grid leaves half the multiprocessors free: its blocks then start early,
     * under the previous kernel (a full grid's start when the previous grid's blocks leave, and
     * the reads before the wait only lengthen its path: +2-4% at batch 1, Sk 32k, 128 splits,
     * H200); the spoiling test modes at any size */
    const int spec = p.mma_spec >= 1                    ? p.mma_spec
                     : p.mma_spec < 0                   ? 0
                                                        : (int64_t)grid.x * grid.y * grid.z * 2 <= sms;
    /* a cluster's blocks share their splits' chunks (the blocks of a tile stream equal work at
     * rates that differ by up to 40%: 0.95-0.97x at 8192:8:8 .. 32768:8:8, H200 2026-11-29) where a
     * split is long: with 4096 keys the counter costs more than the evening gains */
    const int share_ok = !spec && !(p.mma_off & QATTN_KERNELS_DECODE_OFF_SHARE) &&
                         (qattn_decode_split_cap(p) >= QATTN_DECODE_SHARE_MIN_KEYS ||
                          (p.mma_off & QATTN_KERNELS_DECODE_ON_SHARE));
    /* the kernel a cluster launch runs, and the resident clusters of cz blocks of it, once per
     * kernel, size and device (1 + the count; 0: not asked) */
    const int kv = spec ? 1 : share_ok ? 2 : 0;
    void (*const kc)(qattn_kernels_decode_params) = kv == 1 ? ks : kv == 2 ? kh : k0;
    auto resident_clusters = [&](int cz) -> int {
        static int resident[64][3][QATTN_DECODE_CLUSTER_MAX + 1];
        int *slot = dev >= 0 && dev < 64 ? &resident[dev][kv][cz] : NULL;
        const int n = slot && *slot ? *slot - 1 : qattn_port_max_clusters(kc, (unsigned)cz, dim3(L::NW * 32), (size_t)L::BYTES);
        if (slot && !*slot)
            *slot = n + 1;
        return n;
    };
    if (cluster)
        cluster = (int64_t)grid.x * grid.y <= resident_clusters(p.num_splits);
    /* else, with 2-8 splits (an even count), pairs of splits as clusters of 2 that share their chunks
     * (each block's partial covers the keys it took), when all of them are resident at once
     * (131072:4:8 0.99x; with 16 and 128 short splits 1.02-1.11x: the pair's end barrier and the
     * counter cost more than the evening gains; H200 2026-11-29) */
    int spin = 0; /* the launch below combined its own partials */
    const int pairs = !cluster && p.stages != 2 && p.num_splits >= 2 && p.num_splits <= QATTN_DECODE_CLUSTER_MAX &&
                      p.num_splits % 2 == 0 && qattn_port_overlap_ok() &&
                      (int64_t)grid.x * grid.y * grid.z / 2 <= resident_clusters(2);
    /* the split kernel's blocks combine the partials themselves (no combine kernel, no boundary) when
     * every block of the grid is resident at once: they wait for each other (OFF_SPIN: never) */
    auto all_resident = [&](void (*kr)(qattn_kernels_decode_params), int kvi) -> int {
        static int per_sm[64][3]; /* 1 + blocks a multiprocessor; 0: not asked */
        int *slot = dev >= 0 && dev < 64 ? &per_sm[dev][kvi] : NULL;
        int n = slot && *slot ? *slot - 1 : 0;
        if (!slot || !*slot) {
            if (hipOccupancyMaxActiveBlocksPerMultiprocessor(&n, kr, L::NW * 32, (size_t)L::BYTES) != hipSuccess) {
                (void)hipGetLastError();
                n = 0;
            }
            if (slot)
                *slot = n + 1;
        }
        return (int64_t)grid.x * grid.y * grid.z <= (int64_t)n * sms;
    };
    const int spin_ok = p.stages == 0 && p.num_splits > 1 && p.num_splits <= QATTN_DECODE_SPIN_MAX && p.spin_cnt &&
                        !cluster && sms > 0 && !(p.mma_off & QATTN_KERNELS_DECODE_OFF_SPIN);
    if (p.stages != 2) { /* overlapping the previous kernel: it waits for it before touching memory */
        /* the L2 prefetch: half the L2 over the grid's blocks, so that prefetched rows stay */
        qattn_kernels_decode_params pk = p;
        if (!((p.mma_off & QATTN_KERNELS_DECODE_OFF_PREFETCH) ||
              ((p.mma_off & QATTN_KERNELS_DECODE_OFF_PREFETCH_MULTI) && p.hkv != 1)))
            pk.l2_prefetch = (unsigned)(l2 / 2) / (grid.x * grid.y * grid.z);
        pk.cluster = cluster;
        pk.spec = spec;
        pk.share = share_ok && cluster ? p.num_splits : share_ok && pairs ? 2 : 0;
        void (*k)(qattn_kernels_decode_params) = pk.spec ? ks : pk.share ? kh : k0;
        const unsigned cz = cluster ? (unsigned)p.num_splits : pk.share ? 2u : 1u;
        /* pairs: all resident by the clusters' check */
        pk.spin = spin_ok && (pk.share || all_resident(k, pk.spec ? 1 : 0));
        if (cz > 1 && qattn_port_launch_ex(1, cz, k, grid, dim3(L::NW * 32), (size_t)L::BYTES, stream, pk) != cudaSuccess) {
            (void)hipGetLastError(); /* clusters refused (too few free multiprocessors a GPC): the combine kernel */
            cluster = pk.cluster = pk.share = 0;
            k = pk.spec ? ks : k0;
            pk.spin = 0;
            qattn_port_launch_overlap(1, k, grid, dim3(L::NW * 32), (size_t)L::BYTES, stream, pk);
        } else if (cz == 1)
            qattn_port_launch_overlap(1, k, grid, dim3(L::NW * 32), (size_t)L::BYTES, stream, pk);
        QATTN_DECODE_CHECK(hipGetLastError(), "decode mma kernel launch");
        spin = pk.spin;
    }
    if (p.num_splits == 1 || p.stages == 1 || cluster || spin)
        return QATTN_OK;
    /* programmatic dependent launch on sm_90: its blocks start while the split kernel's last ones run */
    if (p.num_splits <= QATTN_DECODE_COMBINE_WARP)
        qattn_port_launch_overlap(p.stages != 2, &qattn_decode_combine_warp_kernel<D>,
                                  dim3((unsigned)(((int64_t)p.seqlen_q * p.hq + 7) / 8), 1u, (unsigned)p.nseq), dim3(256), 0,
                                  stream, p);
    else
        qattn_port_launch_overlap(p.stages != 2, &qattn_decode_combine_block_kernel<D>,
                                  dim3((unsigned)p.seqlen_q, (unsigned)p.hq, (unsigned)p.nseq), dim3(256), 0, stream, p);
    QATTN_DECODE_CHECK(hipGetLastError(), "decode combine launch");
    return QATTN_OK;
}

/* CF: the cache format (both K and V); 16-bit caches run in the query's
 * dtype, 8-bit and int4 ones in fp16 */
template <int D, int CF>
static int qattn_decode_mma_launch(const qattn_kernels_decode_params *pp, void *stream, qattn_err *err)
{
    const qattn_kernels_decode_params p = *pp;
    int rc = qattn_decode_check(p, D, err);
    if (rc)
        return rc;
    if (p.cache.kop.fmt != CF || p.cache.vop.fmt != CF || p.cache.k_open || p.cache.v_open ||
        (p.cache.k_scale && p.cache.k_nch != 1) || (p.cache.v_scale && p.cache.v_nch != 1))
        return qattn_err_set(err, QATTN_ERR_ARG, "decode mma: a cache this instance does not read");
    if ((uint64_t)p.cache.num_pages * (uint64_t)p.cache.page_size * (uint64_t)p.hkv >= 0xffffffffull)
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "decode mma: a pool of %lld pages of %d tokens x %d heads (2^32 rows or more)",
                             (long long)p.cache.num_pages, p.cache.page_size, p.hkv);
    if (p.seqlen_q <= 0)
        return QATTN_OK;
    if constexpr (CF == QATTN_FMT_BF16)
        return qattn_decode_mma_launch_t<D, CF, QATTN_FMT_BF16, 0>(p, (hipStream_t)stream, err);
    else if constexpr (CF == QATTN_FMT_FP16)
        return qattn_decode_mma_launch_t<D, CF, QATTN_FMT_FP16, 0>(p, (hipStream_t)stream, err);
    else {
        /* 8-bit and int4 caches: 8 warps where each split's keys (by the cache's capacity) would give 12 warps
         * at most one chunk each (batch 1 with 128 splits: 0.95x in 12 warps, H200 2026-11-28);
         * p.mma_warps 8 / 12 (QATTN_DECODE_WARPS) forces a form */
        typedef qattn_dmma_layout<D, CF, 0> L12;
        const int w8 = p.mma_warps == 8    ? 1
                       : p.mma_warps == 12 ? 0
                                           : qattn_decode_split_cap(p) <= L12::NW * L12::KC;
        return w8 ? qattn_decode_mma_launch_t<D, CF, QATTN_FMT_FP16, 1>(p, (hipStream_t)stream, err)
                  : qattn_decode_mma_launch_t<D, CF, QATTN_FMT_FP16, 0>(p, (hipStream_t)stream, err);
    }
}

#define QATTN_DECODE_MMA_INSTANCE(D, CF, NAME)                                              \
    extern "C" int NAME(const qattn_kernels_decode_params *p, void *stream, qattn_err *err) \
    {                                                                                       \
        return qattn_decode_mma_launch<D, CF>(p, stream, err);                              \
    }

#endif
