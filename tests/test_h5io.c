/* HDF5 activation files: writer/reader round trips (float32, float16,
 * compressed), the writer's failures (nothing left behind) and Q rows read
 * by token. The reader's refusals of malformed files: test_h5io_bad.c.
 * Files live in ./test_h5io.d (created and removed). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "check.h"
#include "h5io_fixture.h"
#include "h5io_raw.h"
#include "qattn/formats.h"
#include "qattn/h5io.h"

#define DIR_ "test_h5io.d"
#define WDIR DIR_ "/w"

/* ------------------------------------------------------------------ */
/* scratch directory                                                   */
/* ------------------------------------------------------------------ */

/* number of entries in dir (0 when empty); the name of the first into first[] */
static int dir_entries(const char *dir, char *first, size_t size)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    if (first && size)
        first[0] = '\0';
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n == 0 && first)
            snprintf(first, size, "%s", e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* ------------------------------------------------------------------ */
/* round trips                                                         */
/* ------------------------------------------------------------------ */

static void test_round_trip(int f16)
{
    char path[256], tmpname[256];
    snprintf(path, sizeof path, "%s/rt_%s.h5", DIR_, f16 ? "f16" : "f32");
    int64_t seq[3] = {2, 4, 3};
    qattn_act_meta m;
    fill_meta(&m, f16, seq, 3);
    size_t nq = m.hq * m.n * m.d, nk = m.hkv * m.n * m.d;
    float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
    float *rq = malloc(nq * sizeof *q), *rk = malloc(nk * sizeof *k), *rv = malloc(nk * sizeof *v);
    qattn_err err = {""};
    qattn_act_writer w;
    int rc = qattn_act_write_begin(&w, path, &m, &err);
    CHECK(rc == 0, "write_begin: %s", err.msg);
    snprintf(tmpname, sizeof tmpname, ".rt_%s.h5.tmp.%ld", f16 ? "f16" : "f32", (long)getpid());
    CHECK_STR_CONTAINS(w.tmp, tmpname);
    CHECK(access(w.tmp, F_OK) == 0, "temp file %s exists while writing", w.tmp);
    CHECK(access(path, F_OK) != 0, "final path does not exist before commit");
    seq[0] = 99; /* the writer keeps its own copy */
    for (size_t l = 0; l < m.nlayers; l++) {
        make_layer(l, m.hq, m.hkv, m.n, m.d, q, k, v);
        rc = qattn_act_write_layer(&w, q, k, v, &err);
        CHECK(rc == 0, "write_layer %zu: %s", l, err.msg);
    }
    rc = qattn_act_write_commit(&w, &err);
    CHECK(rc == 0, "commit: %s", err.msg);
    CHECK(access(path, F_OK) == 0, "final file exists after commit");
    CHECK(dir_entries(DIR_, NULL, 0) >= 1, "directory listing");
    char tmpath[300];
    snprintf(tmpath, sizeof tmpath, "%s/%s", DIR_, tmpname);
    CHECK(access(tmpath, F_OK) != 0, "no temp left after commit");

    qattn_act_file f;
    rc = qattn_act_open(path, &f, &err);
    CHECK(rc == 0, "open: %s", err.msg);
    if (rc == 0) {
        const qattn_act_meta *r = &f.meta;
        CHECK(!strcmp(r->model, "test-model/1b"), "model '%s'", r->model);
        CHECK(!strcmp(r->source, "test_h5io"), "source '%s'", r->source);
        CHECK(!strcmp(r->license, "CC0-1.0"), "license '%s'", r->license);
        CHECK(!strcmp(r->text_source, "caf\xc3\xa9 (utf-8)"), "text_source '%s'", r->text_source);
        CHECK(r->rope_applied == 1 && r->causal == 1, "flags %d %d", r->rope_applied, r->causal);
        CHECK(r->has_eval_loss && r->eval_loss == 2.125, "eval_loss %g", r->eval_loss);
        CHECK(r->has_vocab_size && r->vocab_size == 32000, "vocab %ld", r->vocab_size);
        CHECK(r->has_softmax_scale && r->softmax_scale == 0.0625, "scale %g", r->softmax_scale);
        CHECK(r->nlayers == 3 && r->hq == 4 && r->hkv == 2 && r->n == 9 && r->d == 7,
              "shape %zu %zu %zu %zu %zu", r->nlayers, r->hq, r->hkv, r->n, r->d);
        CHECK(r->f16 == f16, "f16 flag %d", r->f16);
        CHECK(r->nseq == 3 && r->seqlens && r->seqlens[0] == 2 && r->seqlens[1] == 4 &&
                  r->seqlens[2] == 3, "seqlens");
        for (size_t l = 0; l < r->nlayers; l++) {
            make_layer(l, m.hq, m.hkv, m.n, m.d, q, k, v);
            rc = qattn_act_read_layer(&f, l, rq, rk, rv, &err);
            CHECK(rc == 0, "read_layer %zu: %s", l, err.msg);
            size_t bad = 0;
            for (size_t i = 0; i < nq; i++) {
                float want = f16 ? qattn_fp16_decode(qattn_fp16_encode(q[i])) : q[i];
                bad += memcmp(&want, &rq[i], sizeof want) != 0;
            }
            for (size_t i = 0; i < nk; i++) {
                float wk = f16 ? qattn_fp16_decode(qattn_fp16_encode(k[i])) : k[i];
                float wv = f16 ? qattn_fp16_decode(qattn_fp16_encode(v[i])) : v[i];
                bad += memcmp(&wk, &rk[i], sizeof wk) != 0;
                bad += memcmp(&wv, &rv[i], sizeof wv) != 0;
            }
            CHECK(bad == 0, "layer %zu: %zu values differ after the round trip", l, bad);
        }
        rc = qattn_act_read_layer(&f, 3, rq, rk, rv, &err);
        CHECK(rc == QATTN_ERR_ARG, "read_layer past the end: %d", rc);
        CHECK_STR_CONTAINS(err.msg, "the file has 3");
        qattn_act_close(&f);
        qattn_act_close(&f); /* idempotent */
    }

    /* what the file looks like to other readers (h5py): layout, filters,
     * the half type, string attributes */
    hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(fid, "layer_01/k", H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(d), t = H5Dget_type(d);
    CHECK(H5Pget_layout(dcpl) == H5D_CHUNKED, "chunked");
    hsize_t chunk[3] = {0, 0, 0};
    H5Pget_chunk(dcpl, 3, chunk);
    CHECK(chunk[0] == 1 && chunk[1] == 9 && chunk[2] == 7, "chunk per head: %llu %llu %llu",
          (unsigned long long)chunk[0], (unsigned long long)chunk[1],
          (unsigned long long)chunk[2]);
    CHECK(H5Pget_nfilters(dcpl) == 2, "two filters (shuffle, deflate)");
    unsigned flags;
    size_t nelem = 1;
    unsigned level = 0;
    H5Z_filter_t f1 = H5Pget_filter2(dcpl, 1, &flags, &nelem, &level, 0, NULL, NULL);
    CHECK(f1 == H5Z_FILTER_DEFLATE && level == 4, "deflate level 4 (filter %d level %u)",
          (int)f1, level);
    if (f16) {
        hid_t h = half_type();
        CHECK(H5Tequal(t, h) > 0, "dataset type equals h5py's float16 type");
        /* raw bits are the fp16 encoding */
        uint16_t raw[2 * 9 * 7];
        /* (a native integer memory type would convert values, not copy bits) */
        h = half_type();
        H5Dread(d, h, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw);
        H5Tclose(h);
        make_layer(1, m.hq, m.hkv, m.n, m.d, q, k, v);
        size_t bad = 0;
        for (size_t i = 0; i < nk; i++)
            bad += raw[i] != qattn_fp16_encode(k[i]);
        CHECK(bad == 0, "%zu raw float16 codes differ", bad);
    } else {
        CHECK(H5Tequal(t, H5T_IEEE_F32LE) > 0, "float32 little-endian");
    }
    H5Tclose(t);
    H5Pclose(dcpl);
    H5Dclose(d);
    hid_t a = H5Aopen(fid, "model", H5P_DEFAULT);
    hid_t at = H5Aget_type(a);
    /* fixed-length: reading it never touches the global heap */
    CHECK(H5Tget_class(at) == H5T_STRING && H5Tis_variable_str(at) == 0 &&
              H5Tget_size(at) == strlen(m.model) + 1 && H5Tget_cset(at) == H5T_CSET_UTF8,
          "model is a fixed-length UTF-8 string");
    H5Tclose(at);
    H5Aclose(a);
    H5Fclose(fid);

    free(q), free(k), free(v), free(rq), free(rk), free(rv);
}

/* raw-API file: fixed-length strings, bool enum, chunked gzip+shuffle with
 * chunks that do not divide the shape */
static void test_raw_compressed(int dtype)
{
    char path[256];
    snprintf(path, sizeof path, "%s/raw_gz_%d.h5", DIR_, dtype);
    rawspec s = {3, 6, 3, 11, 9, dtype, 1};
    raw_write(path, &s);
    qattn_act_file f;
    qattn_err err = {""};
    int rc = qattn_act_open(path, &f, &err);
    CHECK(rc == 0, "open compressed: %s", err.msg);
    if (rc)
        return;
    CHECK(!strcmp(f.meta.model, "raw-model"), "fixed-length model '%s'", f.meta.model);
    CHECK(!strcmp(f.meta.source, "test_h5io raw API"), "source '%s'", f.meta.source);
    CHECK(f.meta.causal == 1 && f.meta.rope_applied == 1, "bool enum and int32 flags");
    CHECK(!f.meta.has_eval_loss && !f.meta.has_vocab_size && !f.meta.has_softmax_scale,
          "optional attributes absent");
    CHECK(f.meta.seqlens == NULL && f.meta.nseq == 0, "no seqlens");
    CHECK(f.meta.f16 == (dtype == DT_F16), "dtype");
    size_t nq = 6 * 11 * 9, nk = 3 * 11 * 9;
    float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
    for (size_t l = 0; l < 3; l++) {
        rc = qattn_act_read_layer(&f, l, q, k, v, &err);
        CHECK(rc == 0, "read compressed layer %zu: %s", l, err.msg);
        size_t bad = 0;
        for (size_t i = 0; i < nq; i++) {
            float want = value_at(l, 0, i);
            if (dtype == DT_F16)
                want = qattn_fp16_decode(qattn_fp16_encode(want));
            bad += want != q[i];
        }
        for (size_t i = 0; i < nk; i++) {
            float wk = value_at(l, 1, i), wv = value_at(l, 2, i);
            if (dtype == DT_F16) {
                wk = qattn_fp16_decode(qattn_fp16_encode(wk));
                wv = qattn_fp16_decode(qattn_fp16_encode(wv));
            }
            bad += (wk != k[i]) + (wv != v[i]);
        }
        CHECK(bad == 0, "compressed layer %zu: %zu values differ", l, bad);
    }
    free(q), free(k), free(v);
    qattn_act_close(&f);
}

/* ------------------------------------------------------------------ */
/* writer failures leave nothing behind                                */
/* ------------------------------------------------------------------ */

static void test_writer_failures(void)
{
    mkdir(WDIR, 0755);
    char first[256];
    qattn_act_meta m;
    int64_t seq[2] = {4, 5};
    fill_meta(&m, 1, seq, 2);
    size_t nq = m.hq * m.n * m.d, nk = m.hkv * m.n * m.d;
    float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
    make_layer(0, m.hq, m.hkv, m.n, m.d, q, k, v);
    qattn_err err = {""};
    qattn_act_writer w;

    /* abort after one layer */
    int rc = qattn_act_write_begin(&w, WDIR "/abort.h5", &m, &err);
    CHECK(rc == 0, "begin: %s", err.msg);
    rc = qattn_act_write_layer(&w, q, k, v, &err);
    CHECK(rc == 0, "layer: %s", err.msg);
    CHECK(dir_entries(WDIR, first, sizeof first) == 1 && first[0] == '.',
          "only the hidden temp exists while writing (%s)", first);
    qattn_act_write_abort(&w);
    qattn_act_write_abort(&w); /* idempotent */
    CHECK(dir_entries(WDIR, first, sizeof first) == 0, "abort leaves nothing (found %s)", first);

    /* NaN in a layer: error, nothing left */
    rc = qattn_act_write_begin(&w, WDIR "/nan.h5", &m, &err);
    CHECK(rc == 0, "begin: %s", err.msg);
    rc = qattn_act_write_layer(&w, q, k, v, &err);
    k[(1 * m.n + 2) * m.d + 6] = NAN;
    rc = qattn_act_write_layer(&w, q, k, v, &err);
    CHECK(rc == QATTN_ERR_NAN, "NaN in write_layer: %d (%s)", rc, err.msg);
    CHECK_STR_CONTAINS(err.msg, "/layer_01/k has NaN at [head 1, token 2, channel 6]");
    CHECK(dir_entries(WDIR, first, sizeof first) == 0, "NaN leaves nothing (found %s)", first);
    qattn_act_write_abort(&w); /* harmless after a failure */
    k[(1 * m.n + 2) * m.d + 6] = 1.0f;

    /* beyond the float16 range */
    rc = qattn_act_write_begin(&w, WDIR "/range.h5", &m, &err);
    CHECK(rc == 0, "begin: %s", err.msg);
    v[5] = 70000.0f;
    rc = qattn_act_write_layer(&w, q, k, v, &err);
    CHECK(rc == QATTN_ERR_RANGE, "f16 overflow: %d (%s)", rc, err.msg);
    CHECK_STR_CONTAINS(err.msg, "beyond the float16 range");
    CHECK(dir_entries(WDIR, first, sizeof first) == 0, "overflow leaves nothing (found %s)",
          first);
    v[5] = 0.5f;

    /* commit before all layers */
    rc = qattn_act_write_begin(&w, WDIR "/short.h5", &m, &err);
    CHECK(rc == 0, "begin: %s", err.msg);
    rc = qattn_act_write_layer(&w, q, k, v, &err);
    rc = qattn_act_write_commit(&w, &err);
    CHECK(rc == QATTN_ERR_ARG, "commit short: %d (%s)", rc, err.msg);
    CHECK_STR_CONTAINS(err.msg, "only 1 of 3 layers were written");
    CHECK(dir_entries(WDIR, first, sizeof first) == 0, "short commit leaves nothing (found %s)",
          first);

    /* bad meta */
    qattn_act_meta bad = m;
    bad.hq = 3;
    rc = qattn_act_write_begin(&w, WDIR "/badmeta.h5", &bad, &err);
    CHECK(rc == QATTN_ERR_ARG, "Hq 3 Hkv 2: %d", rc);
    CHECK_STR_CONTAINS(err.msg, "not a multiple");
    bad = m;
    seq[1] = 6;
    rc = qattn_act_write_begin(&w, WDIR "/badmeta.h5", &bad, &err);
    CHECK(rc == QATTN_ERR_ARG, "seqlens sum: %d", rc);
    CHECK_STR_CONTAINS(err.msg, "seqlens sum to more than N = 9");
    seq[1] = 5;
    CHECK(dir_entries(WDIR, first, sizeof first) == 0, "bad meta leaves nothing (found %s)",
          first);

    /* a directory that does not exist */
    rc = qattn_act_write_begin(&w, WDIR "/no/such/dir/x.h5", &m, &err);
    CHECK(rc == QATTN_ERR_IO, "missing dir: %d (%s)", rc, err.msg);
    CHECK_STR_CONTAINS(err.msg, "cannot create temporary file");
    CHECK(dir_entries(WDIR, first, sizeof first) == 0, "missing dir leaves nothing");

    /* a "directory" that is a regular file (unwritable even for root) */
    FILE *t = fopen(WDIR "/plainfile", "w");
    fclose(t);
    rc = qattn_act_write_begin(&w, WDIR "/plainfile/x.h5", &m, &err);
    CHECK(rc == QATTN_ERR_IO, "file as dir: %d (%s)", rc, err.msg);
    CHECK_STR_CONTAINS(err.msg, "Not a directory");
    unlink(WDIR "/plainfile");

    /* a read-only directory (only meaningful when not root) */
    if (geteuid() != 0) {
        mkdir(WDIR "/ro", 0555);
        chmod(WDIR "/ro", 0555);
        rc = qattn_act_write_begin(&w, WDIR "/ro/x.h5", &m, &err);
        CHECK(rc == QATTN_ERR_IO, "read-only dir: %d (%s)", rc, err.msg);
        CHECK_STR_CONTAINS(err.msg, "Permission denied");
        CHECK(dir_entries(WDIR "/ro", first, sizeof first) == 0, "read-only dir stays empty");
        chmod(WDIR "/ro", 0755);
        rmdir(WDIR "/ro");
    }
    CHECK(dir_entries(WDIR, first, sizeof first) == 0, "writer dir empty at the end (found %s)",
          first);

    free(q), free(k), free(v);
}


/* a file of the DeepSeek-V4 layout's kind: q holds the last rows only (q_offset), rope_dim */
static void test_q_rows(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/qrows.h5", DIR_);
    int64_t seq[1] = {9};
    qattn_act_meta m;
    fill_meta(&m, 0, seq, 1);
    m.q_offset = 5;
    m.rope_dim = 3;
    size_t nq = m.hq * (m.n - m.q_offset) * m.d, nk = m.hkv * m.n * m.d;
    float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
    float *rq = malloc(nq * sizeof *q), *rk = malloc(nk * sizeof *k), *rv = malloc(nk * sizeof *v);
    qattn_err err = {""};
    qattn_act_writer w;
    int rc = qattn_act_write_begin(&w, path, &m, &err);
    CHECK(rc == 0, "q rows: write_begin: %s", err.msg);
    for (size_t l = 0; l < m.nlayers && rc == 0; l++) {
        make_layer(l, m.hq, m.hkv, m.n - m.q_offset, m.d, q, k, v); /* q: hq x 4 rows */
        make_layer(l, 0, m.hkv, m.n, m.d, q, k, v);
        rc = qattn_act_write_layer(&w, q, k, v, &err);
        CHECK(rc == 0, "q rows: write_layer %zu: %s", l, err.msg);
    }
    rc = rc ? rc : qattn_act_write_commit(&w, &err);
    CHECK(rc == 0, "q rows: commit: %s", err.msg);

    expect_open_fail(path, QATTN_ERR_SCHEMA, "query rows from position 5 on only", "q rows: plain open refuses");
    qattn_act_file f;
    rc = qattn_act_open_rows(path, &f, &err);
    CHECK(rc == 0, "q rows: open_rows: %s", err.msg);
    if (rc == 0) {
        CHECK(f.meta.q_offset == 5 && f.meta.rope_dim == 3 && f.meta.n == 9 && f.meta.hq == 4,
              "q rows: meta q_offset %zu rope_dim %d n %zu", f.meta.q_offset, f.meta.rope_dim, f.meta.n);
        make_layer(2, m.hq, m.hkv, m.n - m.q_offset, m.d, q, k, v);
        make_layer(2, 0, m.hkv, m.n, m.d, q, k, v);
        rc = qattn_act_read_layer(&f, 2, rq, rk, rv, &err);
        CHECK(rc == 0, "q rows: read_layer: %s", err.msg);
        CHECK(!memcmp(q, rq, nq * sizeof *q) && !memcmp(k, rk, nk * sizeof *k) && !memcmp(v, rv, nk * sizeof *v),
              "q rows: layer 2 read back as written");
        qattn_act_close(&f);
    }
    /* q_offset that does not match q's rows */
    hid_t fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    put_int_attr(fid, "q_offset", 4);
    H5Fclose(fid);
    rc = qattn_act_open_rows(path, &f, &err);
    CHECK(rc == QATTN_ERR_SCHEMA && strstr(err.msg, "with q_offset = 4"), "q rows: mismatched q_offset: %s", err.msg);
    fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    put_int_attr(fid, "q_offset", 5);
    put_int_attr(fid, "rope_dim", 8);
    H5Fclose(fid);
    rc = qattn_act_open_rows(path, &f, &err);
    CHECK(rc == QATTN_ERR_SCHEMA && strstr(err.msg, "'rope_dim' is 8, more than the head dim 7"), "q rows: rope_dim > d: %s",
          err.msg);
    fid = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    put_int_attr(fid, "rope_dim", 3);
    put_int_attr(fid, "q_offset", -1);
    H5Fclose(fid);
    rc = qattn_act_open_rows(path, &f, &err);
    CHECK(rc == QATTN_ERR_SCHEMA && strstr(err.msg, "'q_offset' is -1"), "q rows: negative q_offset: %s", err.msg);

    /* the writer refuses what the reader would */
    char bad[256];
    snprintf(bad, sizeof bad, "%s/qrows_bad.h5", DIR_);
    int64_t two[2] = {4, 5};
    fill_meta(&m, 0, two, 2);
    m.q_offset = 5;
    CHECK(qattn_act_write_begin(&w, bad, &m, &err) == QATTN_ERR_ARG && strstr(err.msg, "one sequence"),
          "writer: q_offset with two sequences: %s", err.msg);
    fill_meta(&m, 0, seq, 1);
    m.q_offset = 9;
    CHECK(qattn_act_write_begin(&w, bad, &m, &err) == QATTN_ERR_ARG && strstr(err.msg, "q_offset < N"),
          "writer: q_offset = N: %s", err.msg);
    m.q_offset = 0;
    m.rope_dim = 8;
    CHECK(qattn_act_write_begin(&w, bad, &m, &err) == QATTN_ERR_ARG && strstr(err.msg, "rope_dim = 8"),
          "writer: rope_dim > d: %s", err.msg);
    CHECK(access(bad, F_OK) != 0, "writer: nothing left after a refusal");
    free(q), free(k), free(v), free(rq), free(rk), free(rv);
}

int main(void)
{
    if (scratch_begin(DIR_))
        return 1;
    test_round_trip(0);
    test_round_trip(1);
    test_raw_compressed(DT_F32);
    test_raw_compressed(DT_F16);
    test_writer_failures();
    test_q_rows();
    rm_tree(DIR_);
    return check_done();
}
