/* The AMD matrix-instruction wrappers (mfma_amd.h) in the host simulation,
 * on the simulated gfx942 and on gfx90a's instruction pairs:
 *   - known answers computed by hand: A[i][k] = [k == i] + 2 [k == 16 + i]
 *     picks rows i and 16 + i of B, so D[i][j] = B[i][j] + 2 B[16 + i][j];
 *   - random operands against a plain matrix product (int8 exact; e4m3
 *     within the fp32 rounding of 32 adds);
 *   - the e4m3 -> f16 conversion of gfx90a's path for all 256 codes, and the
 *     -0 clearing that gfx942's e4m3fnuz reading needs (0x80 is NaN there:
 *     without it the product is NaN, which is also checked).
 * Operands are packed as mfma_amd.h documents the layout: lane l = 16 g + r
 * holds A[r][8g .. 8g + 7] and B[8g .. 8g + 7][r] and gets D[4g + v][r].
 * The attention kernel itself is checked in test_kernels_sim. */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../tests/check.h"
#include "mfma_amd.h"

/* one instruction over one wave: kind 0 int8, 1 e4m3 (with or without the
 * -0 clearing); a, b: [64] lane words; di / df: [64][4] */
__global__ void probe(int kind, int fix, const uint64_t *a, const uint64_t *b, int *di, float *df)
{
    const int l = (int)threadIdx.x;
    if (kind == 0) {
        int d[4] = {0, 0, 0, 0};
        qattn_mfma_16x16x32_i8(d, a[l], b[l]);
        memcpy(di + 4 * l, d, sizeof d);
    } else {
        float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        qattn_mfma_16x16x32_e4m3(d, fix ? qattn_mfma_e4m3_fix64(a[l]) : a[l], fix ? qattn_mfma_e4m3_fix64(b[l]) : b[l]);
        const float u = qattn_mfma_e4m3_unit();
        for (int v = 0; v < 4; v++)
            df[4 * l + v] = d[v] * u;
    }
}

/* A [16][32] and B [32][16] bytes -> lane words; the result [16][16] back */
static void pack(const uint8_t (*A)[32], const uint8_t (*B)[16], uint64_t *a, uint64_t *b)
{
    for (int l = 0; l < 64; l++) {
        const int g = l / 16, r = l % 16;
        a[l] = b[l] = 0;
        for (int e = 0; e < 8; e++) {
            a[l] |= (uint64_t)A[r][8 * g + e] << (8 * e);
            b[l] |= (uint64_t)B[8 * g + e][r] << (8 * e);
        }
    }
}
template <typename T>
static void unpack(const T *dl, T (*D)[16])
{
    for (int l = 0; l < 64; l++)
        for (int v = 0; v < 4; v++)
            D[4 * (l / 16) + v][l % 16] = dl[4 * l + v];
}

static uint64_t rs = 99;
static unsigned rnd(void)
{
    uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (unsigned)((z ^ (z >> 31)) >> 32);
}

static void run(int kind, int fix, const uint8_t (*A)[32], const uint8_t (*B)[16], int (*Di)[16], float (*Df)[16])
{
    uint64_t a[64], b[64];
    int di[256];
    float df[256];
    pack(A, B, a, b);
    const uint64_t *pa = a, *pb = b; /* pointers: the launch copies its arguments */
    int *pdi = di;
    float *pdf = df;
    hipLaunchKernelGGL(probe, dim3(1), dim3(64), 0, (hipStream_t)0, kind, fix, pa, pb, pdi, pdf);
    CHECK(hipGetLastError() == hipSuccess, "launch");
    if (kind == 0)
        unpack(di, Di);
    else
        unpack(df, Df);
}

static void known_answers(const char *target)
{
    uint8_t A[16][32], B[32][16];
    int Di[16][16];
    float Df[16][16];
    /* int8: B[k][j] = k - j */
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 32; k++)
            A[i][k] = (uint8_t)((k == i) + 2 * (k == 16 + i));
    for (int k = 0; k < 32; k++)
        for (int j = 0; j < 16; j++)
            B[k][j] = (uint8_t)(int8_t)(k - j);
    run(0, 0, A, B, Di, NULL);
    int bad = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            bad += Di[i][j] != 3 * (i - j) + 32; /* (i - j) + 2 (16 + i - j) */
    CHECK(bad == 0, "%s int8 known answer: %d of 256 wrong (D[0][0] %d, expected 32)", target, bad, Di[0][0]);
    /* e4m3: 1.0 = 0x38, 2.0 = 0x40; B[k][j] = (k % 8) - (j % 4), small integers, exact */
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 32; k++)
            A[i][k] = k == i ? 0x38 : k == 16 + i ? 0x40 : 0x00;
    for (int k = 0; k < 32; k++)
        for (int j = 0; j < 16; j++)
            B[k][j] = qattn_num_e4m3_encode((float)(k % 8 - j % 4));
    run(1, 1, A, B, NULL, Df);
    bad = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            bad += Df[i][j] != (float)(3 * (i % 8 - j % 4)); /* (16 + i) % 8 == i % 8 */
    CHECK(bad == 0, "%s e4m3 known answer: %d of 256 wrong (D[1][0] %g, expected 3)", target, bad, (double)Df[1][0]);
    /* -0 (0x80) in place of every 0 of A: cleared, the same answer */
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 32; k++)
            if (A[i][k] == 0)
                A[i][k] = 0x80;
    run(1, 1, A, B, NULL, Df);
    bad = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            bad += Df[i][j] != (float)(3 * (i % 8 - j % 4));
    CHECK(bad == 0, "%s e4m3 with -0 codes, cleared: %d of 256 wrong", target, bad);
    run(1, 0, A, B, NULL, Df); /* not cleared: NaN on gfx942 (e4m3fnuz), -0 = 0 on gfx90a (f16) */
    const int gfx94 = strcmp(target, "gfx942") == 0;
    CHECK(gfx94 ? std::isnan(Df[0][0]) : Df[0][0] == 0.0f, "%s e4m3 with -0 codes, not cleared: D[0][0] %g", target,
          (double)Df[0][0]);
    printf("ok %s known answers\n", target);
}

static void random_products(const char *target)
{
    uint8_t A[16][32], B[32][16];
    int Di[16][16];
    float Df[16][16];
    int badi = 0, badf = 0;
    double worst = 0.0;
    for (int rep = 0; rep < 20; rep++) {
        for (int i = 0; i < 16; i++)
            for (int k = 0; k < 32; k++)
                A[i][k] = (uint8_t)rnd();
        for (int k = 0; k < 32; k++)
            for (int j = 0; j < 16; j++)
                B[k][j] = (uint8_t)rnd();
        run(0, 0, A, B, Di, NULL);
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                int e = 0;
                for (int k = 0; k < 32; k++)
                    e += (int8_t)A[i][k] * (int8_t)B[k][j];
                badi += Di[i][j] != e;
            }
        /* e4m3: no NaN codes (0x7f, 0xff) */
        for (int i = 0; i < 16; i++)
            for (int k = 0; k < 32; k++)
                if ((A[i][k] & 0x7f) == 0x7f)
                    A[i][k] ^= 1;
        for (int k = 0; k < 32; k++)
            for (int j = 0; j < 16; j++)
                if ((B[k][j] & 0x7f) == 0x7f)
                    B[k][j] ^= 1;
        run(1, 1, A, B, NULL, Df);
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                double e = 0.0, mag = 0.0;
                for (int k = 0; k < 32; k++) {
                    const double pr = (double)qattn_num_e4m3_decode(A[i][k]) * (double)qattn_num_e4m3_decode(B[k][j]);
                    e += pr;
                    mag += fabs(pr);
                }
                const double err = fabs((double)Df[i][j] - e);
                badf += !(err <= 32.0 * 0x1p-24 * mag); /* 32 fp32 adds */
                worst = err / (mag > 0 ? mag : 1.0) > worst ? err / (mag > 0 ? mag : 1.0) : worst;
            }
    }
    CHECK(badi == 0, "%s int8 random: %d of %d wrong", target, badi, 20 * 256);
    CHECK(badf == 0, "%s e4m3 random: %d of %d outside 32 fp32 ulp of the sum of |products|", target, badf, 20 * 256);
    printf("ok %s random products (e4m3: largest error %.2e of the sum of |products|)\n", target, worst);
}

int main(void)
{
    /* the conversions, on the host (plain functions in the simulation) */
    int bad = 0;
    for (unsigned c = 0; c < 256; c++) {
        if ((c & 0x7f) == 0x7f)
            continue; /* NaN */
        bad += qattn_num_f2u(qattn_num_fp16_decode((uint16_t)qattn_mfma_e4m3_f16(c))) !=
               qattn_num_f2u(qattn_num_e4m3_decode((uint8_t)c));
    }
    CHECK(bad == 0, "e4m3 -> f16: %d of 254 codes wrong", bad);
    bad = 0;
    for (unsigned c = 0; c < 256; c++)
        for (int pos = 0; pos < 4; pos++) {
            const uint32_t x = 0x3c7e0140u ^ (0x11u << (8 * ((pos + 1) & 3))); /* other bytes: no 0x80 */
            const uint32_t in = (x & ~(0xffu << (8 * pos))) | c << (8 * pos);
            const uint32_t want = c == 0x80 ? in & ~(0xffu << (8 * pos)) : in;
            bad += qattn_mfma_e4m3_fix(in) != want;
        }
    CHECK(bad == 0, "-0 clearing: %d of 1024 wrong", bad);
    printf("ok conversions\n");

    const char *targets[] = {"gfx942", "gfx90a"};
    for (int t = 0; t < 2; t++) {
        setenv("QATTN_SIM_MFMA", targets[t], 1);
        qattn_mfma_sim_target();
        known_answers(targets[t]);
        random_products(targets[t]);
    }
    return check_done();
}
