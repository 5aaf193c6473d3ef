/* HDF5 activation files: the atomic writer (a temporary file beside the
 * target, renamed into place on commit). See qattn/h5io.h. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5io_priv.h"
#include "qattn/formats.h"

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

/* A UTF-8 string attribute: fixed-length (its bytes in the attribute
 * itself), or variable-length when vlen (in the global heap, as h5py
 * writes strings; reading those is where a corrupt file crashes libhdf5). */
static int write_str_attr(hid_t fid, const char *name, const char *val, int vlen)
{
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
    int ok = t >= 0 && sp >= 0 &&
             H5Tset_size(t, vlen ? H5T_VARIABLE : strlen(val) + 1) >= 0 &&
             H5Tset_strpad(t, H5T_STR_NULLTERM) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0 &&
             (a = H5Acreate2(fid, name, t, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
             H5Awrite(a, t, vlen ? (const void *)&val : (const void *)val) >= 0;
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
    if (m->has_softmax_scale && !(m->softmax_scale > 0 && m->softmax_scale <= QATTN_SOFTMAX_SCALE_MAX))
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: softmax_scale must be > 0 and at most %g", path,
                             QATTN_SOFTMAX_SCALE_MAX);
    if (m->q_offset && (m->q_offset >= m->n || m->nseq > 1))
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: q_offset = %zu needs q_offset < N = %zu and one sequence",
                             path, m->q_offset, m->n);
    if (m->rope_dim < 0 || (size_t)m->rope_dim > m->d)
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: rope_dim = %d, must be 0 to the head dim %zu", path,
                             m->rope_dim, m->d);
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
    int vl = m->vlen_strings;
    long long qoff = (long long)m->q_offset, ropedim = m->rope_dim;
    int bad = write_str_attr(fid, "schema", QATTN_ACT_SCHEMA, vl) ||
              write_str_attr(fid, "model", m->model, vl) ||
              write_str_attr(fid, "source", m->source, vl) ||
              write_str_attr(fid, "license", m->license, vl) ||
              write_str_attr(fid, "text_source", m->text_source, vl) ||
              write_num_attr(fid, "rope_applied", H5T_STD_I64LE, H5T_NATIVE_LLONG, &rope) ||
              write_num_attr(fid, "causal", H5T_STD_I64LE, H5T_NATIVE_LLONG, &causal) ||
              (m->has_eval_loss && write_num_attr(fid, "eval_loss", H5T_IEEE_F64LE,
                                                  H5T_NATIVE_DOUBLE, &m->eval_loss)) ||
              (m->has_vocab_size &&
               write_num_attr(fid, "vocab_size", H5T_STD_I64LE, H5T_NATIVE_LLONG, &vocab)) ||
              (m->has_softmax_scale && write_num_attr(fid, "softmax_scale", H5T_IEEE_F64LE,
                                                      H5T_NATIVE_DOUBLE, &m->softmax_scale)) ||
              (qoff && write_num_attr(fid, "q_offset", H5T_STD_I64LE, H5T_NATIVE_LLONG, &qoff)) ||
              (ropedim && write_num_attr(fid, "rope_dim", H5T_STD_I64LE, H5T_NATIVE_LLONG, &ropedim));
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
                        size_t heads, size_t ntok, const float *x, uint16_t *hbuf, qattn_err *err)
{
    const qattn_act_meta *m = &w->meta;
    size_t per_head = ntok * m->d, count = heads * per_head;
    for (size_t i = 0; i < count; i++) {
        if (!isfinite(x[i]))
            return qattn_err_set(err, QATTN_ERR_NAN,
                                 "%s: /%s/%s has %s at [head %zu, token %zu, channel %zu] (not "
                                 "written)", w->path, lname, name, isnan(x[i]) ? "NaN" : "Inf",
                                 i / per_head, (i / m->d) % ntok, i % m->d);
        if (m->f16 && fabsf(x[i]) >= 65520.0f)
            return qattn_err_set(err, QATTN_ERR_RANGE,
                                 "%s: /%s/%s has %g at [head %zu, token %zu, channel %zu], "
                                 "beyond the float16 range (max 65504)", w->path, lname, name,
                                 (double)x[i], i / per_head, (i / m->d) % ntok, i % m->d);
    }
    char why[400];
    int rc = 0;
    hsize_t dims[3] = {heads, ntok, m->d};
    size_t esize = m->f16 ? 2 : 4;
    /* one chunk per head, capped at about 4 MiB */
    size_t rows = ((size_t)4 << 20) / (m->d * esize);
    if (rows < 1)
        rows = 1;
    if (rows > ntok)
        rows = ntok;
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
        hsize_t mdims[3] = {1, ntok, m->d};
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
        const size_t n = w->meta.n;
        rc = write_tensor(w, g, lname, "q", w->meta.hq, n - w->meta.q_offset, q, hbuf, err);
        if (!rc)
            rc = write_tensor(w, g, lname, "k", w->meta.hkv, n, k, hbuf, err);
        if (!rc)
            rc = write_tensor(w, g, lname, "v", w->meta.hkv, n, v, hbuf, err);
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
