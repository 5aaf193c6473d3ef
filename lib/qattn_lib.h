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

/* the GPU kernel instances this library was built with */
size_t qattn_lib_kernel_count(void);
const char *qattn_lib_kernel_name(size_t i); /* NULL past the end */
/* "wgmma", "mma", "mfma" or "portable" and the family ("attn-fwd", "quant", "decode") */
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
