/* HDF5 activation files: one case per malformed input, storage layout and
 * non-finite value (h5io_read.c), each checking the return code and a
 * distinctive part of the message. Malformed files are made with the raw
 * HDF5 C API. Files live in ./test_h5io_bad.d (created and removed). */
#define _POSIX_C_SOURCE 200809L
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

#define DIR_ "test_h5io_bad.d"

static const rawspec base_spec = {2, 4, 2, 6, 5, DT_F32, 0};

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

int main(void)
{
    if (scratch_begin(DIR_))
        return 1;
    test_bad_files();
    test_storage();
    test_nonfinite();
    rm_tree(DIR_);
    return check_done();
}
