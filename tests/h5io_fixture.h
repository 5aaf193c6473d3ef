/* Helpers of the HDF5 activation-file tests (test_h5io.c, test_h5io_bad.c, test_h5io_guard.c):
 * a scratch directory, a valid file's metadata and layers, and the check of
 * a failed open (return code, message naming the file, one line). */
#ifndef QATTN_TESTS_H5IO_FIXTURE_H
#define QATTN_TESTS_H5IO_FIXTURE_H

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "check.h"
#include "qattn/h5io.h"

static inline void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[1024];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p)
            continue; /* no such path under the tests' scratch directories */
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            chmod(p, 0755);
            rm_tree(p);
        } else {
            unlink(p);
        }
    }
    closedir(d);
    rmdir(dir);
}

/* a fresh scratch directory dir and libhdf5's error printing off (the
 * tests check qattn's messages): 0, or -1 after one line on stderr */
static inline int scratch_begin(const char *dir)
{
    rm_tree(dir);
    if (mkdir(dir, 0755) != 0) {
        fprintf(stderr, "cannot create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

static inline float value_at(size_t layer, int which, size_t i)
{
    return (float)(0.37 * sin(0.7 * (double)i + 1.3 * (double)which + 0.11 * (double)layer) *
                   (1.0 + 0.5 * (double)which));
}

static inline void fill_meta(qattn_act_meta *m, int f16, int64_t *seqlens, size_t nseq)
{
    memset(m, 0, sizeof *m);
    snprintf(m->model, sizeof m->model, "%s", "test-model/1b");
    snprintf(m->source, sizeof m->source, "%s", "test_h5io");
    snprintf(m->license, sizeof m->license, "%s", "CC0-1.0");
    snprintf(m->text_source, sizeof m->text_source, "%s", "caf\xc3\xa9 (utf-8)");
    m->rope_applied = 1;
    m->causal = 1;
    m->has_eval_loss = 1;
    m->eval_loss = 2.125;
    m->has_vocab_size = 1;
    m->vocab_size = 32000;
    m->has_softmax_scale = 1;
    m->softmax_scale = 0.0625;
    m->nlayers = 3;
    m->hq = 4;
    m->hkv = 2;
    m->n = 9;
    m->d = 7;
    m->f16 = f16;
    m->seqlens = seqlens;
    m->nseq = nseq;
}

static inline void make_layer(size_t l, size_t hq, size_t hkv, size_t n, size_t d, float *q, float *k,
                       float *v)
{
    for (size_t i = 0; i < hq * n * d; i++)
        q[i] = value_at(l, 0, i) * 3.0f;
    for (size_t i = 0; i < hkv * n * d; i++) {
        k[i] = value_at(l, 1, i) * 100.0f; /* some values need fp16 rounding */
        v[i] = value_at(l, 2, i) * 1e-3f;  /* some fp16 subnormals */
    }
}

static inline void expect_open_fail(const char *path, int code, const char *needle, const char *what)
{
    qattn_act_file f;
    qattn_err err = {""};
    int rc = qattn_act_open(path, &f, &err);
    if (getenv("QATTN_TEST_VERBOSE"))
        printf("%-28s %s\n", what, err.msg);
    CHECK(rc == code, "%s: open returned %d, expected %d (%s)", what, rc, code, err.msg);
    CHECK_STR_CONTAINS(err.msg, needle);
    CHECK(strstr(err.msg, path) != NULL, "%s: message names the file: %s", what, err.msg);
    CHECK(strchr(err.msg, '\n') == NULL, "%s: one line", what);
    if (rc == 0)
        qattn_act_close(&f);
    qattn_act_close(&f); /* safe after a failed open */
}

#endif
