/* HDF5 activation files (schema "qattn-activations/1"): the validating
 * reader (root attributes in h5io_attr.c, the writer in h5io_write.c). See
 * qattn/h5io.h and docs/DESIGN.md "Activation files (HDF5)".
 *
 * HDF5's own error printing is switched off; every failure becomes one
 * message naming the file and the object, with the innermost HDF5 reason
 * appended where the library gave one. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5io_priv.h"
#include "qattn/formats.h"

#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t qattn_h5_linfo;
#define QATTN_H5_LITERATE H5Literate2
#else
typedef H5L_info_t qattn_h5_linfo;
#define QATTN_H5_LITERATE H5Literate
#endif

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

/* The data of dataset d (shape dims, esize bytes an element) must be in
 * the file, all of it: a chunk never written reads as zeros, so a few KB
 * could declare [1, 200000, 64] and send a run through hours of attention
 * on fill values, or through allocating what no machine has. So: no
 * external or virtual storage (it would read other files), every chunk
 * written, contiguous data allocated whole, and no more stored bytes than
 * the file (fsize bytes) has. */
static int check_storage(const char *path, hid_t d, const char *lname, const char *name, const hsize_t dims[3],
                         size_t esize, long long fsize, qattn_err *err)
{
    char why[400], sh[200];
    fmt_shape(sh, sizeof sh, dims, 3);
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot read the storage of /%s/%s%s", path, lname, name,
                             h5_reason(why, sizeof why));
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int next = H5Pget_external_count(dcpl);
    hsize_t cdims[3] = {0, 0, 0};
    int crank = layout == H5D_CHUNKED ? H5Pget_chunk(dcpl, 3, cdims) : 0;
    H5Pclose(dcpl);
    H5Eclear2(H5E_DEFAULT);
    if (next > 0 || layout == H5D_VIRTUAL)
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: /%s/%s keeps its data in other files (%s storage); only data inside the "
                             "file is read",
                             path, lname, name, next > 0 ? "external" : "virtual");
    /* in bytes, as a double: dims are checked against size_t, not products */
    double declared = (double)dims[0] * (double)dims[1] * (double)dims[2] * (double)esize;
    hsize_t stored = H5Dget_storage_size(d);
    if (layout == H5D_CHUNKED) {
        if (crank != 3 || !cdims[0] || !cdims[1] || !cdims[2])
            return qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: /%s/%s has an unreadable chunk shape", path, lname,
                                 name);
        /* a chunk past the dataset's shape (an edited chunk dim: 5 x 2 data in a 5 x 167772162
         * chunk made libhdf5 copy out of bounds, fuzz_h5 2026-11-27); writers never make one for
         * a fixed shape */
        if (cdims[0] > dims[0] || cdims[1] > dims[1] || cdims[2] > dims[2])
            return qattn_err_set(err, QATTN_ERR_SCHEMA,
                                 "%s: /%s/%s has chunks of %llu x %llu x %llu, larger than its shape %s", path,
                                 lname, name, (unsigned long long)cdims[0], (unsigned long long)cdims[1],
                                 (unsigned long long)cdims[2], sh);
        double want = 1;
        for (int i = 0; i < 3; i++)
            want *= (double)((dims[i] + cdims[i] - 1) / cdims[i]);
#if H5_VERSION_GE(1, 10, 5)
        hsize_t have = 0;
        hid_t fsp = H5Dget_space(d);
        herr_t hr = fsp >= 0 ? H5Dget_num_chunks(d, fsp, &have) : -1;
        close_id(&fsp, H5Sclose);
        if (hr < 0)
            return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot count the chunks of /%s/%s%s", path, lname, name,
                                 h5_reason(why, sizeof why));
        if ((double)have < want)
            return qattn_err_set(err, QATTN_ERR_SCHEMA,
                                 "%s: /%s/%s declares shape %s but only %llu of its %.0f chunks were written (an "
                                 "unfinished file?)",
                                 path, lname, name, sh, (unsigned long long)have, want);
#endif
    } else if ((layout == H5D_CONTIGUOUS || layout == H5D_COMPACT) && (double)stored < declared) {
        /* compact data lives in the object header: a declared shape past its stored bytes made
         * libhdf5 copy out of bounds (fuzz_h5, 2026-11-27) */
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: /%s/%s declares shape %s (%.0f bytes) but holds %llu bytes of data (an "
                             "unfinished file?)",
                             path, lname, name, sh, declared, (unsigned long long)stored);
    }
    if ((double)stored > (double)fsize)
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: /%s/%s declares %llu bytes of data but the file has only %lld bytes", path, lname,
                             name, (unsigned long long)stored, fsize);
    return 0;
}

/* Check /layer_LL/name: a rank-3 float16/float32 dataset with no zero dim. */
static int check_dataset(const char *path, hid_t g, const char *lname, const char *name, long long fsize,
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
    rc = check_storage(path, o, lname, name, out->dims, out->f16 ? 2 : 4, fsize, err);
done:
    close_id(&t, H5Tclose);
    close_id(&sp, H5Sclose);
    H5Oclose(o);
    return rc;
}

static int same_dims(const hsize_t *a, const hsize_t *b)
{
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
}

static int check_layer(const char *path, hid_t fid, size_t l, long long fsize, size_t q_offset, ds_info ref[3],
                       qattn_err *err)
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
        rc = check_dataset(path, g, lname, names[i], fsize, &di[i], err);
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
    if (di[0].dims[1] + q_offset != di[1].dims[1] || di[0].dims[2] != di[1].dims[2]) {
        fmt_shape(s0, sizeof s0, di[0].dims, 3);
        fmt_shape(s1, sizeof s1, di[1].dims, 3);
        if (q_offset)
            return qattn_err_set(err, QATTN_ERR_SCHEMA,
                                 "%s: /%s/q has shape %s but /%s/k has %s (with q_offset = %zu, q must "
                                 "have N - %zu tokens and k's head dim)", path, lname, s0, lname, s1, q_offset,
                                 q_offset);
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
    close_id(&t, H5Tclose);
    close_id(&sp, H5Sclose);
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

/* the plain checks, before libhdf5 sees the file: it exists and is a
 * regular file; *st its status */
static int check_plain(const char *path, struct stat *st, qattn_err *err)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return qattn_err_set(err, QATTN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int st_ok = fstat(fd, st) == 0;
    close(fd);
    if (!st_ok || !S_ISREG(st->st_mode))
        return qattn_err_set(err, QATTN_ERR_IO, "%s: not a regular file", path);
    return 0;
}

/* The whole validation in this process: what the check's child runs, and
 * then the caller once the child succeeded. */
static int open_here(const char *path, qattn_act_file *f, struct stat *st, qattn_err *err)
{
    memset(f, 0, sizeof *f);
    f->fid = -1;
    h5_quiet();
    snprintf(f->path, sizeof f->path, "%s", path);
    int rc = check_plain(path, st, err);
    if (rc)
        return rc;
    char why[400];
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return qattn_err_set(err, QATTN_ERR_IO, "%s: not an HDF5 file%s", path,
                             st->st_size == 0 ? " (it is empty)" : "");
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
    if ((rc = qattn_h5_read_attributes(path, fid, &f->meta, err)))
        goto fail;
    size_t nl = 0;
    if ((rc = count_layers(path, fid, &nl, err)))
        goto fail;
    ds_info ref[3];
    memset(ref, 0, sizeof ref);
    for (size_t l = 0; l < nl; l++)
        if ((rc = check_layer(path, fid, l, (long long)st->st_size, f->meta.q_offset, ref, err)))
            goto fail;
    qattn_act_meta *m = &f->meta;
    m->nlayers = nl;
    m->hq = (size_t)ref[0].dims[0];
    m->hkv = (size_t)ref[1].dims[0];
    m->n = (size_t)ref[1].dims[1];
    m->d = (size_t)ref[0].dims[2];
    m->f16 = ref[0].f16;
    if ((size_t)m->rope_dim > m->d) {
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: root attribute 'rope_dim' is %d, more than the head dim %zu",
                           path, m->rope_dim, m->d);
        goto fail;
    }
    if ((rc = read_seqlens(path, fid, m, err)))
        goto fail;
    if (m->q_offset && m->nseq > 1) {
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: q_offset = %zu needs one sequence, /seqlens has %zu", path,
                           m->q_offset, m->nseq);
        goto fail;
    }
    return 0;
fail:
    qattn_act_close(f);
    return rc;
}

static int check_in_child(const char *path, qattn_err *err)
{
    qattn_act_file f;
    struct stat st;
    int rc = open_here(path, &f, &st, err);
    if (!rc)
        qattn_act_close(&f);
    return rc;
}

int qattn_act_open_rows(const char *path, qattn_act_file *f, qattn_err *err)
{
    memset(f, 0, sizeof *f);
    f->fid = -1;
    if (!path || !path[0])
        return qattn_err_set(err, QATTN_ERR_ARG, "activation file: empty path");
    struct stat before, now;
    int rc = check_plain(path, &before, err);
    if (!rc)
        rc = qattn_h5_isolate(path, check_in_child, err);
    if (!rc)
        rc = open_here(path, f, &now, err);
    if (rc)
        return rc;
    /* the file opened must be the one the child checked */
    void *handle = NULL;
    struct stat opened;
    if (H5Fget_vfd_handle((hid_t)f->fid, H5P_DEFAULT, &handle) >= 0 && handle &&
        fstat(*(int *)handle, &opened) == 0 &&
        (opened.st_dev != before.st_dev || opened.st_ino != before.st_ino ||
         opened.st_size != before.st_size || opened.st_mtim.tv_sec != before.st_mtim.tv_sec ||
         opened.st_mtim.tv_nsec != before.st_mtim.tv_nsec)) {
        qattn_act_close(f);
        return qattn_err_set(err, QATTN_ERR_IO, "%s: the file changed while it was being "
                             "checked; try again", path);
    }
    H5Eclear2(H5E_DEFAULT);
    return 0;
}

int qattn_act_open(const char *path, qattn_act_file *f, qattn_err *err)
{
    int rc = qattn_act_open_rows(path, f, err);
    if (!rc && f->meta.q_offset) {
        size_t off = f->meta.q_offset;
        qattn_act_close(f);
        return qattn_err_set(err, QATTN_ERR_SCHEMA,
                             "%s: q holds the query rows from position %zu on only (q_offset; `qattn dsv4` reads "
                             "such files), this command needs every row", path, off);
    }
    return rc;
}

/* Reads one dataset into out (float32), checking shape and finiteness. */
static int read_tensor(qattn_act_file *f, hid_t g, const char *lname, const char *name,
                       size_t heads, size_t ntok, float *out, qattn_err *err)
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
        H5Sget_simple_extent_dims(sp, dims, NULL) < 0 || dims[0] != heads || dims[1] != ntok ||
        dims[2] != m->d) {
        H5Eclear2(H5E_DEFAULT);
        rc = qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: /%s/%s changed shape since the file was "
                           "opened", f->path, lname, name);
        goto done;
    }
    size_t count = heads * ntok * m->d;
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
            size_t c = i % m->d, tk = (i / m->d) % ntok, h = i / (m->d * ntok);
            rc = qattn_err_set(err, QATTN_ERR_NAN,
                               "%s: /%s/%s has %s at [head %zu, token %zu, channel %zu]",
                               f->path, lname, name, isnan(out[i]) ? "NaN" : "Inf", h, tk, c);
            goto done;
        }
done:
    close_id(&mt, H5Tclose);
    close_id(&t, H5Tclose);
    close_id(&sp, H5Sclose);
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
    const size_t n = f->meta.n;
    int rc = read_tensor(f, g, lname, "q", f->meta.hq, n - f->meta.q_offset, q, err);
    if (!rc)
        rc = read_tensor(f, g, lname, "k", f->meta.hkv, n, k, err);
    if (!rc)
        rc = read_tensor(f, g, lname, "v", f->meta.hkv, n, v, err);
    H5Gclose(g);
    return rc;
}
