/* libqattn's flat interface for callers from other languages (python/qattn
 * over ctypes): plain pointers, sizes and strings, no structs; a failure
 * returns a negative QATTN_ERR_* code (qattn/error.h) with a one-line message
 * in the caller's buffer. The emulation and the float64 reference are those
 * of quant/ (qattn_emu_mha, qattn_ref_mha); the kernel list is kernels/'
 * registry, empty in a build without GPU kernels. */
#ifndef QATTN_LIB_H
#define QATTN_LIB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "0.1" (the project's version) */
const char *qattn_lib_version(void);

/* presets, in the order `qattn schemes` lists them */
size_t qattn_lib_scheme_count(void);
const char *qattn_lib_scheme_name(size_t i); /* NULL past the end */
const char *qattn_lib_scheme_spec(size_t i);
/* a spec string or preset name -> its canonical full spec in buf (len >= 512) */
int qattn_lib_scheme_parse(const char *spec, char *buf, size_t len, char *err, size_t errlen);

/* One batch element of attention with GQA (query head h reads kv head
 * h / (hq / hkv)). q: [hq, sq, d] fp32 row-major; k, v: [hkv, sk, d];
 * seqlens: [nseq] lengths of packed sequences (sq == sk, sum = sq) or NULL;
 * mask: "none", "causal", "causal-br", "window:L,R"; scale <= 0 means
 * 1 / sqrt(d). o: [hq, sq, d]; lse: [hq, sq] natural log, or NULL.
 * emulate: the scheme's exact emulation (o rounded to its output type);
 * reference: float64 attention. */
int qattn_lib_emulate(const char *scheme, const char *mask, double scale, const float *q, const float *k,
                      const float *v, size_t hq, size_t hkv, size_t sq, size_t sk, size_t d, const int64_t *seqlens,
                      size_t nseq, float *o, float *lse, char *err, size_t errlen);
int qattn_lib_reference(const char *mask, double scale, const float *q, const float *k, const float *v, size_t hq,
                        size_t hkv, size_t sq, size_t sk, size_t d, const int64_t *seqlens, size_t nseq, double *o,
                        double *lse, char *err, size_t errlen);

/* Attention on GPU tensors by the scheme's plan (the dispatcher's instances:
 * quantization kernels, then the attention kernel) on the caller's stream (a
 * cudaStream_t; NULL: the default stream), asynchronously: nothing is
 * allocated, copied or awaited. q, k, v: device pointers of dtype ("fp16",
 * "bf16" or "fp32") with element strides {batch, head, token} (channels
 * contiguous), [nseq, hq or hkv, seqlen, d] as the strides say; o: the
 * scheme's output type (`out`) with o_st; lse: [hq, Tq] fp32 (Tq = tokens_q,
 * or nseq x seqlen_q) or NULL. Varlen: cu_q, cu_k device [nseq + 1] int32
 * offsets (batch strides 0), tokens_q / tokens_k their last entries,
 * seqlen_q / seqlen_k the longest. workspace NULL: *ws_bytes receives the
 * bytes the plan needs and nothing runs; else it is device memory of at
 * least *ws_bytes bytes, 256-byte aligned. No NaN check (it would need a
 * sync). Errors: a scheme no instance takes (the message names the
 * property), shapes, a short workspace, device errors. */
int qattn_lib_gpu_attention(const char *scheme, const char *mask, double scale, const char *dtype, int nseq, int hq,
                            int hkv, int d, int seqlen_q, int seqlen_k, const void *q, const int64_t *q_st,
                            const void *k, const int64_t *k_st, const void *v, const int64_t *v_st, void *o,
                            const int64_t *o_st, float *lse, const int *cu_q, const int *cu_k, int64_t tokens_q,
                            int64_t tokens_k, void *workspace, size_t *ws_bytes, void *stream, char *err,
                            size_t errlen);
/* The same call in two steps, for callers that repeat a call shape (the
 * Python package): prepare takes everything but the pointers (lse and varlen
 * as flags), returns a handle >= 0 and the workspace bytes, or a negative
 * QATTN_ERR_*; run takes the pointers (lse, cu_q, cu_k given as prepared)
 * and returns 0, a negative QATTN_ERR_*, or QATTN_LIB_STALE when the handle's
 * entry was taken by another call shape since (LRU of 256): prepare again. */
#define QATTN_LIB_STALE 1
int qattn_lib_gpu_prepare(const char *scheme, const char *mask, double scale, const char *dtype, int nseq, int hq,
                          int hkv, int d, int seqlen_q, int seqlen_k, const int64_t *q_st, const int64_t *k_st,
                          const int64_t *v_st, const int64_t *o_st, int lse, int varlen, int64_t tokens_q,
                          int64_t tokens_k, size_t *ws_bytes, char *err, size_t errlen);
int qattn_lib_gpu_run(int handle, const void *q, const void *k, const void *v, void *o, float *lse,
                      const int *cu_q, const int *cu_k, void *workspace, size_t ws_bytes, void *stream, char *err,
                      size_t errlen);
/* the scheme's output type name ("bf16", "fp16", "fp32"), or NULL for a bad spec */
const char *qattn_lib_scheme_out(const char *scheme);

/* the GPU kernel instances this library was built with */
size_t qattn_lib_kernel_count(void);
const char *qattn_lib_kernel_name(size_t i); /* NULL past the end */
/* "wgmma", "mma", "mfma" or "portable" and the family ("attn-fwd", "quant", "decode", "sparse") */
const char *qattn_lib_kernel_path(size_t i);
const char *qattn_lib_kernel_family(size_t i);
/* `qattn kernels`' line for instance i into buf; returns buf ("" past the end) */
char *qattn_lib_kernel_describe(size_t i, char *buf, size_t len);
/* "nvidia ...", "amd ...", "host-sim" or "none" */
const char *qattn_lib_kernel_backend(void);

#ifdef __cplusplus
}
#endif

#endif
