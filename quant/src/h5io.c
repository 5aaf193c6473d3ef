/* HDF5 activation files (schema "qattn-activations/1"): validating reader and
 * atomic writer. See qattn/h5io.h and docs/DESIGN.md "Activation files (HDF5)".
 *
 * HDF5's own error printing is switched off; every failure becomes one
 * message naming the file and the object, with the innermost HDF5 reason
 * appended where the library gave one. */
#define _POSIX_C_SOURCE 200809L
#include "qattn/h5io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "qattn/formats.h"

#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t qattn_h5_linfo;
#define QATTN_H5_LITERATE H5Literate2
#else
typedef H5L_info_t qattn_h5_linfo;
#define QATTN_H5_LITERATE H5Literate
#endif

/* ------------------------------------------------------------------ */
/* small helpers                                                       */
/* ------------------------------------------------------------------ */

static void h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

static void close_id(hid_t *id, herr_t (*fn)(hid_t))
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

static herr_t h5_walk_cb(unsigned n, const H5E_error2_t *e, void *data)
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
static const char *h5_reason(char *buf, size_t size)
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
static void describe_type(hid_t t, char *buf, size_t size)
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
static int is_ieee_half(hid_t t)
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
static hid_t make_half_type(H5T_order_t order)
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

static H5T_order_t native_order(void) { return H5Tget_order(H5T_NATIVE_USHORT); }

static void fmt_shape(char *buf, size_t size, const hsize_t *dims, int rank)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, size - o, "[");
    for (int i = 0; i < rank && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s%llu", i ? ", " : "",
                              (unsigned long long)dims[i]);
    if (o < size)
        snprintf(buf + o, size - o, "]");
}

/* ------------------------------------------------------------------ */
/* attributes                                                          */
/* ------------------------------------------------------------------ */

/* Opens attribute `name` of object `obj`; checks it holds one element.
 * Returns the attribute id, 0 if absent and !required (nothing set), or a
 * negative error code. *out_type is the file type (caller closes). */
static int attr_open(const char *path, hid_t obj, const char *name, int required,
                     hid_t *out_attr, hid_t *out_type, qattn_err *err)
{
    char why[400];
    *out_attr = *out_type = -1;
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0)
        return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot check root attribute '%s'%s",
                             path, name, h5_reason(why, sizeof why));
    if (!ex) {
        if (!required)
            return 0;
        return qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: missing root attribute '%s'", path,
                             name);
    }
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot open root attribute '%s'%s", path,
                             name, h5_reason(why, sizeof why));
    hid_t sp = H5Aget_space(a);
    hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    if (sp >= 0)
        H5Sclose(sp);
    if (np != 1) {
        H5Aclose(a);
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: root attribute '%s' must hold a single value, found %lld",
                             path, name, (long long)np);
    }
    hid_t t = H5Aget_type(a);
    if (t < 0) {
        H5Aclose(a);
        return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot read the type of attribute '%s'%s",
                             path, name, h5_reason(why, sizeof why));
    }
    *out_attr = a;
    *out_type = t;
    return 1;
}

/* String attribute (fixed- or variable-length) into out[size]. */
static int attr_string(const char *path, hid_t obj, const char *name, int required,
                       char *out, size_t size, qattn_err *err)
{
    hid_t a, t, m = -1;
    char why[400];
    char *vbuf = NULL, *fbuf = NULL;
    const char *val = NULL;
    int rc = attr_open(path, obj, name, required, &a, &t, err);
    if (rc <= 0)
        return rc;
    if (H5Tget_class(t) != H5T_STRING) {
        char d[64];
        describe_type(t, d, sizeof d);
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                           "%s: root attribute '%s' must be a string, found %s", path, name, d);
        goto done;
    }
    m = H5Tcopy(H5T_C_S1);
    if (m < 0 || H5Tset_cset(m, H5Tget_cset(t)) < 0) {
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: attribute '%s': cannot make a string type%s",
                           path, name, h5_reason(why, sizeof why));
        goto done;
    }
    if (H5Tis_variable_str(t) > 0) {
        if (H5Tset_size(m, H5T_VARIABLE) < 0 || H5Aread(a, m, &vbuf) < 0) {
            vbuf = NULL;
            rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot read attribute '%s'%s", path,
                               name, h5_reason(why, sizeof why));
            goto done;
        }
        val = vbuf ? vbuf : "";
    } else {
        size_t fs = H5Tget_size(t);
        fbuf = calloc(fs + 1, 1);
        if (!fbuf) {
            rc = qattn_err_set(err, QATTN_ERR_NOMEM, "%s: out of memory reading attribute '%s'",
                               path, name);
            goto done;
        }
        if (H5Tset_size(m, fs + 1) < 0 || H5Tset_strpad(m, H5T_STR_NULLTERM) < 0 ||
            H5Aread(a, m, fbuf) < 0) {
            rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot read attribute '%s'%s", path,
                               name, h5_reason(why, sizeof why));
            goto done;
        }
        fbuf[fs] = '\0';
        /* fixed-length strings may be space padded */
        size_t fl = strlen(fbuf);
        while (fl > 0 && fbuf[fl - 1] == ' ')
            fbuf[--fl] = '\0';
        val = fbuf;
    }
    size_t len = strlen(val);
    if (len >= size) {
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                           "%s: root attribute '%s' is %zu bytes long, at most %zu allowed",
                           path, name, len, size - 1);
    } else {
        memcpy(out, val, len + 1);
        rc = 1;
    }
done:
    if (vbuf)
        H5free_memory(vbuf);
    free(fbuf);
    close_id(&m, H5Tclose);
    close_id(&t, H5Tclose);
    close_id(&a, H5Aclose);
    return rc;
}

/* Integer attribute; a numpy bool (enum FALSE/TRUE, as h5py writes it) is
 * accepted as 0/1. */
static int attr_int(const char *path, hid_t obj, const char *name, int required,
                    long long *out, qattn_err *err)
{
    hid_t a, t, m = -1;
    char why[400];
    int rc = attr_open(path, obj, name, required, &a, &t, err);
    if (rc <= 0)
        return rc;
    H5T_class_t cls = H5Tget_class(t);
    if (cls == H5T_INTEGER) {
        long long v = 0;
        if (H5Aread(a, H5T_NATIVE_LLONG, &v) < 0) {
            rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot read attribute '%s'%s", path,
                               name, h5_reason(why, sizeof why));
            goto done;
        }
        *out = v;
        rc = 1;
    } else if (cls == H5T_ENUM) {
        unsigned char buf[32] = {0};
        char member[64] = "";
        m = H5Tget_native_type(t, H5T_DIR_ASCEND);
        if (m < 0 || H5Tget_size(m) > sizeof buf || H5Aread(a, m, buf) < 0 ||
            H5Tenum_nameof(m, buf, member, sizeof member) < 0) {
            H5Eclear2(H5E_DEFAULT);
            rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                               "%s: root attribute '%s' is an enum that is not a boolean", path,
                               name);
            goto done;
        }
        if (!strcmp(member, "TRUE") || !strcmp(member, "True") || !strcmp(member, "true")) {
            *out = 1;
        } else if (!strcmp(member, "FALSE") || !strcmp(member, "False") ||
                   !strcmp(member, "false")) {
            *out = 0;
        } else {
            rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                               "%s: root attribute '%s' is an enum with value '%s', expected "
                               "an integer or a boolean", path, name, member);
            goto done;
        }
        rc = 1;
    } else {
        char d[64];
        describe_type(t, d, sizeof d);
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                           "%s: root attribute '%s' must be an integer, found %s", path, name, d);
    }
done:
    close_id(&m, H5Tclose);
    close_id(&t, H5Tclose);
    close_id(&a, H5Aclose);
    return rc;
}

/* Float attribute (integers accepted and converted); must be finite. */
static int attr_double(const char *path, hid_t obj, const char *name, int required,
                       double *out, qattn_err *err)
{
    hid_t a, t;
    char why[400];
    int rc = attr_open(path, obj, name, required, &a, &t, err);
    if (rc <= 0)
        return rc;
    H5T_class_t cls = H5Tget_class(t);
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
        char d[64];
        describe_type(t, d, sizeof d);
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                           "%s: root attribute '%s' must be a number, found %s", path, name, d);
    } else {
        double v = 0;
        if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0) {
            rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot read attribute '%s'%s", path,
                               name, h5_reason(why, sizeof why));
        } else if (!isfinite(v)) {
            rc = qattn_err_set(err, QATTN_ERR_NAN, "%s: root attribute '%s' is %s", path, name,
                               isnan(v) ? "NaN" : "infinite");
        } else {
            *out = v;
            rc = 1;
        }
    }
    close_id(&t, H5Tclose);
    close_id(&a, H5Aclose);
    return rc;
}

static int read_attributes(const char *path, hid_t fid, qattn_act_meta *m, qattn_err *err)
{
    char schema[128];
    int rc = attr_string(path, fid, "schema", 1, schema, sizeof schema, err);
    if (rc < 0)
        return rc;
    if (strcmp(schema, QATTN_ACT_SCHEMA) != 0)
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: root attribute 'schema' is '%s', expected '%s'", path, schema,
                             QATTN_ACT_SCHEMA);
    if ((rc = attr_string(path, fid, "model", 1, m->model, sizeof m->model, err)) < 0 ||
        (rc = attr_string(path, fid, "source", 1, m->source, sizeof m->source, err)) < 0 ||
        (rc = attr_string(path, fid, "license", 1, m->license, sizeof m->license, err)) < 0 ||
        (rc = attr_string(path, fid, "text_source", 1, m->text_source, sizeof m->text_source,
                          err)) < 0)
        return rc;
    static const char *flags[2] = {"rope_applied", "causal"};
    int *dst[2] = {&m->rope_applied, &m->causal};
    for (int i = 0; i < 2; i++) {
        long long v = 0;
        if ((rc = attr_int(path, fid, flags[i], 1, &v, err)) < 0)
            return rc;
        if (v != 0 && v != 1)
            return qattn_err_set(err, QATTN_ERR_SCHEMA,
                                 "%s: root attribute '%s' is %lld, must be 0 or 1", path,
                                 flags[i], v);
        *dst[i] = (int)v;
    }
    double dv = 0;
    if ((rc = attr_double(path, fid, "eval_loss", 0, &dv, err)) < 0)
        return rc;
    m->has_eval_loss = rc == 1;
    m->eval_loss = rc == 1 ? dv : 0.0;
    long long iv = 0;
    if ((rc = attr_int(path, fid, "vocab_size", 0, &iv, err)) < 0)
        return rc;
    if (rc == 1 && (iv < 1 || iv > (long long)LONG_MAX))
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: root attribute 'vocab_size' is %lld, must be >= 1", path, iv);
    m->has_vocab_size = rc == 1;
    m->vocab_size = rc == 1 ? (long)iv : 0;
    if ((rc = attr_double(path, fid, "softmax_scale", 0, &dv, err)) < 0)
        return rc;
    if (rc == 1 && !(dv > 0))
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: root attribute 'softmax_scale' is %g, must be > 0", path, dv);
    m->has_softmax_scale = rc == 1;
    m->softmax_scale = rc == 1 ? dv : 0.0;
    return 0;
}

/* ------------------------------------------------------------------ */
/* layers                                                              */
/* ------------------------------------------------------------------ */

typedef struct layer_scan {
    size_t *idx;          /* layer indices found */
    size_t n, cap;
    char bad[256];        /* first link named like a layer but malformed */
    int nomem;
} layer_scan;

/* parses "layer_NN" with the canonical spelling "layer_%02zu"; returns 1 and
 * sets *out, 0 if name is not canonical */
static int parse_layer_name(const char *name, size_t *out)
{
    const char *s = name + 6;
    size_t len = strlen(s);
    if (len < 2 || len > 9)
        return 0;
    size_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (size_t)(s[i] - '0');
    }
    char canon[32];
    snprintf(canon, sizeof canon, "layer_%02zu", v);
    if (strcmp(canon, name) != 0)
        return 0;
    *out = v;
    return 1;
}

static herr_t scan_cb(hid_t g, const char *name, const qattn_h5_linfo *info, void *data)
{
    (void)g;
    (void)info;
    layer_scan *s = data;
    if (strncmp(name, "layer_", 6) != 0)
        return 0;
    size_t v;
    if (!parse_layer_name(name, &v)) {
        if (!s->bad[0])
            snprintf(s->bad, sizeof s->bad, "%s", name);
        return 0;
    }
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 16;
        size_t *p = realloc(s->idx, nc * sizeof *p);
        if (!p) {
            s->nomem = 1;
            return 1;
        }
        s->idx = p;
        s->cap = nc;
    }
    s->idx[s->n++] = v;
    return 0;
}

static int count_layers(const char *path, hid_t fid, size_t *nlayers, qattn_err *err)
{
    layer_scan s;
    char why[400];
    memset(&s, 0, sizeof s);
    hsize_t pos = 0;
    herr_t hr = QATTN_H5_LITERATE(fid, H5_INDEX_NAME, H5_ITER_INC, &pos, scan_cb, &s);
    int rc = 0;
    if (s.nomem) {
        rc = qattn_err_set(err, QATTN_ERR_NOMEM, "%s: out of memory listing layers", path);
        goto done;
    }
    if (hr < 0) {
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot list the root group%s", path,
                           h5_reason(why, sizeof why));
        goto done;
    }
    if (s.bad[0]) {
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                           "%s: /%s is not a valid layer name (expected layer_00, layer_01, "
                           "...)", path, s.bad);
        goto done;
    }
    /* count consecutive indices from 0 */
    size_t n = 0;
    for (;;) {
        int found = 0;
        for (size_t i = 0; i < s.n && !found; i++)
            found = s.idx[i] == n;
        if (!found)
            break;
        n++;
    }
    if (s.n == 0) {
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                           "%s: no layer groups (expected /layer_00, /layer_01, ...)", path);
        goto done;
    }
    if (n != s.n) {
        size_t first = SIZE_MAX;
        for (size_t i = 0; i < s.n; i++)
            if (s.idx[i] >= n && s.idx[i] < first)
                first = s.idx[i];
        char missing[32], found[32];
        snprintf(missing, sizeof missing, "layer_%02zu", n);
        snprintf(found, sizeof found, "layer_%02zu", first);
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                           "%s: layers are not consecutive: /%s exists but /%s is missing", path,
                           found, missing);
        goto done;
    }
    *nlayers = n;
done:
    free(s.idx);
    return rc;
}

typedef struct ds_info {
    int rank;
    hsize_t dims[3];
    int f16;
} ds_info;

/* Check /layer_LL/name: a rank-3 float16/float32 dataset with no zero dim. */
static int check_dataset(const char *path, hid_t g, const char *lname, const char *name,
                         ds_info *out, qattn_err *err)
{
    char why[400];
    htri_t ex = H5Lexists(g, name, H5P_DEFAULT);
    if (ex <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: /%s has no dataset '%s'", path, lname,
                             name);
    }
    hid_t o = H5Oopen(g, name, H5P_DEFAULT);
    if (o < 0)
        return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot open /%s/%s%s", path, lname, name,
                             h5_reason(why, sizeof why));
    if (H5Iget_type(o) != H5I_DATASET) {
        H5Oclose(o);
        return qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: /%s/%s is not a dataset", path, lname,
                             name);
    }
    int rc = 0;
    hid_t t = H5Dget_type(o), sp = H5Dget_space(o);
    if (t < 0 || sp < 0) {
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot read the type or shape of /%s/%s%s",
                           path, lname, name, h5_reason(why, sizeof why));
        goto done;
    }
    H5T_class_t cls = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    if (cls == H5T_FLOAT && sz == 4) {
        out->f16 = 0;
    } else if (cls == H5T_FLOAT && sz == 2 && is_ieee_half(t)) {
        out->f16 = 1;
    } else {
        char d[64];
        describe_type(t, d, sizeof d);
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                           "%s: /%s/%s has type %s%s; only float16 or float32 are accepted",
                           path, lname, name, d,
                           cls == H5T_FLOAT && sz == 2 ? " (not IEEE half)" : "");
        goto done;
    }
    int rank = H5Sget_simple_extent_ndims(sp);
    if (rank != 3) {
        hsize_t dims[H5S_MAX_RANK];
        char sh[200] = "[]";
        if (rank > 0 && rank <= H5S_MAX_RANK && H5Sget_simple_extent_dims(sp, dims, NULL) >= 0)
            fmt_shape(sh, sizeof sh, dims, rank);
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                           "%s: /%s/%s has rank %d (shape %s), expected rank 3 [heads, tokens, "
                           "dim]", path, lname, name, rank, sh);
        goto done;
    }
    H5Sget_simple_extent_dims(sp, out->dims, NULL);
    out->rank = 3;
    static const char *dimname[3] = {"heads", "N (tokens)", "d (head dim)"};
    for (int i = 0; i < 3; i++)
        if (out->dims[i] == 0) {
            char sh[200];
            fmt_shape(sh, sizeof sh, out->dims, 3);
            rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                               "%s: /%s/%s has shape %s: %s is 0, must be >= 1", path, lname,
                               name, sh, dimname[i]);
            goto done;
        }
    /* element counts must fit size_t (and the byte count too) */
    hsize_t tot = out->dims[0];
    for (int i = 1; i < 3; i++) {
        if (out->dims[i] > (hsize_t)SIZE_MAX / sizeof(float) / tot) {
            char sh[200];
            fmt_shape(sh, sizeof sh, out->dims, 3);
            rc = qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: /%s/%s has shape %s: too large",
                               path, lname, name, sh);
            goto done;
        }
        tot *= out->dims[i];
    }
done:
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    H5Oclose(o);
    return rc;
}

static int same_dims(const hsize_t *a, const hsize_t *b)
{
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
}

static int check_layer(const char *path, hid_t fid, size_t l, ds_info ref[3], qattn_err *err)
{
    static const char *names[3] = {"q", "k", "v"};
    char lname[32], why[400];
    snprintf(lname, sizeof lname, "layer_%02zu", l);
    hid_t g = H5Oopen(fid, lname, H5P_DEFAULT);
    if (g < 0)
        return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot open /%s%s", path, lname,
                             h5_reason(why, sizeof why));
    if (H5Iget_type(g) != H5I_GROUP) {
        H5Oclose(g);
        return qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: /%s is not a group", path, lname);
    }
    ds_info di[3];
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = check_dataset(path, g, lname, names[i], &di[i], err);
    H5Oclose(g);
    if (rc)
        return rc;
    char s0[200], s1[200];
    /* within the layer */
    for (int i = 1; i < 3; i++)
        if (di[i].f16 != di[0].f16)
            return qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: /%s/%s is %s but /%s/q is %s",
                                 path, lname, names[i], di[i].f16 ? "float16" : "float32",
                                 lname, di[0].f16 ? "float16" : "float32");
    if (!same_dims(di[1].dims, di[2].dims)) {
        fmt_shape(s0, sizeof s0, di[2].dims, 3);
        fmt_shape(s1, sizeof s1, di[1].dims, 3);
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: /%s/v has shape %s but /%s/k has %s (must be equal)", path,
                             lname, s0, lname, s1);
    }
    if (di[0].dims[1] != di[1].dims[1] || di[0].dims[2] != di[1].dims[2]) {
        fmt_shape(s0, sizeof s0, di[0].dims, 3);
        fmt_shape(s1, sizeof s1, di[1].dims, 3);
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: /%s/q has shape %s but /%s/k has %s (tokens and head dim must "
                             "match)", path, lname, s0, lname, s1);
    }
    if (di[0].dims[0] % di[1].dims[0] != 0)
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: /%s: q has %llu heads, not a multiple of k/v's %llu heads",
                             path, lname, (unsigned long long)di[0].dims[0],
                             (unsigned long long)di[1].dims[0]);
    if (l == 0) {
        memcpy(ref, di, sizeof di);
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        if (!same_dims(di[i].dims, ref[i].dims)) {
            fmt_shape(s0, sizeof s0, di[i].dims, 3);
            fmt_shape(s1, sizeof s1, ref[i].dims, 3);
            return qattn_err_set(err, QATTN_ERR_SCHEMA,
                                 "%s: /%s/%s has shape %s but /layer_00/%s has %s", path, lname,
                                 names[i], s0, names[i], s1);
        }
        if (di[i].f16 != ref[i].f16)
            return qattn_err_set(err, QATTN_ERR_SCHEMA,
                                 "%s: /%s/%s is %s but /layer_00/%s is %s", path, lname,
                                 names[i], di[i].f16 ? "float16" : "float32", names[i],
                                 ref[i].f16 ? "float16" : "float32");
    }
    return 0;
}

static int read_seqlens(const char *path, hid_t fid, qattn_act_meta *m, qattn_err *err)
{
    char why[400];
    htri_t ex = H5Lexists(fid, "seqlens", H5P_DEFAULT);
    if (ex < 0) {
        H5Eclear2(H5E_DEFAULT);
        ex = 0;
    }
    if (!ex)
        return 0;
    hid_t o = H5Oopen(fid, "seqlens", H5P_DEFAULT);
    if (o < 0)
        return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot open /seqlens%s", path,
                             h5_reason(why, sizeof why));
    if (H5Iget_type(o) != H5I_DATASET) {
        H5Oclose(o);
        return qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: /seqlens is not a dataset", path);
    }
    int rc = 0;
    hid_t t = H5Dget_type(o), sp = H5Dget_space(o);
    if (t < 0 || sp < 0) {
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot read the type or shape of /seqlens%s",
                           path, h5_reason(why, sizeof why));
        goto done;
    }
    if (H5Tget_class(t) != H5T_INTEGER) {
        char d[64];
        describe_type(t, d, sizeof d);
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                           "%s: /seqlens has type %s, expected an integer type", path, d);
        goto done;
    }
    int rank = H5Sget_simple_extent_ndims(sp);
    hsize_t dims[H5S_MAX_RANK] = {0};
    if (rank != 1 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: /seqlens has rank %d, expected 1-D",
                           path, rank);
        goto done;
    }
    if (dims[0] == 0 || dims[0] > m->n) {
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                           "%s: /seqlens has %llu entries, expected 1 to N = %zu", path,
                           (unsigned long long)dims[0], m->n);
        goto done;
    }
    size_t ns = (size_t)dims[0];
    int64_t *s = malloc(ns * sizeof *s);
    if (!s) {
        rc = qattn_err_set(err, QATTN_ERR_NOMEM, "%s: out of memory reading /seqlens", path);
        goto done;
    }
    if (H5Dread(o, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, s) < 0) {
        free(s);
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot read /seqlens%s", path,
                           h5_reason(why, sizeof why));
        goto done;
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < ns; i++) {
        if (s[i] < 1) {
            rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                               "%s: /seqlens[%zu] is %lld, every sequence length must be >= 1",
                               path, i, (long long)s[i]);
            free(s);
            goto done;
        }
        if ((uint64_t)s[i] > m->n || sum + (uint64_t)s[i] > m->n) {
            sum = (uint64_t)m->n + 1; /* too large: stop summing */
            break;
        }
        sum += (uint64_t)s[i];
    }
    if (sum != m->n) {
        if (sum > m->n)
            rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                               "%s: /seqlens sums to more than N = %zu (the tokens in the q/k/v "
                               "datasets)", path, m->n);
        else
            rc = qattn_err_set(err, QATTN_ERR_SCHEMA,
                               "%s: /seqlens sums to %llu but N = %zu (the tokens in the q/k/v "
                               "datasets)", path, (unsigned long long)sum, m->n);
        free(s);
        goto done;
    }
    m->seqlens = s;
    m->nseq = ns;
done:
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    H5Oclose(o);
    return rc;
}

/* ------------------------------------------------------------------ */
/* reader                                                              */
/* ------------------------------------------------------------------ */

void qattn_act_meta_free(qattn_act_meta *m)
{
    if (!m)
        return;
    free(m->seqlens);
    m->seqlens = NULL;
    m->nseq = 0;
}

void qattn_act_close(qattn_act_file *f)
{
    if (!f)
        return;
    qattn_act_meta_free(&f->meta);
    if (f->fid >= 0) {
        h5_quiet();
        H5Fclose((hid_t)f->fid);
    }
    f->fid = -1;
}

int qattn_act_open(const char *path, qattn_act_file *f, qattn_err *err)
{
    memset(f, 0, sizeof *f);
    f->fid = -1;
    if (!path || !path[0])
        return qattn_err_set(err, QATTN_ERR_ARG, "activation file: empty path");
    h5_quiet();
    snprintf(f->path, sizeof f->path, "%s", path);

    /* plain checks first, for clear messages */
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int st_ok = fstat(fd, &st) == 0;
    close(fd);
    if (!st_ok || !S_ISREG(st.st_mode))
        return qattn_err_set(err, QATTN_ERR_IO, "%s: not a regular file", path);
    char why[400];
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return qattn_err_set(err, QATTN_ERR_IO, "%s: not an HDF5 file%s", path,
                             st.st_size == 0 ? " (it is empty)" : "");
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0)
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, fapl >= 0 ? fapl : H5P_DEFAULT);
    if (fid < 0)
        h5_reason(why, sizeof why); /* before any other call clears the stack */
    if (fapl >= 0)
        H5Pclose(fapl);
    if (fid < 0) {
        int trunc = strstr(why, "truncated") != NULL;
        return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot open HDF5 file: %s%s", path,
                             trunc ? "truncated or incomplete" : "corrupt or unreadable", why);
    }
    f->fid = fid;
    int rc = read_attributes(path, fid, &f->meta, err);
    if (rc)
        goto fail;
    size_t nl = 0;
    if ((rc = count_layers(path, fid, &nl, err)))
        goto fail;
    ds_info ref[3];
    memset(ref, 0, sizeof ref);
    for (size_t l = 0; l < nl; l++)
        if ((rc = check_layer(path, fid, l, ref, err)))
            goto fail;
    qattn_act_meta *m = &f->meta;
    m->nlayers = nl;
    m->hq = (size_t)ref[0].dims[0];
    m->hkv = (size_t)ref[1].dims[0];
    m->n = (size_t)ref[0].dims[1];
    m->d = (size_t)ref[0].dims[2];
    m->f16 = ref[0].f16;
    if ((rc = read_seqlens(path, fid, m, err)))
        goto fail;
    return 0;
fail:
    qattn_act_close(f);
    return rc;
}

/* Reads one dataset into out (float32), checking shape and finiteness. */
static int read_tensor(qattn_act_file *f, hid_t g, const char *lname, const char *name,
                       size_t heads, float *out, qattn_err *err)
{
    const qattn_act_meta *m = &f->meta;
    char why[400];
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
    if (d < 0)
        return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot open /%s/%s%s", f->path, lname,
                             name, h5_reason(why, sizeof why));
    int rc = 0;
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d), mt = -1;
    hsize_t dims[3] = {0, 0, 0};
    if (t < 0 || sp < 0 || H5Sget_simple_extent_ndims(sp) != 3 ||
        H5Sget_simple_extent_dims(sp, dims, NULL) < 0 || dims[0] != heads || dims[1] != m->n ||
        dims[2] != m->d) {
        H5Eclear2(H5E_DEFAULT);
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: /%s/%s changed shape since the file was "
                           "opened", f->path, lname, name);
        goto done;
    }
    size_t count = heads * m->n * m->d;
    if (m->f16) {
        if (!is_ieee_half(t)) {
            rc = qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: /%s/%s is not float16", f->path,
                               lname, name);
            goto done;
        }
        mt = make_half_type(native_order());
        /* raw halves land in the first half of out's bytes; decode backwards
         * so that no half is overwritten before it is read */
        if (mt < 0 || H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
            rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot read /%s/%s%s", f->path, lname,
                               name, h5_reason(why, sizeof why));
            goto done;
        }
        const unsigned char *raw = (const unsigned char *)out;
        for (size_t i = count; i-- > 0;) {
            uint16_t h;
            memcpy(&h, raw + 2 * i, sizeof h);
            out[i] = qattn_fp16_decode(h);
        }
    } else {
        if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
            rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot read /%s/%s%s", f->path, lname,
                               name, h5_reason(why, sizeof why));
            goto done;
        }
    }
    for (size_t i = 0; i < count; i++)
        if (!isfinite(out[i])) {
            size_t c = i % m->d, tk = (i / m->d) % m->n, h = i / (m->d * m->n);
            rc = qattn_err_set(err, QATTN_ERR_NAN,
                               "%s: /%s/%s has %s at [head %zu, token %zu, channel %zu]",
                               f->path, lname, name, isnan(out[i]) ? "NaN" : "Inf", h, tk, c);
            goto done;
        }
done:
    if (mt >= 0)
        H5Tclose(mt);
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    H5Dclose(d);
    return rc;
}

int qattn_act_read_layer(qattn_act_file *f, size_t layer, float *q, float *k, float *v,
                         qattn_err *err)
{
    if (!f || f->fid < 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "activation file is not open");
    if (layer >= f->meta.nlayers)
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: layer %zu requested, the file has %zu",
                             f->path, layer, f->meta.nlayers);
    if (!q || !k || !v)
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: read_layer needs q, k and v buffers",
                             f->path);
    h5_quiet();
    char lname[32], why[400];
    snprintf(lname, sizeof lname, "layer_%02zu", layer);
    hid_t g = H5Gopen2((hid_t)f->fid, lname, H5P_DEFAULT);
    if (g < 0)
        return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot open /%s%s", f->path, lname,
                             h5_reason(why, sizeof why));
    int rc = read_tensor(f, g, lname, "q", f->meta.hq, q, err);
    if (!rc)
        rc = read_tensor(f, g, lname, "k", f->meta.hkv, k, err);
    if (!rc)
        rc = read_tensor(f, g, lname, "v", f->meta.hkv, v, err);
    H5Gclose(g);
    return rc;
}

/* ------------------------------------------------------------------ */
/* writer                                                              */
/* ------------------------------------------------------------------ */

static void writer_cleanup(qattn_act_writer *w)
{
    if (w->fid >= 0) {
        H5Fclose((hid_t)w->fid);
        w->fid = -1;
    }
    if (w->tmp[0]) {
        unlink(w->tmp);
        w->tmp[0] = '\0';
    }
    qattn_act_meta_free(&w->meta);
}

void qattn_act_write_abort(qattn_act_writer *w)
{
    if (!w)
        return;
    h5_quiet();
    writer_cleanup(w);
}

static int write_str_attr(hid_t fid, const char *name, const char *val)
{
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
    int ok = t >= 0 && sp >= 0 && H5Tset_size(t, H5T_VARIABLE) >= 0 &&
             H5Tset_cset(t, H5T_CSET_UTF8) >= 0 &&
             (a = H5Acreate2(fid, name, t, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
             H5Awrite(a, t, &val) >= 0;
    close_id(&a, H5Aclose);
    close_id(&sp, H5Sclose);
    close_id(&t, H5Tclose);
    return ok ? 0 : -1;
}

static int write_num_attr(hid_t fid, const char *name, hid_t ftype, hid_t mtype,
                          const void *val)
{
    hid_t sp = H5Screate(H5S_SCALAR), a = -1;
    int ok = sp >= 0 && (a = H5Acreate2(fid, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
             H5Awrite(a, mtype, val) >= 0;
    close_id(&a, H5Aclose);
    close_id(&sp, H5Sclose);
    return ok ? 0 : -1;
}

static int check_meta(const char *path, const qattn_act_meta *m, qattn_err *err)
{
    struct { const char *name; const char *s; size_t size; } strs[4] = {
        {"model", m->model, sizeof m->model},
        {"source", m->source, sizeof m->source},
        {"license", m->license, sizeof m->license},
        {"text_source", m->text_source, sizeof m->text_source},
    };
    for (int i = 0; i < 4; i++)
        if (!memchr(strs[i].s, '\0', strs[i].size))
            return qattn_err_set(err, QATTN_ERR_ARG, "%s: meta.%s is not NUL-terminated", path,
                                 strs[i].name);
    if ((m->rope_applied != 0 && m->rope_applied != 1) || (m->causal != 0 && m->causal != 1))
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: rope_applied and causal must be 0 or 1",
                             path);
    if (m->nlayers < 1 || m->hq < 1 || m->hkv < 1 || m->n < 1 || m->d < 1)
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "%s: layers, heads, kv heads, tokens and head dim must all be >= 1 "
                             "(got %zu, %zu, %zu, %zu, %zu)", path, m->nlayers, m->hq, m->hkv,
                             m->n, m->d);
    if (m->hq % m->hkv)
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: %zu q heads is not a multiple of %zu kv "
                             "heads", path, m->hq, m->hkv);
    if (m->nlayers > 999999999)
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: too many layers (%zu)", path, m->nlayers);
    size_t hmax = m->hq > m->hkv ? m->hq : m->hkv;
    if (m->n > SIZE_MAX / sizeof(float) / m->d || m->n * m->d > SIZE_MAX / sizeof(float) / hmax)
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: tensor shape too large", path);
    if (m->has_eval_loss && !isfinite(m->eval_loss))
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: eval_loss is not finite", path);
    if (m->has_vocab_size && m->vocab_size < 1)
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: vocab_size must be >= 1", path);
    if (m->has_softmax_scale && !(m->softmax_scale > 0 && isfinite(m->softmax_scale)))
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: softmax_scale must be finite and > 0",
                             path);
    if (m->nseq) {
        if (!m->seqlens)
            return qattn_err_set(err, QATTN_ERR_ARG, "%s: nseq = %zu but seqlens is NULL", path,
                                 m->nseq);
        uint64_t sum = 0;
        for (size_t i = 0; i < m->nseq; i++) {
            if (m->seqlens[i] < 1)
                return qattn_err_set(err, QATTN_ERR_ARG,
                                     "%s: seqlens[%zu] = %lld, must be >= 1", path, i,
                                     (long long)m->seqlens[i]);
            if ((uint64_t)m->seqlens[i] > m->n - sum)
                return qattn_err_set(err, QATTN_ERR_ARG,
                                     "%s: seqlens sum to more than N = %zu", path, m->n);
            sum += (uint64_t)m->seqlens[i];
        }
        if (sum != m->n)
            return qattn_err_set(err, QATTN_ERR_ARG, "%s: seqlens sum to %llu but N = %zu", path,
                                 (unsigned long long)sum, m->n);
    }
    return 0;
}

int qattn_act_tmp_path(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!base[0])
        return -1;
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    int tl = snprintf(buf, len, "%.*s.%s.tmp.%ld", dirlen, path, base, (long)getpid());
    return tl < 0 || (size_t)tl >= len ? -1 : 0;
}

int qattn_act_write_begin(qattn_act_writer *w, const char *path, const qattn_act_meta *meta,
                          qattn_err *err)
{
    memset(w, 0, sizeof *w);
    w->fid = -1;
    if (!path || !path[0] || !meta)
        return qattn_err_set(err, QATTN_ERR_ARG, "activation writer: empty path or no meta");
    h5_quiet();
    int rc = check_meta(path, meta, err);
    if (rc)
        return rc;
    size_t plen = strlen(path);
    if (plen >= sizeof w->path)
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: path too long", path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!base[0])
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: path names a directory, not a file", path);
    if (qattn_act_tmp_path(path, w->tmp, sizeof w->tmp)) {
        w->tmp[0] = '\0';
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: path too long", path);
    }
    memcpy(w->path, path, plen + 1);
    w->meta = *meta;
    w->meta.seqlens = NULL;
    w->meta.nseq = 0;
    if (meta->nseq) {
        w->meta.seqlens = malloc(meta->nseq * sizeof *w->meta.seqlens);
        if (!w->meta.seqlens) {
            w->tmp[0] = '\0';
            return qattn_err_set(err, QATTN_ERR_NOMEM, "%s: out of memory", path);
        }
        memcpy(w->meta.seqlens, meta->seqlens, meta->nseq * sizeof *w->meta.seqlens);
        w->meta.nseq = meta->nseq;
    }
    char why[400];
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0)
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    errno = 0;
    hid_t fid = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl >= 0 ? fapl : H5P_DEFAULT);
    int e = errno;
    if (fid < 0)
        h5_reason(why, sizeof why);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (fid < 0) {
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot create temporary file %s: %s", path,
                           w->tmp, e ? strerror(e) : why);
        /* H5Fcreate leaves nothing behind, but make sure */
        unlink(w->tmp);
        w->tmp[0] = '\0';
        qattn_act_meta_free(&w->meta);
        return rc;
    }
    w->fid = fid;
    const qattn_act_meta *m = &w->meta;
    long long rope = m->rope_applied, causal = m->causal, vocab = m->vocab_size;
    int bad = write_str_attr(fid, "schema", QATTN_ACT_SCHEMA) ||
              write_str_attr(fid, "model", m->model) ||
              write_str_attr(fid, "source", m->source) ||
              write_str_attr(fid, "license", m->license) ||
              write_str_attr(fid, "text_source", m->text_source) ||
              write_num_attr(fid, "rope_applied", H5T_STD_I64LE, H5T_NATIVE_LLONG, &rope) ||
              write_num_attr(fid, "causal", H5T_STD_I64LE, H5T_NATIVE_LLONG, &causal) ||
              (m->has_eval_loss && write_num_attr(fid, "eval_loss", H5T_IEEE_F64LE,
                                                  H5T_NATIVE_DOUBLE, &m->eval_loss)) ||
              (m->has_vocab_size &&
               write_num_attr(fid, "vocab_size", H5T_STD_I64LE, H5T_NATIVE_LLONG, &vocab)) ||
              (m->has_softmax_scale && write_num_attr(fid, "softmax_scale", H5T_IEEE_F64LE,
                                                      H5T_NATIVE_DOUBLE, &m->softmax_scale));
    if (!bad && m->nseq) {
        hsize_t dim = m->nseq;
        hid_t sp = H5Screate_simple(1, &dim, NULL), d = -1;
        bad = sp < 0 ||
              (d = H5Dcreate2(fid, "seqlens", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT,
                              H5P_DEFAULT)) < 0 ||
              H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, m->seqlens) < 0;
        close_id(&d, H5Dclose);
        close_id(&sp, H5Sclose);
    }
    if (bad) {
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot write attributes to %s%s", path,
                           w->tmp, h5_reason(why, sizeof why));
        writer_cleanup(w);
        return rc;
    }
    return 0;
}

/* Writes one [heads, n, d] tensor as dataset `name` of group g. */
static int write_tensor(qattn_act_writer *w, hid_t g, const char *lname, const char *name,
                        size_t heads, const float *x, uint16_t *hbuf, qattn_err *err)
{
    const qattn_act_meta *m = &w->meta;
    size_t per_head = m->n * m->d, count = heads * per_head;
    for (size_t i = 0; i < count; i++) {
        if (!isfinite(x[i]))
            return qattn_err_set(err, QATTN_ERR_NAN,
                                 "%s: /%s/%s has %s at [head %zu, token %zu, channel %zu] (not "
                                 "written)", w->path, lname, name, isnan(x[i]) ? "NaN" : "Inf",
                                 i / per_head, (i / m->d) % m->n, i % m->d);
        if (m->f16 && fabsf(x[i]) >= 65520.0f)
            return qattn_err_set(err, QATTN_ERR_RANGE,
                                 "%s: /%s/%s has %g at [head %zu, token %zu, channel %zu], "
                                 "beyond the float16 range (max 65504)", w->path, lname, name,
                                 (double)x[i], i / per_head, (i / m->d) % m->n, i % m->d);
    }
    char why[400];
    int rc = 0;
    hsize_t dims[3] = {heads, m->n, m->d};
    size_t esize = m->f16 ? 2 : 4;
    /* one chunk per head, capped at about 4 MiB */
    size_t rows = ((size_t)4 << 20) / (m->d * esize);
    if (rows < 1)
        rows = 1;
    if (rows > m->n)
        rows = m->n;
    hsize_t chunk[3] = {1, rows, m->d};
    hid_t ftype = -1, mtype = -1, dcpl = -1, fsp = -1, msp = -1, d = -1;
    if (m->f16) {
        ftype = make_half_type(H5T_ORDER_LE);
        mtype = make_half_type(native_order());
    } else {
        ftype = H5Tcopy(H5T_IEEE_F32LE);
        mtype = H5Tcopy(H5T_NATIVE_FLOAT);
    }
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    fsp = H5Screate_simple(3, dims, NULL);
    if (ftype < 0 || mtype < 0 || dcpl < 0 || fsp < 0 || H5Pset_chunk(dcpl, 3, chunk) < 0 ||
        H5Pset_shuffle(dcpl) < 0 || H5Pset_deflate(dcpl, 4) < 0 ||
        (d = H5Dcreate2(g, name, ftype, fsp, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0) {
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot create /%s/%s in %s%s", w->path,
                           lname, name, w->tmp, h5_reason(why, sizeof why));
        goto done;
    }
    if (m->f16) {
        hsize_t mdims[3] = {1, m->n, m->d};
        msp = H5Screate_simple(3, mdims, NULL);
        if (msp < 0) {
            rc = qattn_err_set(err, QATTN_ERR_IO, "%s: HDF5 dataspace error%s", w->path,
                               h5_reason(why, sizeof why));
            goto done;
        }
        for (size_t h = 0; h < heads; h++) {
            const float *xh = x + h * per_head;
            for (size_t i = 0; i < per_head; i++)
                hbuf[i] = qattn_fp16_encode(xh[i]);
            hsize_t start[3] = {h, 0, 0};
            if (H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, mdims, NULL) < 0 ||
                H5Dwrite(d, mtype, msp, fsp, H5P_DEFAULT, hbuf) < 0) {
                rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot write /%s/%s to %s%s",
                                   w->path, lname, name, w->tmp, h5_reason(why, sizeof why));
                goto done;
            }
        }
    } else if (H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) < 0) {
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot write /%s/%s to %s%s", w->path, lname,
                           name, w->tmp, h5_reason(why, sizeof why));
        goto done;
    }
done:
    close_id(&d, H5Dclose);
    close_id(&msp, H5Sclose);
    close_id(&fsp, H5Sclose);
    close_id(&dcpl, H5Pclose);
    close_id(&mtype, H5Tclose);
    close_id(&ftype, H5Tclose);
    return rc;
}

int qattn_act_write_layer(qattn_act_writer *w, const float *q, const float *k, const float *v,
                          qattn_err *err)
{
    if (!w || w->fid < 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "activation writer is not open");
    h5_quiet();
    int rc;
    if (!q || !k || !v) {
        rc = qattn_err_set(err, QATTN_ERR_ARG, "%s: write_layer needs q, k and v", w->path);
        writer_cleanup(w);
        return rc;
    }
    if (w->written >= w->meta.nlayers) {
        rc = qattn_err_set(err, QATTN_ERR_ARG, "%s: all %zu layers were already written",
                           w->path, w->meta.nlayers);
        writer_cleanup(w);
        return rc;
    }
    char lname[32], why[400];
    snprintf(lname, sizeof lname, "layer_%02zu", w->written);
    uint16_t *hbuf = NULL;
    if (w->meta.f16) {
        hbuf = malloc(w->meta.n * w->meta.d * sizeof *hbuf);
        if (!hbuf) {
            rc = qattn_err_set(err, QATTN_ERR_NOMEM, "%s: out of memory", w->path);
            writer_cleanup(w);
            return rc;
        }
    }
    hid_t g = H5Gcreate2((hid_t)w->fid, lname, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) {
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot create /%s in %s%s", w->path, lname,
                           w->tmp, h5_reason(why, sizeof why));
    } else {
        rc = write_tensor(w, g, lname, "q", w->meta.hq, q, hbuf, err);
        if (!rc)
            rc = write_tensor(w, g, lname, "k", w->meta.hkv, k, hbuf, err);
        if (!rc)
            rc = write_tensor(w, g, lname, "v", w->meta.hkv, v, hbuf, err);
        H5Gclose(g);
    }
    free(hbuf);
    if (rc) {
        writer_cleanup(w);
        return rc;
    }
    w->written++;
    return 0;
}

int qattn_act_write_commit(qattn_act_writer *w, qattn_err *err)
{
    if (!w || w->fid < 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "activation writer is not open");
    h5_quiet();
    int rc;
    char why[400];
    if (w->written != w->meta.nlayers) {
        rc = qattn_err_set(err, QATTN_ERR_ARG, "%s: only %zu of %zu layers were written",
                           w->path, w->written, w->meta.nlayers);
        writer_cleanup(w);
        return rc;
    }
    herr_t hr = H5Fclose((hid_t)w->fid);
    w->fid = -1;
    if (hr < 0) {
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot close %s%s", w->path, w->tmp,
                           h5_reason(why, sizeof why));
        writer_cleanup(w);
        return rc;
    }
    int fd = open(w->tmp, O_RDONLY);
    if (fd < 0 || fsync(fd) != 0) {
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot sync %s: %s", w->path, w->tmp,
                           strerror(errno));
        if (fd >= 0)
            close(fd);
        writer_cleanup(w);
        return rc;
    }
    close(fd);
    if (rename(w->tmp, w->path) != 0) {
        rc = qattn_err_set(err, QATTN_ERR_IO, "%s: cannot rename %s into place: %s", w->path,
                           w->tmp, strerror(errno));
        writer_cleanup(w);
        return rc;
    }
    w->tmp[0] = '\0';
    qattn_act_meta_free(&w->meta);
    return 0;
}
