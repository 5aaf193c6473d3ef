/* HDF5 activation files: the root attributes (schema, provenance strings,
 * flags, optional numbers), each checked for type, count and range. See
 * qattn/h5io.h. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5io_priv.h"

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

/* String attribute (fixed- or variable-length) into out[size]; *vlen set
 * to 1 when it is variable-length. */
static int attr_string(const char *path, hid_t obj, const char *name, int required,
                       char *out, size_t size, int *vlen, qattn_err *err)
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
        *vlen = 1;
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

int qattn_h5_read_attributes(const char *path, hid_t fid, qattn_act_meta *m, qattn_err *err)
{
    char schema[128];
    int *vl = &m->vlen_strings;
    int rc = attr_string(path, fid, "schema", 1, schema, sizeof schema, vl, err);
    if (rc < 0)
        return rc;
    if (strcmp(schema, QATTN_ACT_SCHEMA) != 0)
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: root attribute 'schema' is '%s', expected '%s'", path, schema,
                             QATTN_ACT_SCHEMA);
    if ((rc = attr_string(path, fid, "model", 1, m->model, sizeof m->model, vl, err)) < 0 ||
        (rc = attr_string(path, fid, "source", 1, m->source, sizeof m->source, vl, err)) < 0 ||
        (rc = attr_string(path, fid, "license", 1, m->license, sizeof m->license, vl, err)) < 0 ||
        (rc = attr_string(path, fid, "text_source", 1, m->text_source, sizeof m->text_source,
                          vl, err)) < 0)
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
    if (rc == 1 && !(dv > 0 && dv <= QATTN_SOFTMAX_SCALE_MAX))
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: root attribute 'softmax_scale' is %g, must be > 0 and at most %g", path, dv,
                             QATTN_SOFTMAX_SCALE_MAX);
    m->has_softmax_scale = rc == 1;
    m->softmax_scale = rc == 1 ? dv : 0.0;
    /* the layout's attributes; checked against the shapes once they are known */
    if ((rc = attr_int(path, fid, "q_offset", 0, &iv, err)) < 0)
        return rc;
    if (rc == 1 && iv < 0)
        return qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: root attribute 'q_offset' is %lld, must be >= 0", path, iv);
    m->q_offset = rc == 1 ? (size_t)iv : 0;
    if ((rc = attr_int(path, fid, "rope_dim", 0, &iv, err)) < 0)
        return rc;
    if (rc == 1 && (iv < 0 || iv > 65536))
        return qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: root attribute 'rope_dim' is %lld, must be >= 0", path, iv);
    m->rope_dim = rc == 1 ? (int)iv : 0;
    return 0;
}
