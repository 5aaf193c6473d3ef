/* test_kernels_quant on the GPU (NVIDIA backend; CTest label gpu): the
 * cases of test_kernels_quant.c against quant/, longer sequences included,
 * and
 *
 *   test_kernels_quant_gpu --bench
 *
 * the sage2-8b-sm90 quantization (Q int8 thread:16/8/1, K int8
 * thread:128/8/2 with smooth=k, V e4m3 per channel written transposed) of
 * fp16 Q, K, V [B=4, H=32, N=8192, d=128] ([B, H, N, d], 805 MB, larger than
 * L2), fast and portable instances, timed with CUDA events (median of 25 runs
 * after 3 warm-up runs), against cudaMemcpyAsync device-to-device of the
 * input bytes in the same run. GB/s: the floor bytes (inputs read once,
 * codes, scales and means written once) and the traffic of the kernels (K and
 * V read twice and the partial statistics, unless the streamed kernel
 * runs: then the floor) over the time of all the
 * quantization kernels (the row "kv": K and V by launch_quant_kv, at once,
 * their time under k, v 0);
 * the copy counts its bytes twice (read + write). Progress on stderr, the
 * numbers on stdout. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#define QATTN_TEST_GPU 1
#include <cuda_runtime_api.h>

#include "test_kernels_quant.c"

#define BENCH_RUNS 25
#define BENCH_WARM 3

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static float median(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

#define CU(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "bench: %s: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
            return 1;                                                                             \
        }                                                                                         \
    } while (0)

static int bench(void)
{
    const int B = 4, H = 32, N = 8192, D = 128;
    const size_t elems = (size_t)B * H * N * D, in_bytes = elems * 2;
    qattn_err err;
    char dev[256] = "?";
    qattn_kernels_dev_name(dev, sizeof dev, &err);
    fprintf(stderr, "bench: %s, q/k/v fp16 [%d, %d, %d, %d], filling %.0f MB\n", dev, B, H, N, D,
            3.0 * (double)in_bytes / 1e6);
    /* quick pseudo-random fp16 with per-channel offsets, never 0 */
    uint16_t *host = malloc(in_bytes);
    void *dx[3] = {NULL, NULL, NULL}, *dcopy = NULL;
    if (!host)
        return 1;
    uint64_t z = 0x1234567;
    for (int i = 0; i < 3; i++) {
        for (size_t e = 0; e < elems; e++) {
            z ^= z << 13;
            z ^= z >> 7;
            z ^= z << 17;
            float v = ((float)(z >> 40) * 0x1p-24f - 0.5f) * 6.0f + (float)((e % D) % 11) * (i == 1 ? 0.8f : 0.1f);
            host[e] = qattn_num_fp16_encode(v == 0.0f ? 0.5f : v);
        }
        if (qattn_kernels_dev_alloc(&dx[i], in_bytes, &err) || qattn_kernels_dev_to(dx[i], host, in_bytes, &err)) {
            fprintf(stderr, "bench: %s\n", err.msg);
            return 1;
        }
    }
    free(host);
    if (qattn_kernels_dev_alloc(&dcopy, in_bytes, &err)) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    /* the scheme's operands and the instances the dispatcher picks for it */
    qattn_scheme s;
    if (qattn_scheme_parse("sage2-8b-sm90", &s, &err)) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    qattn_kernels_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.nseq = B;
    pb.hq = pb.hkv = H;
    pb.d = D;
    pb.seqlen_q = pb.seqlen_k = N;
    pb.in = QATTN_FMT_FP16;
    const qattn_kernels_sig *as = NULL, *qs = NULL;
    if (qattn_kernels_find(&s, &pb, &as, &qs, &err)) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    printf("dispatcher for sage2-8b-sm90: attention %s (V %s), quantization %s\n", as->name,
           as->v_layout == QATTN_KERNELS_LAYOUT_TRANSPOSED ? "transposed" : "rows", qs->name);
    const qattn_operand *ops[3] = {&s.q, &s.k, &s.v};
    const int smooth[3] = {QATTN_KERNELS_SMOOTH_NONE, QATTN_KERNELS_SMOOTH_TOKENS, QATTN_KERNELS_SMOOTH_NONE};
    qattn_kernels_quant_params qp[3];
    double floor_bytes = 0.0, traffic = 0.0;
    for (int i = 0; i < 3; i++) {
        size_t bc, bs, bm;
        qattn_kernels_quant_sizes(ops[i], H, B, N, (int64_t)B * N, D, smooth[i], 0, &bc, &bs, &bm);
        void *codes = NULL, *scale = NULL, *mean = NULL, *work = NULL;
        if (qattn_kernels_dev_alloc(&codes, bc, &err) || qattn_kernels_dev_alloc(&scale, bs, &err) ||
            (bm && qattn_kernels_dev_alloc(&mean, bm, &err)) ||
            qattn_kernels_quant_fill(&qp[i], &pb, dx[i], (int64_t)H * N * D, (int64_t)N * D, D, H, N, (int64_t)B * N,
                                     NULL, ops[i], smooth[i], 0, codes, (float *)scale, (float *)mean, NULL, &err) ||
            (i == 2 && qattn_kernels_quant_set_layout(&qp[i], QATTN_KERNELS_LAYOUT_TRANSPOSED, &err))) {
            fprintf(stderr, "bench: operand %d: %s\n", i, err.msg);
            return 1;
        }
        size_t ws = qattn_kernels_quant_work_size(&qp[i]);
        if (ws && qattn_kernels_dev_alloc(&work, ws, &err)) {
            fprintf(stderr, "bench: %s\n", err.msg);
            return 1;
        }
        qp[i].work = work;
        const int takes = (qs->quant_routes(&qp[i]) >> QATTN_KERNELS_QROUTE_TILED) & 1u;
        const int stream = route_of(qs, &qp[i]) == QATTN_KERNELS_QROUTE_STREAMED;
        printf("operand %c: %s@%s%s: fused kernels %s%s\n", "qkv"[i], qattn_fmt_name(ops[i]->fmt),
               i == 0 ? "thread:16/8/1" : i == 1 ? "thread:128/8/2 smooth=k" : "channel", i == 2 ? " transposed" : "",
               takes ? "taken" : "NOT taken",
               stream ? " (streamed kernel: input read from DRAM once)" : "");
        if (!takes)
            return 1;
        floor_bytes += (double)in_bytes + (double)bc + (double)bs + (double)bm;
        traffic += (double)in_bytes + (double)bc + (double)bs + (double)bm;
        if (ws && !stream) /* the statistics pass reads the input again, writes and reads the partials */
            traffic += (double)in_bytes + 2.0 * (double)ws;
    }
    cudaEvent_t ev[4];
    for (int i = 0; i < 4; i++)
        CU(cudaEventCreate(&ev[i]));
    /* variants: the fast instance per operand, the fast instance with K and V by launch_quant_kv (at
     * once), the portable instance */
    const char *names[3] = {"quant_fast_in_fp16", "quant_fast_in_fp16 kv", "quant_portable_in_fp16"};
    const qattn_kernels_kvmode kv_mode = qattn_kernels_quant_kv_mode(qs->quant_kv_modes(&qp[1], &qp[2]),
                                                                    route_of(qs, &qp[1]), route_of(qs, &qp[2]));
    printf("K and V by launch_quant_kv: %s\n", kv_mode == QATTN_KERNELS_KV_ONE_GRID ? "one grid (half the device each)"
                                                : kv_mode == QATTN_KERNELS_KV_STREAMS
                                                    ? "side by side (two streams, half the device each)"
                                                    : "one after the other");
    float tq[3][4][BENCH_RUNS];
    for (int v = 0; v < 3; v++) {
        const qattn_kernels_sig *sig = find_sig(v == 2 ? "quant_portable_in_fp16" : "quant_fast_in_fp16");
        if (!sig)
            return 1;
        fprintf(stderr, "bench: %s\n", names[v]);
        for (int r = -BENCH_WARM; r < BENCH_RUNS; r++) {
            CU(cudaEventRecord(ev[0], 0));
            for (int i = 0; i < 3; i++) {
                int rc = v == 1 && i == 1 ? sig->launch_quant_kv(&qp[1], &qp[2], NULL, &err)
                         : v == 1 && i == 2 ? 0
                                            : sig->launch_quant(&qp[i], NULL, &err);
                if (rc) {
                    fprintf(stderr, "bench: %s\n", err.msg);
                    return 1;
                }
                CU(cudaEventRecord(ev[i + 1], 0));
            }
            CU(cudaEventSynchronize(ev[3]));
            if (r >= 0) {
                CU(cudaEventElapsedTime(&tq[v][0][r], ev[0], ev[3]));
                for (int i = 0; i < 3; i++)
                    CU(cudaEventElapsedTime(&tq[v][i + 1][r], ev[i], ev[i + 1]));
            }
        }
    }
    float tc[BENCH_RUNS];
    fprintf(stderr, "bench: copy\n");
    for (int r = -BENCH_WARM; r < BENCH_RUNS; r++) {
        CU(cudaEventRecord(ev[0], 0));
        CU(cudaMemcpyAsync(dcopy, dx[r & 1], in_bytes, cudaMemcpyDeviceToDevice, 0));
        CU(cudaEventRecord(ev[1], 0));
        CU(cudaEventSynchronize(ev[1]));
        if (r >= 0)
            CU(cudaEventElapsedTime(&tc[r], ev[0], ev[1]));
    }
    CU(cudaGetLastError());
    const float mc = median(tc, BENCH_RUNS);
    const double copy_gbs = 2.0 * (double)in_bytes / (mc * 1e-3) / 1e9;
    printf("device: %s\n", dev);
    printf("bytes per run: floor %.1f MB (fp16 Q, K, V read once; codes, scales, means written), kernel traffic %.1f MB\n",
           floor_bytes / 1e6, traffic / 1e6);
    printf("copy D2D %.1f MB: median %.4f ms = %.1f GB/s (read + write)\n", (double)in_bytes / 1e6, mc, copy_gbs);
    for (int v = 0; v < 3; v++) {
        const float m = median(tq[v][0], BENCH_RUNS);
        printf("%-24s median %.4f ms (q %.4f, k %.4f, v %.4f): floor %.1f GB/s = %.3f of copy; traffic %.1f GB/s = "
               "%.3f of copy\n",
               names[v], m, median(tq[v][1], BENCH_RUNS), median(tq[v][2], BENCH_RUNS), median(tq[v][3], BENCH_RUNS),
               floor_bytes / (m * 1e-3) / 1e9, floor_bytes / (m * 1e-3) / 1e9 / copy_gbs,
               traffic / (m * 1e-3) / 1e9, traffic / (m * 1e-3) / 1e9 / copy_gbs);
    }
    return 0;
}
