/* HDF5 activation files, schema "qattn-activations/1" (docs/DESIGN.md
 * "Activation files (HDF5)"):
 *
 *   root attributes: schema, model, source, license, text_source (strings),
 *                    rope_applied, causal (integers 0/1),
 *                    optional eval_loss (float), vocab_size (integer),
 *                    softmax_scale (float: the model's own scale when it
 *                    is not 1/sqrt(d), e.g. Gemma's query_pre_attn_scalar;
 *                    finite, > 0 and at most QATTN_SOFTMAX_SCALE_MAX)
 *   /layer_00, /layer_01, ...: datasets q [Hq, N, d], k [Hkv, N, d],
 *                              v [Hkv, N, d], float16 or float32
 *   optional /seqlens int64 [nseq], summing to N
 *
 * Every layer must have the same Hq, Hkv, N, d (and Hq % Hkv == 0). Every
 * failure gives a message naming the file, dataset or attribute and what is
 * wrong with it.
 *
 * A corrupt file can crash libhdf5 or make it loop forever, so
 * qattn_act_open validates a file in a forked child process first, under
 * limits (QATTN_H5_CHECK_SECONDS, QATTN_H5_CHECK_MB in the environment
 * override the defaults below); it opens the file itself only after the
 * child succeeded. */
#ifndef QATTN_H5IO_H
#define QATTN_H5IO_H

#include <stddef.h>
#include <stdint.h>

#include "qattn/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QATTN_ACT_SCHEMA "qattn-activations/1"
/* The largest softmax_scale accepted. Models use about 1/sqrt(d) (0.03 to
 * 0.3); 1e4 x the largest |q.k| of float16 data (d x 65504^2, 2.8e14 at
 * d = 65536) stays far inside float, while a scale like 1e300 turns every
 * logit into inf and every metric into NaN. */
#define QATTN_SOFTMAX_SCALE_MAX 1e4

/* The isolated check's limits: wall-clock seconds, and MiB of address space
 * on top of what the process held when it forked. */
#define QATTN_H5_CHECK_SECONDS 30
#define QATTN_H5_CHECK_MB 1024

typedef struct qattn_act_meta {
    char model[256];
    char source[256];
    char license[256];
    char text_source[512];
    int rope_applied;      /* 1: Q/K after rotary embedding */
    int causal;            /* 1: the model attends causally */
    int has_eval_loss;
    double eval_loss;      /* held-out loss per token, natural log */
    int has_vocab_size;
    long vocab_size;
    int has_softmax_scale;
    double softmax_scale;
    size_t nlayers, hq, hkv, n, d;
    size_t q_offset;       /* q holds the query rows of positions q_offset..n-1 only
                            * ([hq, n - q_offset, d]; one sequence): attribute
                            * q_offset, 0 when absent */
    int rope_dim;          /* the last rope_dim channels carry the rotary part
                            * (DeepSeek-V4's row: 448 + 64); 0: not stated */
    int f16;               /* 1: datasets stored as float16 */
    int vlen_strings;      /* 1: variable-length string attributes (as h5py
                            * writes them, in the file's global heap); 0:
                            * fixed-length, what the writer writes */
    int64_t *seqlens;      /* [nseq] owned, or NULL when absent */
    size_t nseq;
} qattn_act_meta;

typedef struct qattn_act_file {
    qattn_act_meta meta;
    char path[1024];
    long long fid;         /* hid_t of the open file */
} qattn_act_file;

/* Open and validate the whole file (attributes, every layer's datasets,
 * shapes, types, seqlens). Does not read the activations themselves. The
 * validation runs first in a child process: a child that crashes, runs out
 * of time or memory gives QATTN_ERR_IO, "PATH: corrupt HDF5 file: ...";
 * bad limits in the environment QATTN_ERR_ARG; no fork QATTN_ERR_NOMEM. */
int qattn_act_open(const char *path, qattn_act_file *f, qattn_err *err);
/* As qattn_act_open, and also a file whose q holds only its last query rows
 * (meta.q_offset > 0), which qattn_act_open refuses. */
int qattn_act_open_rows(const char *path, qattn_act_file *f, qattn_err *err);
/* The limits qattn_act_open's check runs under (environment or defaults):
 * 0, or QATTN_ERR_ARG naming the bad variable. */
int qattn_act_check_limits(double *seconds, double *mb, qattn_err *err);
/* For fuzzers: functions the check's child calls first thing (start) and
 * after it wrote its result (end); NULL members, or h NULL: none. */
typedef struct qattn_act_check_hooks {
    void (*child_start)(void);
    void (*child_end)(void);
} qattn_act_check_hooks;
void qattn_act_set_check_hooks(const qattn_act_check_hooks *h);
/* Read layer l into q [hq, n - q_offset, d], k [hkv, n, d], v [hkv, n, d] as float32.
 * Fails with QATTN_ERR_NAN naming layer, dataset and element on NaN/Inf. */
int qattn_act_read_layer(qattn_act_file *f, size_t layer, float *q, float *k,
                         float *v, qattn_err *err);
void qattn_act_close(qattn_act_file *f);

/* Writer: data goes to a temporary file beside `path`, renamed on commit;
 * abort (or any failure) removes it, so no partial file is ever left. */
typedef struct qattn_act_writer {
    qattn_act_meta meta;   /* copy of the caller's (seqlens copied too) */
    char path[1024];
    char tmp[1100];
    long long fid;
    size_t written;        /* layers written so far */
} qattn_act_writer;

int qattn_act_write_begin(qattn_act_writer *w, const char *path,
                          const qattn_act_meta *meta, qattn_err *err);
/* the temporary file write_begin creates for path (".<base>.tmp.<pid>"
 * beside it), so that a caller can arrange its removal on a signal before
 * the file exists; 0, or -1 when buf is too small or path names a directory */
int qattn_act_tmp_path(const char *path, char *buf, size_t len);
/* layers must be written in order 0, 1, ...; q/k/v as in read_layer */
int qattn_act_write_layer(qattn_act_writer *w, const float *q, const float *k,
                          const float *v, qattn_err *err);
/* all meta.nlayers layers written: close and rename into place */
int qattn_act_write_commit(qattn_act_writer *w, qattn_err *err);
void qattn_act_write_abort(qattn_act_writer *w);

void qattn_act_meta_free(qattn_act_meta *m);

#ifdef __cplusplus
}
#endif
#endif
