/* Helpers of the GPU commands (see gpu_util.h). */
#include "gpu_util.h"

#ifdef QATTN_HAVE_GPU
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "qattn/formats.h"

static int reaches(const qattn_kernels_sig *sig, const char *spec, qattn_scheme *s)
{
    qattn_err err;
    if (qattn_scheme_parse(spec, s, &err))
        return 0;
    qattn_kernels_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.nseq = 1;
    pb.hq = pb.hkv = 2;
    pb.d = sig->head_dim;
    pb.seqlen_q = pb.seqlen_k = 256;
    pb.in = s->q.fmt == QATTN_FMT_BF16 ? QATTN_FMT_BF16 : QATTN_FMT_FP16;
    pb.cc = -1;                  /* whichever device runs it */
    pb.paths = 1u << sig->path;  /* sig, not a more preferred path's instance */
    const qattn_kernels_sig *a = NULL;
    return qattn_kernels_find(s, &pb, &a, NULL, &err) == 0 && a == sig;
}

int qattn_gpu_scheme_for(const qattn_kernels_sig *sig, qattn_scheme *s, char *spec, size_t len)
{
    if (sig->family != QATTN_KERNELS_FAMILY_ATTN_FWD)
        return -1;
    for (size_t i = 0; i < qattn_scheme_preset_count(); i++)
        if (reaches(sig, qattn_scheme_preset_name(i), s)) {
            snprintf(spec, len, "%s", qattn_scheme_preset_name(i));
            return 0;
        }
    char buf[512];
    const char *acc = sig->acc == QATTN_ACC_FP16   ? "fp16"
                      : sig->acc == QATTN_ACC_FP22 ? (sig->two_level ? "fp22+fp32:64" : "fp22")
                                                   : "fp32";
    const int scaled_pv = qattn_fmt_is_scaled(sig->p);
    /* kblock 64 (or the instance's largest, if smaller), then half of it: a
     * vendor path that takes exactly 64 (MFMA) is picked before the portable
     * instance of the same formats */
    const int kb0 = sig->kblock_max < 64 ? sig->kblock_max : 64;
    for (int kb = kb0; kb >= 1 && kb * 2 >= kb0; kb /= 2) {
        snprintf(buf, sizeof buf,
                 "q=%s@thread:32/8/1 k=%s@thread:64/8/2 p=%s%s v=%s%s smooth=k acc=%s kblock=%d out=bf16",
                 qattn_fmt_name(sig->q), qattn_fmt_name(sig->k), qattn_fmt_name(sig->p),
                 scaled_pv && (sig->p_static & 2) ? "@static" : "", qattn_fmt_name(sig->v),
                 qattn_fmt_is_scaled(sig->v) ? "@channel" : "", acc, kb);
        if (reaches(sig, buf, s)) {
            snprintf(spec, len, "%s", buf);
            return 0;
        }
    }
    /* the mma.sync path's layout (sage2-8b-sm90's groups) with the instance's Q/K codes, e.g. int4 */
    snprintf(buf, sizeof buf,
             "q=%s@thread:16/8/1 k=%s@thread:128/8/2 p=e4m3@static v=e4m3@channel smooth=k acc=fp22+fp32:128 "
             "kblock=128 out=bf16",
             qattn_fmt_name(sig->q), qattn_fmt_name(sig->k));
    if (reaches(sig, buf, s)) {
        snprintf(spec, len, "%s", buf);
        return 0;
    }
    return -1;
}

static double urand(uint64_t *st)
{
    uint64_t z = (*st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

void qattn_gpu_make_input(float *x, size_t n, size_t d, double offs, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        const size_t c = i % d;
        const double a = urand(state), b = urand(state);
        const double g = sqrt(-2.0 * log(a)) * cos(6.283185307179586 * b);
        const double v = g * (0.5 + (double)(c % 7) * 0.2) + offs * (double)((int)((c * 37) % 11) - 5);
        x[i] = qattn_fp16_decode(qattn_fp16_encode((float)v));
    }
}

void qattn_gpu_device_slug(const char *name, char *slug, size_t len)
{
    static const char *known[] = {"H100", "H200", "H800", "H20", "A100", "L40S", "L4", "MI300X", "MI250X", "GH200", "B200"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strstr(name, known[i])) {
            size_t j = 0;
            for (; known[i][j] && j + 1 < len; j++)
                slug[j] = (char)tolower((unsigned char)known[i][j]);
            slug[j] = 0;
            return;
        }
    size_t j = 0;
    for (; name[j] && j + 1 < len; j++)
        slug[j] = isalnum((unsigned char)name[j]) ? (char)tolower((unsigned char)name[j]) : '-';
    while (j > 0 && slug[j - 1] == '-')
        j--;
    slug[j] = 0;
}

void qattn_gpu_date(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%d", &tm);
}
#endif
