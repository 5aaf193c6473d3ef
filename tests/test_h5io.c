/* HDF5 activation files: writer/reader round trips (float32, float16,
 * compressed) and one case per malformed input, each checking the return
 * code and a distinctive part of the message. Malformed files are made with
 * the raw HDF5 C API. Files live in ./test_h5io.d (created and removed). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
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

static const rawspec base_spec = {2, 4, 2, 6, 5, DT_F32, 0};

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
/* bad inputs                                                          */
/* ------------------------------------------------------------------ */

static int case_no;

/* new valid raw file for a case; returns its path in buf */
static const char *fresh(char *buf, size_t size, const rawspec *s)
{
    snprintf(buf, size, "%s/bad_%02d.h5", DIR_, ++case_no);
    raw_write(buf, s);
    return buf;
}

static void test_bad_files(void)
{
    char p[256];
    hid_t fid;

    /* missing file */
    snprintf(p, sizeof p, "%s/does_not_exist.h5", DIR_);
    expect_open_fail(p, QATTN_ERR_IO, "No such file", "missing file");

    /* plain text file, and an empty one */
    snprintf(p, sizeof p, "%s/plain.txt", DIR_);
    FILE *t = fopen(p, "w");
    fputs("layer,q,k,v\n1,2,3,4\n", t);
    fclose(t);
    expect_open_fail(p, QATTN_ERR_IO, "not an HDF5 file", "text file");
    snprintf(p, sizeof p, "%s/empty.h5", DIR_);
    t = fopen(p, "w");
    fclose(t);
    expect_open_fail(p, QATTN_ERR_IO, "not an HDF5 file", "empty file");

    /* a directory */
    expect_open_fail(DIR_, QATTN_ERR_IO, "not a regular file", "directory");

    /* truncated to half its size */
    {
        rawspec s = {4, 4, 2, 64, 16, DT_F32, 0};
        fresh(p, sizeof p, &s);
        struct stat st;
        stat(p, &st);
        CHECK(truncate(p, st.st_size / 2) == 0, "truncate");
        expect_open_fail(p, QATTN_ERR_IO, "truncated", "truncated file");
    }

    /* attributes */
    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    H5Adelete(fid, "schema");
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "missing root attribute 'schema'", "no schema");

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    put_str_attr(fid, "schema", "qattn-activations/2", 0);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "'schema' is 'qattn-activations/2', expected",
                     "wrong schema");

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    put_int_attr(fid, "schema", 1);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "'schema' must be a string, found int32",
                     "integer schema");

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    H5Adelete(fid, "text_source");
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "missing root attribute 'text_source'",
                     "no text_source");

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    put_int_attr(fid, "rope_applied", 3);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "'rope_applied' is 3, must be 0 or 1", "rope 3");

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    put_float_attr(fid, "causal", 1.0, 32);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "'causal' must be an integer, found float32",
                     "float causal");

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    put_float_attr(fid, "softmax_scale", -0.5, 32);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "'softmax_scale' is -0.5, must be > 0",
                     "negative softmax_scale");
    /* finite but absurd: every logit inf, every metric NaN, exit 0 before */
    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    put_float_attr(fid, "softmax_scale", 1e300, 64);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "'softmax_scale' is 1e+300, must be > 0 and at most 10000",
                     "softmax_scale 1e300");
    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    put_float_attr(fid, "softmax_scale", 10000.0, 64);
    H5Fclose(fid);
    {
        qattn_act_file f;
        qattn_err e2 = {""};
        int rc = qattn_act_open(p, &f, &e2);
        CHECK(rc == 0 && f.meta.softmax_scale == 10000.0, "softmax_scale 1e4 accepted: %s", e2.msg);
        if (rc == 0)
            qattn_act_close(&f);
    }

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    put_float_attr(fid, "eval_loss", NAN, 32);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_NAN, "'eval_loss' is NaN", "NaN eval_loss");

    /* layers */
    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    H5Ldelete(fid, "layer_00", H5P_DEFAULT);
    H5Ldelete(fid, "layer_01", H5P_DEFAULT);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "no layer groups", "no layers");

    {
        rawspec s = base_spec;
        s.layers = 3;
        fresh(p, sizeof p, &s);
        fid = raw_rw(p);
        H5Ldelete(fid, "layer_01", H5P_DEFAULT);
        H5Fclose(fid);
        expect_open_fail(p, QATTN_ERR_SCHEMA, "/layer_02 exists but /layer_01 is missing",
                         "layer gap");
    }

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    H5Ldelete(fid, "layer_00", H5P_DEFAULT);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "/layer_01 exists but /layer_00 is missing",
                     "no layer_00");

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    H5Lmove(fid, "layer_01", fid, "layer_1", H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "/layer_1 is not a valid layer name", "layer_1");

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    H5Ldelete(fid, "layer_01/k", H5P_DEFAULT);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "/layer_01 has no dataset 'k'", "missing k");

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    {
        hsize_t d2[2] = {4, 30};
        hid_t g = H5Gopen2(fid, "layer_00", H5P_DEFAULT);
        put_dataset(g, "q", DT_F32, 2, d2, 0, 0, 0, NULL);
        H5Gclose(g);
    }
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "/layer_00/q has rank 2 (shape [4, 30]), expected rank 3",
                     "rank-2 q");

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    {
        hsize_t dk[3] = {2, 6, 5};
        hid_t g = H5Gopen2(fid, "layer_01", H5P_DEFAULT);
        put_dataset(g, "v", DT_I32, 3, dk, 0, 1, 2, NULL);
        H5Gclose(g);
    }
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "/layer_01/v has type int32; only float16 or float32",
                     "int32 dataset");

    {
        rawspec s = base_spec;
        s.dtype = DT_F64;
        fresh(p, sizeof p, &s);
        expect_open_fail(p, QATTN_ERR_SCHEMA,
                         "/layer_00/q has type float64; only float16 or float32 are accepted",
                         "float64 dataset");
    }

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    {
        hsize_t dk[3] = {2, 6, 5};
        hid_t g = H5Gopen2(fid, "layer_00", H5P_DEFAULT);
        put_dataset(g, "k", DT_F16, 3, dk, 0, 0, 1, NULL);
        H5Gclose(g);
    }
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "/layer_00/k is float16 but /layer_00/q is float32",
                     "mixed dtypes");

    {
        rawspec s = base_spec;
        s.hq = 3;
        s.hkv = 2;
        fresh(p, sizeof p, &s);
        expect_open_fail(p, QATTN_ERR_SCHEMA, "q has 3 heads, not a multiple of k/v's 2 heads",
                         "Hq=3 Hkv=2");
    }

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    put_layer(fid, 1, 4, 2, 5, 5, DT_F32, 0);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA,
                     "/layer_01/q has shape [4, 5, 5] but /layer_00/q has [4, 6, 5]",
                     "N differs");

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    put_layer(fid, 1, 4, 2, 6, 5, DT_F16, 0);
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "/layer_01/q is float16 but /layer_00/q is float32",
                     "dtype differs across layers");

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    {
        hsize_t dk[3] = {2, 6, 4};
        hid_t g = H5Gopen2(fid, "layer_00", H5P_DEFAULT);
        put_dataset(g, "v", DT_F32, 3, dk, 0, 0, 2, NULL);
        H5Gclose(g);
    }
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "/layer_00/v has shape [2, 6, 4] but /layer_00/k has",
                     "v differs from k");

    {
        rawspec s = base_spec;
        s.d = 0;
        fresh(p, sizeof p, &s);
        expect_open_fail(p, QATTN_ERR_SCHEMA, "d (head dim) is 0, must be >= 1", "d = 0");
        s = base_spec;
        s.n = 0;
        fresh(p, sizeof p, &s);
        expect_open_fail(p, QATTN_ERR_SCHEMA, "N (tokens) is 0, must be >= 1", "N = 0");
        s = base_spec;
        s.hkv = 0;
        fresh(p, sizeof p, &s);
        expect_open_fail(p, QATTN_ERR_SCHEMA, "/layer_00/k has shape [0, 6, 5]: heads is 0",
                         "Hkv = 0");
    }

    fresh(p, sizeof p, &base_spec);
    fid = raw_rw(p);
    {
        hid_t g = H5Gopen2(fid, "layer_00", H5P_DEFAULT);
        H5Ldelete(g, "q", H5P_DEFAULT);
        hid_t g2 = H5Gcreate2(g, "q", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Gclose(g2);
        H5Gclose(g);
    }
    H5Fclose(fid);
    expect_open_fail(p, QATTN_ERR_SCHEMA, "/layer_00/q is not a dataset", "q is a group");

    /* seqlens */
    {
        long long s1[2] = {2, 3};
        fresh(p, sizeof p, &base_spec);
        fid = raw_rw(p);
        put_seqlens(fid, s1, 2);
        H5Fclose(fid);
        expect_open_fail(p, QATTN_ERR_SCHEMA, "/seqlens sums to 5 but N = 6", "seqlens sum");
        long long s2[3] = {3, 0, 3};
        fresh(p, sizeof p, &base_spec);
        fid = raw_rw(p);
        put_seqlens(fid, s2, 3);
        H5Fclose(fid);
        expect_open_fail(p, QATTN_ERR_SCHEMA, "/seqlens[1] is 0", "seqlens zero");
        long long s3[2] = {4, 4};
        fresh(p, sizeof p, &base_spec);
        fid = raw_rw(p);
        put_seqlens(fid, s3, 2);
        H5Fclose(fid);
        expect_open_fail(p, QATTN_ERR_SCHEMA, "/seqlens sums to more than N = 6",
                         "seqlens too long");
        fresh(p, sizeof p, &base_spec);
        fid = raw_rw(p);
        {
            hsize_t d1[1] = {2};
            float two[2] = {3, 3};
            put_dataset(fid, "seqlens", DT_F32, 1, d1, 0, 0, 0, two);
        }
        H5Fclose(fid);
        expect_open_fail(p, QATTN_ERR_SCHEMA, "/seqlens has type float32, expected an integer",
                         "float seqlens");
        long long s4[2] = {1, 5};
        fresh(p, sizeof p, &base_spec);
        fid = raw_rw(p);
        put_seqlens(fid, s4, 2);
        H5Fclose(fid);
        qattn_act_file f;
        qattn_err err = {""};
        int rc = qattn_act_open(p, &f, &err);
        CHECK(rc == 0 && f.meta.nseq == 2 && f.meta.seqlens[1] == 5, "good seqlens: %s",
              err.msg);
        if (rc == 0)
            qattn_act_close(&f);
    }
}

/* Data the file does not hold: a declared shape must be backed by written
 * storage inside the file (unwritten parts read as zeros: a few KB could
 * declare a run of hours or of terabytes). Each case replaces
 * /layer_00/q ([4, 6, 5] float32) of a valid file. */
static void test_storage(void)
{
    char p[256];
    hsize_t dims[3] = {4, 6, 5};
    float vals[4 * 6 * 5];
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        vals[i] = (float)i;
    for (int kind = 0; kind < 3; kind++) {
        fresh(p, sizeof p, &base_spec);
        hid_t fid = raw_rw(p), g = H5Gopen2(fid, "layer_00", H5P_DEFAULT);
        H5Ldelete(g, "q", H5P_DEFAULT);
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), sp = H5Screate_simple(3, dims, NULL);
        char ext[300];
        snprintf(ext, sizeof ext, "%s/ext_%d.bin", DIR_, case_no);
        if (kind == 0) {
            hsize_t chunk[3] = {1, 6, 5};
            H5Pset_chunk(dcpl, 3, chunk);
        } else if (kind == 2) {
            H5Pset_external(dcpl, ext, 0, sizeof vals);
        }
        hid_t d = H5Dcreate2(g, "q", H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        if (kind == 0) { /* head 0 only: 1 of the 4 chunks */
            hsize_t start[3] = {0, 0, 0}, count[3] = {1, 6, 5};
            hid_t msp = H5Screate_simple(3, count, NULL);
            H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, count, NULL);
            H5Dwrite(d, H5T_NATIVE_FLOAT, msp, sp, H5P_DEFAULT, vals);
            H5Sclose(msp);
        } else if (kind == 2) {
            H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, vals);
        } /* kind 1: contiguous, never written: no storage at all */
        H5Dclose(d);
        H5Sclose(sp);
        H5Pclose(dcpl);
        H5Gclose(g);
        H5Fclose(fid);
        static const char *needle[3] = {"/layer_00/q declares shape [4, 6, 5] but only 1 of its 4 chunks",
                                        "/layer_00/q declares shape [4, 6, 5] (480 bytes) but holds 0 bytes",
                                        "/layer_00/q keeps its data in other files (external storage)"};
        static const char *what[3] = {"unwritten chunks", "contiguous, unwritten", "external storage"};
        expect_open_fail(p, QATTN_ERR_SCHEMA, needle[kind], what[kind]);
        if (kind == 2)
            unlink(ext);
    }
}

/* NaN / Inf in the data: open succeeds, read_layer names the element */
static void test_nonfinite(void)
{
    static const char *names[3] = {"q", "k", "v"};
    for (int dt = 0; dt < 2; dt++) {
        int dtype = dt ? DT_F16 : DT_F32;
        for (int which = 0; which < 3; which++) {
            for (int inf = 0; inf < 2; inf++) {
                char p[256];
                rawspec s = base_spec;
                s.dtype = dtype;
                s.compress = inf; /* half of them compressed */
                fresh(p, sizeof p, &s);
                size_t heads = which == 0 ? 4 : 2, count = heads * 6 * 5;
                float *x = malloc(count * sizeof *x);
                for (size_t i = 0; i < count; i++)
                    x[i] = value_at(1, which, i);
                /* head 1, token 4, channel 3 */
                size_t at = (1 * 6 + 4) * 5 + 3;
                x[at] = inf ? -INFINITY : NAN;
                hid_t fid = raw_rw(p);
                hid_t g = H5Gopen2(fid, "layer_01", H5P_DEFAULT);
                hsize_t dims[3] = {heads, 6, 5};
                put_dataset(g, names[which], dtype, 3, dims, s.compress, 1, which, x);
                H5Gclose(g);
                H5Fclose(fid);
                free(x);

                qattn_act_file f;
                qattn_err err = {""};
                int rc = qattn_act_open(p, &f, &err);
                CHECK(rc == 0, "open does not read the data: %s", err.msg);
                if (rc)
                    continue;
                float *q = malloc(4 * 30 * sizeof *q), *k = malloc(2 * 30 * sizeof *k),
                      *v = malloc(2 * 30 * sizeof *v);
                rc = qattn_act_read_layer(&f, 0, q, k, v, &err);
                CHECK(rc == 0, "layer 0 is fine: %s", err.msg);
                rc = qattn_act_read_layer(&f, 1, q, k, v, &err);
                if (getenv("QATTN_TEST_VERBOSE"))
                    printf("%-28s %s\n", "non-finite", err.msg);
                CHECK(rc == QATTN_ERR_NAN, "read_layer %s %s: %d (%s)", names[which],
                      inf ? "Inf" : "NaN", rc, err.msg);
                char want[128];
                snprintf(want, sizeof want, "/layer_01/%s has %s at [head 1, token 4, channel 3]",
                         names[which], inf ? "Inf" : "NaN");
                CHECK_STR_CONTAINS(err.msg, want);
                CHECK_STR_CONTAINS(err.msg, p);
                free(q), free(k), free(v);
                qattn_act_close(&f);
            }
        }
    }
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
    test_bad_files();
    test_storage();
    test_nonfinite();
    test_writer_failures();
    test_q_rows();
    rm_tree(DIR_);
    return check_done();
}
