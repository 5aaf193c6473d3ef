/* Private to the activation-file code (h5io_attr.c, h5io_read.c,
 * h5io_write.c): small HDF5 helpers shared by the reader and the writer. */
#ifndef QATTN_H5IO_PRIV_H
#define QATTN_H5IO_PRIV_H

#include <stdio.h>

#include <hdf5.h>

#include "qattn/h5io.h"

static inline void h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

static inline void close_id(hid_t *id, herr_t (*fn)(hid_t))
{
    if (*id >= 0)
        fn(*id);
    *id = -1;
}

typedef struct h5_walk_ctx {
    char *buf;
    size_t size;
    int found;
} h5_walk_ctx;

static inline herr_t h5_walk_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    h5_walk_ctx *c = data;
    if (!c->found && e->desc && e->desc[0]) {
        snprintf(c->buf, c->size, "%s", e->desc);
        c->found = 1;
    }
    return 0;
}

/* The innermost reason on HDF5's error stack (e.g. "truncated file: eof =
 * ..."), as ": reason", or "" if none; clears the stack. */
static inline const char *h5_reason(char *buf, size_t size)
{
    char inner[300] = "";
    h5_walk_ctx c = {inner, sizeof inner, 0};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_walk_cb, &c);
    H5Eclear2(H5E_DEFAULT);
    if (c.found)
        snprintf(buf, size, " (HDF5: %s)", inner);
    else
        buf[0] = '\0';
    return buf;
}

/* "float32", "int64", "uint8", "string", ... */
static inline void describe_type(hid_t t, char *buf, size_t size)
{
    H5T_class_t cls = H5Tget_class(t);
    size_t bits = H5Tget_size(t) * 8;
    switch (cls) {
    case H5T_INTEGER:
        snprintf(buf, size, "%s%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "uint" : "int", bits);
        break;
    case H5T_FLOAT: snprintf(buf, size, "float%zu", bits); break;
    case H5T_STRING: snprintf(buf, size, "string"); break;
    case H5T_ENUM: snprintf(buf, size, "enum"); break;
    case H5T_COMPOUND: snprintf(buf, size, "compound"); break;
    case H5T_ARRAY: snprintf(buf, size, "array"); break;
    case H5T_VLEN: snprintf(buf, size, "variable-length sequence"); break;
    case H5T_BITFIELD: snprintf(buf, size, "bitfield%zu", bits); break;
    case H5T_OPAQUE: snprintf(buf, size, "opaque"); break;
    case H5T_REFERENCE: snprintf(buf, size, "reference"); break;
    case H5T_TIME: snprintf(buf, size, "time"); break;
    default: snprintf(buf, size, "unknown type"); break;
    }
}

/* 1 if t is a 2-byte float with IEEE binary16 fields (as h5py writes it) */
static inline int is_ieee_half(hid_t t)
{
    if (H5Tget_class(t) != H5T_FLOAT || H5Tget_size(t) != 2)
        return 0;
    size_t spos, epos, esize, mpos, msize;
    if (H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) < 0)
        return 0;
    return spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 &&
           H5Tget_ebias(t) == 15 && H5Tget_offset(t) == 0 && H5Tget_precision(t) == 16 &&
           H5Tget_norm(t) == H5T_NORM_IMPLIED;
}

/* The IEEE half type exactly as h5py builds it (little-endian), or with
 * order `order`. Caller closes. */
static inline hid_t make_half_type(H5T_order_t order)
{
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0)
        return -1;
    if (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 ||
        H5Tset_ebias(t, 15) < 0 || H5Tset_order(t, order) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static inline H5T_order_t native_order(void) { return H5Tget_order(H5T_NATIVE_USHORT); }

/* The root attributes of an open file into m (h5io_attr.c); 0 or an error
 * code with a message naming path and the attribute. */
int qattn_h5_read_attributes(const char *path, hid_t fid, qattn_act_meta *m, qattn_err *err);

/* Runs check(path, err) in a forked child under the limits of
 * qattn_act_check_limits (h5io_guard.c): its result, or QATTN_ERR_IO naming
 * path when the child crashed or ran out of time. */
int qattn_h5_isolate(const char *path, int (*check)(const char *path, qattn_err *err),
                     qattn_err *err);

#endif
