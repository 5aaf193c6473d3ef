/* Activation files written by hand with the raw HDF5 API (test_h5io.c, test_h5io_bad.c): the
 * attributes, datasets and layers h5py or a damaged writer would leave, to
 * test what qattn_act_open accepts and refuses. */
#ifndef QATTN_TESTS_H5IO_RAW_H
#define QATTN_TESTS_H5IO_RAW_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "qattn/formats.h"
#include "qattn/h5io.h"

enum { DT_F32, DT_F16, DT_F64, DT_I32 };

typedef struct rawspec {
    size_t layers, hq, hkv, n, d;
    int dtype;
    int compress;
} rawspec;

static inline hid_t half_type(void)
{
    /* exactly as h5py builds numpy float16 */
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(t, 15, 10, 5, 0, 10);
    H5Tset_size(t, 2);
    H5Tset_ebias(t, 15);
    return t;
}

/* (re)write scalar attribute name of obj: stored as ftype, val read as mtype */
static inline void put_scalar_attr(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *val)
{
    if (H5Aexists(obj, name) > 0)
        H5Adelete(obj, name);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, mtype, val);
    H5Aclose(a);
    H5Sclose(sp);
}

static inline void put_str_attr(hid_t obj, const char *name, const char *val, int fixed)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (fixed) {
        H5Tset_size(t, strlen(val) ? strlen(val) : 1);
        H5Tset_strpad(t, H5T_STR_NULLPAD);
    } else {
        H5Tset_size(t, H5T_VARIABLE);
        H5Tset_cset(t, H5T_CSET_UTF8);
    }
    put_scalar_attr(obj, name, t, t, fixed ? (const void *)val : (const void *)&val);
    H5Tclose(t);
}

static inline void put_int_attr(hid_t obj, const char *name, int val)
{
    put_scalar_attr(obj, name, H5T_STD_I32LE, H5T_NATIVE_INT, &val);
}

/* a float32 attribute, or float64 with bits 64 */
static inline void put_float_attr(hid_t obj, const char *name, double val, int bits)
{
    put_scalar_attr(obj, name, bits == 64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, &val);
}

/* numpy bool as h5py writes it: enum {FALSE = 0, TRUE = 1} over int8 */
static inline void put_bool_attr(hid_t obj, const char *name, int val)
{
    hid_t t = H5Tenum_create(H5T_NATIVE_SCHAR);
    signed char f = 0, tr = 1, v = (signed char)val;
    H5Tenum_insert(t, "FALSE", &f);
    H5Tenum_insert(t, "TRUE", &tr);
    put_scalar_attr(obj, name, t, t, &v);
    H5Tclose(t);
}

/* (Re)create dataset `name` under obj with the given type, rank and dims,
 * filled from `which`-dependent values (or `fill` when non-NULL: float32). */
static inline void put_dataset(hid_t obj, const char *name, int dtype, int rank, const hsize_t *dims,
                        int compress, size_t layer, int which, const float *fill)
{
    if (H5Lexists(obj, name, H5P_DEFAULT) > 0)
        H5Ldelete(obj, name, H5P_DEFAULT);
    size_t count = 1;
    for (int i = 0; i < rank; i++)
        count *= (size_t)dims[i];
    hid_t ftype, mtype;
    void *buf;
    switch (dtype) {
    case DT_F16: {
        ftype = half_type();
        mtype = half_type();
        uint16_t *b = malloc((count ? count : 1) * sizeof *b);
        for (size_t i = 0; i < count; i++) {
            float x = fill ? fill[i] : value_at(layer, which, i);
            /* the encoder saturates infinities: write the IEEE code */
            b[i] = isinf(x) ? (signbit(x) ? 0xfc00u : 0x7c00u) : qattn_fp16_encode(x);
        }
        buf = b;
        break;
    }
    case DT_F64: {
        ftype = H5Tcopy(H5T_IEEE_F64LE);
        mtype = H5Tcopy(H5T_NATIVE_DOUBLE);
        double *b = malloc((count ? count : 1) * sizeof *b);
        for (size_t i = 0; i < count; i++)
            b[i] = fill ? fill[i] : value_at(layer, which, i);
        buf = b;
        break;
    }
    case DT_I32: {
        ftype = H5Tcopy(H5T_STD_I32LE);
        mtype = H5Tcopy(H5T_NATIVE_INT);
        int *b = malloc((count ? count : 1) * sizeof *b);
        for (size_t i = 0; i < count; i++)
            b[i] = (int)i;
        buf = b;
        break;
    }
    default: {
        ftype = H5Tcopy(H5T_IEEE_F32LE);
        mtype = H5Tcopy(H5T_NATIVE_FLOAT);
        float *b = malloc((count ? count : 1) * sizeof *b);
        for (size_t i = 0; i < count; i++)
            b[i] = fill ? fill[i] : value_at(layer, which, i);
        buf = b;
        break;
    }
    }
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (compress && count > 0 && rank == 3) {
        hsize_t chunk[3] = {1, dims[1], dims[2] > 2 ? dims[2] - 1 : dims[2]};
        H5Pset_chunk(dcpl, 3, chunk);
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, 6);
    }
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(obj, name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (count)
        H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    H5Dclose(d);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Tclose(ftype);
    H5Tclose(mtype);
    free(buf);
}

static inline void put_layer(hid_t fid, size_t l, size_t hq, size_t hkv, size_t n, size_t d, int dtype,
                      int compress)
{
    char name[32];
    snprintf(name, sizeof name, "layer_%02zu", l);
    if (H5Lexists(fid, name, H5P_DEFAULT) > 0)
        H5Ldelete(fid, name, H5P_DEFAULT);
    hid_t g = H5Gcreate2(fid, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dq[3] = {hq, n, d}, dk[3] = {hkv, n, d};
    put_dataset(g, "q", dtype, 3, dq, compress, l, 0, NULL);
    put_dataset(g, "k", dtype, 3, dk, compress, l, 1, NULL);
    put_dataset(g, "v", dtype, 3, dk, compress, l, 2, NULL);
    H5Gclose(g);
}

static inline void put_seqlens(hid_t fid, const long long *s, size_t ns)
{
    if (H5Lexists(fid, "seqlens", H5P_DEFAULT) > 0)
        H5Ldelete(fid, "seqlens", H5P_DEFAULT);
    hsize_t dim = ns;
    hid_t sp = H5Screate_simple(1, &dim, NULL);
    hid_t d = H5Dcreate2(fid, "seqlens", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, s);
    H5Dclose(d);
    H5Sclose(sp);
}

/* A valid file made with the raw API, attributes as h5py would write some
 * of them: fixed-length strings, an int32 flag and a numpy bool. */
static inline void raw_write(const char *path, const rawspec *s)
{
    hid_t fid = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    put_str_attr(fid, "schema", QATTN_ACT_SCHEMA, 0);
    put_str_attr(fid, "model", "raw-model", 1);
    put_str_attr(fid, "source", "test_h5io raw API", 1);
    put_str_attr(fid, "license", "CC0-1.0", 0);
    put_str_attr(fid, "text_source", "none", 1);
    put_int_attr(fid, "rope_applied", 1);
    put_bool_attr(fid, "causal", 1);
    for (size_t l = 0; l < s->layers; l++)
        put_layer(fid, l, s->hq, s->hkv, s->n, s->d, s->dtype, s->compress);
    H5Fclose(fid);
}

static inline hid_t raw_rw(const char *path) { return H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT); }

#endif
