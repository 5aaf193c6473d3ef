/* libqattn's flat interface (qattn_lib.h) over quant/ and kernels/. */
#include "qattn_lib.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "qattn/attn.h"
#include "qattn/error.h"
#include "qattn/formats.h"
#include "qattn/scheme.h"
#ifdef QATTN_LIB_WITH_KERNELS
#include "qattn_kernels.h"
#endif

const char *qattn_lib_version(void) { return QATTN_LIB_VERSION; }

size_t qattn_lib_scheme_count(void) { return qattn_scheme_preset_count(); }
const char *qattn_lib_scheme_name(size_t i)
{
    return i < qattn_scheme_preset_count() ? qattn_scheme_preset_name(i) : NULL;
}
const char *qattn_lib_scheme_spec(size_t i)
{
    return i < qattn_scheme_preset_count() ? qattn_scheme_preset_spec(i) : NULL;
}

/* the message of e into the caller's buffer; returns rc */
static int lib_fail(int rc, const qattn_err *e, char *err, size_t errlen)
{
    if (err && errlen > 0)
        snprintf(err, errlen, "%s", e->msg);
    return rc;
}

int qattn_lib_scheme_parse(const char *spec, char *buf, size_t len, char *err, size_t errlen)
{
    qattn_err e = {{0}};
    qattn_scheme s;
    if (!spec || !buf || len < 512)
        return lib_fail(qattn_err_set(&e, QATTN_ERR_ARG, "scheme parse: no spec, or an output buffer under 512 bytes"),
                        &e, err, errlen);
    int rc = qattn_scheme_parse(spec, &s, &e);
    if (rc)
        return lib_fail(rc, &e, err, errlen);
    qattn_scheme_format(&s, buf, len);
    return QATTN_OK;
}

/* the problem of one batch element as quant/'s structs: the checks both calls share */
static int lib_problem(const char *mask, const float *q, const float *k, const float *v, size_t hq, size_t hkv,
                       size_t sq, size_t sk, size_t d, const int64_t *seqlens, size_t nseq, qattn_mha *a, qattn_mask *m,
                       qattn_err *e)
{
    int rc = qattn_mask_parse(mask ? mask : "none", m, e);
    if (rc)
        return rc;
    if (!q || !k || !v)
        return qattn_err_set(e, QATTN_ERR_ARG, "attention: q, k and v are required");
    if (hq == 0 || hkv == 0 || sq == 0 || sk == 0 || d == 0)
        return qattn_err_set(e, QATTN_ERR_ARG, "attention: empty shape (hq %zu, hkv %zu, sq %zu, sk %zu, d %zu)", hq,
                             hkv, sq, sk, d);
    if (hq % hkv)
        return qattn_err_set(e, QATTN_ERR_ARG, "attention: %zu query heads is not a multiple of %zu kv heads", hq, hkv);
    if (seqlens) {
        if (sq != sk)
            return qattn_err_set(e, QATTN_ERR_ARG, "attention: packed sequences need as many queries as keys (%zu, %zu)",
                                 sq, sk);
        int64_t total = 0;
        for (size_t i = 0; i < nseq; i++) {
            if (seqlens[i] < 0)
                return qattn_err_set(e, QATTN_ERR_ARG, "attention: sequence %zu has length %lld", i,
                                     (long long)seqlens[i]);
            total += seqlens[i];
        }
        if (total != (int64_t)sq)
            return qattn_err_set(e, QATTN_ERR_ARG, "attention: sequence lengths sum to %lld, not to the %zu tokens",
                                 (long long)total, sq);
    }
    if ((rc = qattn_finite_check(q, hq * sq * d, "attention", "q", e)) ||
        (rc = qattn_finite_check(k, hkv * sk * d, "attention", "k", e)) ||
        (rc = qattn_finite_check(v, hkv * sk * d, "attention", "v", e)))
        return rc;
    a->q = q, a->k = k, a->v = v;
    a->hq = hq, a->hkv = hkv, a->sq = sq, a->sk = sk, a->d = d;
    a->seqlens = seqlens, a->nseq = seqlens ? nseq : 0;
    return QATTN_OK;
}

int qattn_lib_emulate(const char *scheme, const char *mask, double scale, const float *q, const float *k,
                      const float *v, size_t hq, size_t hkv, size_t sq, size_t sk, size_t d, const int64_t *seqlens,
                      size_t nseq, float *o, float *lse, char *err, size_t errlen)
{
    qattn_err e = {{0}};
    qattn_scheme s;
    qattn_mha a;
    qattn_mask m;
    int rc = qattn_scheme_parse(scheme ? scheme : "", &s, &e);
    if (!rc)
        rc = lib_problem(mask, q, k, v, hq, hkv, sq, sk, d, seqlens, nseq, &a, &m, &e);
    if (!rc && !o)
        rc = qattn_err_set(&e, QATTN_ERR_ARG, "emulate: no output buffer");
    if (!rc)
        rc = qattn_emu_mha(&s, &a, &m, scale, o, lse, &e);
    return rc ? lib_fail(rc, &e, err, errlen) : QATTN_OK;
}

int qattn_lib_reference(const char *mask, double scale, const float *q, const float *k, const float *v, size_t hq,
                        size_t hkv, size_t sq, size_t sk, size_t d, const int64_t *seqlens, size_t nseq, double *o,
                        double *lse, char *err, size_t errlen)
{
    qattn_err e = {{0}};
    qattn_mha a;
    qattn_mask m;
    int rc = lib_problem(mask, q, k, v, hq, hkv, sq, sk, d, seqlens, nseq, &a, &m, &e);
    if (!rc && !o)
        rc = qattn_err_set(&e, QATTN_ERR_ARG, "reference: no output buffer");
    if (!rc)
        rc = qattn_ref_mha(&a, &m, scale, o, lse, &e);
    return rc ? lib_fail(rc, &e, err, errlen) : QATTN_OK;
}

const char *qattn_lib_scheme_out(const char *scheme)
{
    qattn_scheme s;
    qattn_err e;
    return scheme && !qattn_scheme_parse(scheme, &s, &e) ? qattn_fmt_name(s.out) : NULL;
}

#ifdef QATTN_LIB_WITH_KERNELS
/* Prepared calls: one entry per call shape (shapes, strides, dtype, scheme, mask, scale, device).
 * A handle is the entry's index and generation; an entry taken over by another shape (the least
 * recently used, when all are in use) makes old handles stale. Its plan, once a run made it,
 * moves onto each run's tensors and workspace (qattn_kernels_plan_rebase) instead of being
 * dispatched and filled again. */
#define LIB_PREP_BITS 8
#define LIB_PREP_MAX (1 << LIB_PREP_BITS)
typedef struct lib_key {
    char scheme[512], mask[64], dtype[8];
    double scale;
    int nseq, hq, hkv, d, seqlen_q, seqlen_k, cc, lse, varlen;
    int64_t st[4][3], tokens_q, tokens_k;
} lib_key;
typedef struct lib_prep {
    int used, have_plan;
    unsigned gen;
    unsigned long stamp;
    lib_key key;
    qattn_scheme s;
    qattn_kernels_problem pb;
    qattn_kernels_io io; /* have_plan: the tensors and workspace the plan points at; else no tensors */
    qattn_kernels_plan plan;
} lib_prep;
static lib_prep lib_preps[LIB_PREP_MAX];
static unsigned long lib_clock;
static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;

int qattn_lib_gpu_prepare(const char *scheme, const char *mask, double scale, const char *dtype, int nseq, int hq,
                          int hkv, int d, int seqlen_q, int seqlen_k, const int64_t *q_st, const int64_t *k_st,
                          const int64_t *v_st, const int64_t *o_st, int lse, int varlen, int64_t tokens_q,
                          int64_t tokens_k, size_t *ws_bytes, char *err, size_t errlen)
{
    qattn_err e = {{0}};
    qattn_scheme s;
    qattn_kernels_problem pb;
    memset(&pb, 0, sizeof pb);
    int rc = qattn_scheme_parse(scheme ? scheme : "", &s, &e);
    if (!rc)
        rc = qattn_mask_parse(mask ? mask : "none", &pb.mask, &e);
    if (!rc && (!dtype || qattn_fmt_parse(dtype, &pb.in) ||
                (pb.in != QATTN_FMT_FP16 && pb.in != QATTN_FMT_BF16 && pb.in != QATTN_FMT_FP32)))
        rc = qattn_err_set(&e, QATTN_ERR_ARG, "gpu attention: dtype '%s' (fp16, bf16 or fp32)", dtype ? dtype : "");
    if (!rc && (nseq <= 0 || hq <= 0 || hkv <= 0 || d <= 0 || seqlen_q <= 0 || seqlen_k <= 0 || hq % hkv))
        rc = qattn_err_set(&e, QATTN_ERR_ARG, "gpu attention: shape nseq %d, heads %d / %d, d %d, lengths %d / %d",
                           nseq, hq, hkv, d, seqlen_q, seqlen_k);
    if (!rc && (!ws_bytes || !q_st || !k_st || !v_st || !o_st))
        rc = qattn_err_set(&e, QATTN_ERR_ARG, "gpu attention: missing strides or workspace size");
    if (rc)
        return lib_fail(rc, &e, err, errlen);
    pb.nseq = nseq, pb.hq = hq, pb.hkv = hkv, pb.d = d, pb.seqlen_q = seqlen_q, pb.seqlen_k = seqlen_k;
    pb.varlen = varlen != 0, pb.lse = lse != 0, pb.scale = scale;
    qattn_kernels_io io;
    memset(&io, 0, sizeof io);
    io.q = (qattn_kernels_tensor){NULL, q_st[0], q_st[1], q_st[2]};
    io.k = (qattn_kernels_tensor){NULL, k_st[0], k_st[1], k_st[2]};
    io.v = (qattn_kernels_tensor){NULL, v_st[0], v_st[1], v_st[2]};
    io.o = (qattn_kernels_tensor){NULL, o_st[0], o_st[1], o_st[2]};
    io.ws_mode = 1;
    io.tokens_q = tokens_q, io.tokens_k = tokens_k;
    if ((rc = qattn_kernels_plan_workspace(&s, &pb, &io, ws_bytes, &e)))
        return lib_fail(rc, &e, err, errlen);
    lib_key key;
    memset(&key, 0, sizeof key);
    snprintf(key.scheme, sizeof key.scheme, "%s", scheme);
    snprintf(key.mask, sizeof key.mask, "%s", mask ? mask : "none");
    snprintf(key.dtype, sizeof key.dtype, "%s", dtype);
    key.scale = scale, key.nseq = nseq, key.hq = hq, key.hkv = hkv, key.d = d;
    key.seqlen_q = seqlen_q, key.seqlen_k = seqlen_k, key.cc = qattn_kernels_dev_cc();
    key.lse = lse != 0, key.varlen = varlen != 0, key.tokens_q = tokens_q, key.tokens_k = tokens_k;
    const int64_t *sts[4] = {q_st, k_st, v_st, o_st};
    for (int i = 0; i < 4; i++)
        memcpy(key.st[i], sts[i], sizeof key.st[i]);
    pthread_mutex_lock(&lib_lock);
    int slot = 0;
    for (int i = 0; i < LIB_PREP_MAX; i++) {
        lib_prep *c = &lib_preps[i];
        if (c->used && !memcmp(&c->key, &key, sizeof key)) {
            slot = i;
            goto found;
        }
        if (!c->used || (lib_preps[slot].used && c->stamp < lib_preps[slot].stamp))
            slot = i; /* a free entry, else the least recently used */
    }
    lib_prep *c = &lib_preps[slot];
    c->used = 1, c->have_plan = 0, c->gen++, c->key = key, c->s = s, c->pb = pb, c->io = io;
found:
    lib_preps[slot].stamp = ++lib_clock;
    int h = (int)(((lib_preps[slot].gen & 0x7fffffu) << LIB_PREP_BITS) | (unsigned)slot);
    pthread_mutex_unlock(&lib_lock);
    return h;
}

int qattn_lib_gpu_run(int handle, const void *q, const void *k, const void *v, void *o, float *lse,
                      const int *cu_q, const int *cu_k, void *workspace, size_t ws_bytes, void *stream, char *err,
                      size_t errlen)
{
    qattn_err e = {{0}};
    if (handle < 0)
        return lib_fail(qattn_err_set(&e, QATTN_ERR_ARG, "gpu attention: no prepared call %d", handle), &e, err,
                        errlen);
    const int slot = handle & (LIB_PREP_MAX - 1);
    const unsigned gen = (unsigned)handle >> LIB_PREP_BITS;
    lib_prep *c = &lib_preps[slot];
    qattn_scheme s;
    qattn_kernels_problem pb;
    qattn_kernels_io io, was;
    qattn_kernels_plan pl;
    int have;
    pthread_mutex_lock(&lib_lock);
    if (!c->used || (c->gen & 0x7fffffu) != gen) {
        pthread_mutex_unlock(&lib_lock);
        snprintf(err, errlen, "gpu attention: prepared call %d was replaced by another shape", handle);
        return QATTN_LIB_STALE;
    }
    c->stamp = ++lib_clock;
    s = c->s, pb = c->pb, was = c->io, have = c->have_plan;
    if (have)
        pl = c->plan;
    pthread_mutex_unlock(&lib_lock);
    int rc = QATTN_OK;
    if (!q || !k || !v || !o || !workspace)
        rc = qattn_err_set(&e, QATTN_ERR_ARG, "gpu attention: q, k, v, o and the workspace are required");
    else if (!!lse != pb.lse || (!!cu_q != pb.varlen) || (!!cu_k != pb.varlen))
        rc = qattn_err_set(&e, QATTN_ERR_ARG, "gpu attention: lse and cu_seqlens as prepared (lse %d, varlen %d)",
                           pb.lse, pb.varlen);
    if (rc)
        return lib_fail(rc, &e, err, errlen);
    io = was;
    io.q.data = (void *)q, io.k.data = (void *)k, io.v.data = (void *)v, io.o.data = o, io.lse = lse;
    io.cu_seqlens_q_dev = cu_q, io.cu_seqlens_k_dev = cu_k;
    io.workspace = workspace, io.ws_bytes = ws_bytes;
    rc = have ? qattn_kernels_plan_rebase(&pl, &was, &io, &e) : qattn_kernels_plan_init(&pl, &s, &pb, &io, &e);
    if (!rc)
        rc = qattn_kernels_plan_quantize(&pl, stream, 0, &e);
    if (!rc)
        rc = qattn_kernels_plan_attend(&pl, stream, &e);
    if (!rc) {
        pthread_mutex_lock(&lib_lock);
        if (c->used && (c->gen & 0x7fffffu) == gen)
            c->plan = pl, c->io = io, c->have_plan = 1;
        pthread_mutex_unlock(&lib_lock);
    }
    return rc ? lib_fail(rc, &e, err, errlen) : QATTN_OK;
}

int qattn_lib_gpu_attention(const char *scheme, const char *mask, double scale, const char *dtype, int nseq, int hq,
                            int hkv, int d, int seqlen_q, int seqlen_k, const void *q, const int64_t *q_st,
                            const void *k, const int64_t *k_st, const void *v, const int64_t *v_st, void *o,
                            const int64_t *o_st, float *lse, const int *cu_q, const int *cu_k, int64_t tokens_q,
                            int64_t tokens_k, void *workspace, size_t *ws_bytes, void *stream, char *err,
                            size_t errlen)
{
    qattn_err e = {{0}};
    if (!!cu_q != !!cu_k || !ws_bytes)
        return lib_fail(qattn_err_set(&e, QATTN_ERR_ARG, "gpu attention: one of cu_q / cu_k, or no workspace size"),
                        &e, err, errlen);
    size_t need = 0;
    int h, rc;
    do { /* again when another thread took the entry between the two calls */
        h = qattn_lib_gpu_prepare(scheme, mask, scale, dtype, nseq, hq, hkv, d, seqlen_q, seqlen_k, q_st, k_st, v_st,
                                  o_st, lse != NULL, cu_q != NULL, tokens_q, tokens_k, &need, err, errlen);
        if (h < 0)
            return h;
        if (!workspace) {
            *ws_bytes = need;
            return QATTN_OK;
        }
        rc = qattn_lib_gpu_run(h, q, k, v, o, lse, cu_q, cu_k, workspace, *ws_bytes, stream, err, errlen);
    } while (rc == QATTN_LIB_STALE);
    return rc;
}

size_t qattn_lib_kernel_count(void) { return qattn_kernels_count(); }
const char *qattn_lib_kernel_name(size_t i) { return i < qattn_kernels_count() ? qattn_kernels_get(i)->name : NULL; }
const char *qattn_lib_kernel_path(size_t i)
{
    return i < qattn_kernels_count() ? qattn_kernels_path_name(qattn_kernels_get(i)->path) : NULL;
}
const char *qattn_lib_kernel_family(size_t i)
{
    static const char *const names[] = {"quant", "attn-fwd", "decode", "sparse"};
    if (i >= qattn_kernels_count())
        return NULL;
    const unsigned f = (unsigned)qattn_kernels_get(i)->family;
    return f < sizeof names / sizeof names[0] ? names[f] : "?";
}
char *qattn_lib_kernel_describe(size_t i, char *buf, size_t len)
{
    if (!buf || len == 0)
        return buf;
    if (i >= qattn_kernels_count()) {
        buf[0] = '\0';
        return buf;
    }
    return qattn_kernels_describe(qattn_kernels_get(i), buf, len);
}
const char *qattn_lib_kernel_backend(void) { return qattn_kernels_backend(); }
#else
size_t qattn_lib_kernel_count(void) { return 0; }
const char *qattn_lib_kernel_name(size_t i) { return (void)i, NULL; }
const char *qattn_lib_kernel_path(size_t i) { return (void)i, NULL; }
const char *qattn_lib_kernel_family(size_t i) { return (void)i, NULL; }
char *qattn_lib_kernel_describe(size_t i, char *buf, size_t len)
{
    (void)i;
    if (buf && len > 0)
        buf[0] = '\0';
    return buf;
}
const char *qattn_lib_kernel_backend(void) { return "none"; }
static int lib_no_kernels(char *err, size_t errlen)
{
    qattn_err e = {{0}};
    return lib_fail(qattn_err_set(&e, QATTN_ERR_ARG, "gpu attention: this libqattn was built without GPU kernels"),
                    &e, err, errlen);
}

int qattn_lib_gpu_prepare(const char *scheme, const char *mask, double scale, const char *dtype, int nseq, int hq,
                          int hkv, int d, int seqlen_q, int seqlen_k, const int64_t *q_st, const int64_t *k_st,
                          const int64_t *v_st, const int64_t *o_st, int lse, int varlen, int64_t tokens_q,
                          int64_t tokens_k, size_t *ws_bytes, char *err, size_t errlen)
{
    (void)scheme, (void)mask, (void)scale, (void)dtype, (void)nseq, (void)hq, (void)hkv, (void)d, (void)seqlen_q;
    (void)seqlen_k, (void)q_st, (void)k_st, (void)v_st, (void)o_st, (void)lse, (void)varlen, (void)tokens_q;
    (void)tokens_k, (void)ws_bytes;
    return lib_no_kernels(err, errlen);
}

int qattn_lib_gpu_run(int handle, const void *q, const void *k, const void *v, void *o, float *lse,
                      const int *cu_q, const int *cu_k, void *workspace, size_t ws_bytes, void *stream, char *err,
                      size_t errlen)
{
    (void)handle, (void)q, (void)k, (void)v, (void)o, (void)lse, (void)cu_q, (void)cu_k, (void)workspace;
    (void)ws_bytes, (void)stream;
    return lib_no_kernels(err, errlen);
}

int qattn_lib_gpu_attention(const char *scheme, const char *mask, double scale, const char *dtype, int nseq, int hq,
                            int hkv, int d, int seqlen_q, int seqlen_k, const void *q, const int64_t *q_st,
                            const void *k, const int64_t *k_st, const void *v, const int64_t *v_st, void *o,
                            const int64_t *o_st, float *lse, const int *cu_q, const int *cu_k, int64_t tokens_q,
                            int64_t tokens_k, void *workspace, size_t *ws_bytes, void *stream, char *err,
                            size_t errlen)
{
    (void)scheme, (void)mask, (void)scale, (void)dtype, (void)nseq, (void)hq, (void)hkv, (void)d, (void)seqlen_q;
    (void)seqlen_k, (void)q, (void)q_st, (void)k, (void)k_st, (void)v, (void)v_st, (void)o, (void)o_st, (void)lse;
    (void)cu_q, (void)cu_k, (void)tokens_q, (void)tokens_k, (void)workspace, (void)ws_bytes, (void)stream;
    return lib_no_kernels(err, errlen);
}
#endif
