/* The isolated check of activation files (h5io_guard.c): files that crash
 * or hang libhdf5 are refused with one line, the child's limits (time,
 * address space) hold, a file replaced during the check is refused, and
 * the limits' environment variables are checked. Files live in
 * ./test_h5io_guard.d (created and removed). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "check.h"
#include "h5io_fixture.h"
#include "qattn/h5io.h"

#define DIR_ "test_h5io_guard.d"

/* a small valid file through the writer; vlen: string attributes in the
 * global heap */
static void write_small(const char *path, int vlen)
{
    qattn_act_meta m;
    fill_meta(&m, 0, NULL, 0);
    m.vlen_strings = vlen;
    size_t nq = m.hq * m.n * m.d, nk = m.hkv * m.n * m.d;
    float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
    qattn_act_writer w;
    qattn_err err = {""};
    int rc = qattn_act_write_begin(&w, path, &m, &err);
    for (size_t l = 0; l < m.nlayers && !rc && q && k && v; l++) {
        make_layer(l, m.hq, m.hkv, m.n, m.d, q, k, v);
        rc = qattn_act_write_layer(&w, q, k, v, &err);
    }
    if (!rc)
        rc = qattn_act_write_commit(&w, &err);
    CHECK(rc == 0, "write %s: %s", path, err.msg);
    free(q);
    free(k);
    free(v);
}

/* Sets the size field of object `obj` (1-based) of the file's first global
 * heap collection ("GCOL", then version, 3 reserved bytes, the collection
 * size; each object: index u16, refcount u16, 4 reserved, size u64, data
 * padded to 8) to size(old) (new = f(old)); 0, or -1 when not found. */
static int patch_heap_size(const char *path, int obj, uint64_t add, uint64_t set)
{
    FILE *fp = fopen(path, "r+b");
    if (!fp)
        return -1;
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, fp);
    int rc = -1;
    for (size_t i = 0; i + 16 <= n && rc; i++) {
        if (memcmp(buf + i, "GCOL", 4))
            continue;
        size_t o = i + 16;
        for (int j = 1; j <= obj && o + 16 <= n; j++) {
            uint64_t sz;
            memcpy(&sz, buf + o + 8, 8); /* little-endian files on a little-endian host */
            if (j == obj) {
                uint64_t nz = set ? set : sz + add;
                memcpy(buf + o + 8, &nz, 8);
                rc = fseek(fp, (long)(o + 8), SEEK_SET) || fwrite(&nz, 8, 1, fp) != 1;
                rc = rc ? -1 : 0;
                break;
            }
            o += 16 + (size_t)((sz + 7) / 8 * 8);
        }
        break;
    }
    return fclose(fp) || rc ? -1 : 0;
}

static void hook_segv(void) { raise(SIGSEGV); }
static void hook_sleep(void) { sleep(30); }
/* maps and touches 256 MiB: exit status 3 when that works */
static void hook_alloc(void)
{
    size_t n = (size_t)256 << 20;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return;
    memset(p, 1, n);
    _exit(3);
}
static const char *swap_from, *swap_to;
static void hook_swap(void) { rename(swap_from, swap_to); }

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void test_guard(void)
{
    char good[256], vlen[256], p[256];
    snprintf(good, sizeof good, "%s/guard_fixed.h5", DIR_);
    snprintf(vlen, sizeof vlen, "%s/guard_vlen.h5", DIR_);
    write_small(good, 0);
    write_small(vlen, 1);
    qattn_act_file f;
    qattn_err err = {""};
    /* the writer's strings are fixed-length; h5py-style ones still read */
    int rc = qattn_act_open(good, &f, &err);
    CHECK(rc == 0 && f.meta.vlen_strings == 0 && !strcmp(f.meta.model, "test-model/1b"),
          "fixed-length strings: %s", err.msg);
    qattn_act_close(&f);
    rc = qattn_act_open(vlen, &f, &err);
    CHECK(rc == 0 && f.meta.vlen_strings == 1 && !strcmp(f.meta.text_source, "caf\xc3\xa9 (utf-8)"),
          "variable-length strings: %s", err.msg);
    qattn_act_close(&f);

    /* one 8-byte edit, the size of the first global-heap object: libhdf5
     * reads out of bounds (SIGSEGV in H5HG_read) */
    snprintf(p, sizeof p, "%s/guard_crash.h5", DIR_);
    write_small(p, 1);
    CHECK(patch_heap_size(p, 1, 0, 0x7fffffff) == 0, "global heap found in %s", p);
    expect_open_fail(p, QATTN_ERR_IO, "corrupt HDF5 file", "heap object size 2^31-1");
    /* the second object 17 bytes longer: libhdf5 loops forever (H5C_protect) */
    snprintf(p, sizeof p, "%s/guard_hang.h5", DIR_);
    write_small(p, 1);
    CHECK(patch_heap_size(p, 2, 17, 0) == 0, "global heap found in %s", p);
    setenv("QATTN_H5_CHECK_SECONDS", "1", 1);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    expect_open_fail(p, QATTN_ERR_IO, "still reading its metadata after 1 s", "heap loop");
    double took = seconds_since(&t0);
    CHECK(took < 5, "a hanging file is given up after the limit: %.1f s", took);

    /* the same paths, forced from inside the child */
    qattn_act_check_hooks h = {hook_sleep, NULL};
    qattn_act_set_check_hooks(&h);
    setenv("QATTN_H5_CHECK_SECONDS", "0.3", 1);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    expect_open_fail(good, QATTN_ERR_IO, "still reading its metadata after 0.3 s", "hook sleeps");
    took = seconds_since(&t0);
    CHECK(took < 3, "the child that sleeps is killed at the limit: %.1f s", took);
    unsetenv("QATTN_H5_CHECK_SECONDS");
    h.child_start = hook_segv;
    qattn_act_set_check_hooks(&h);
    expect_open_fail(good, QATTN_ERR_IO, "crashed reading its metadata (signal ", "hook SIGSEGV");
    /* RLIMIT_AS: 256 MiB are mapped under the default limit, not under 64 */
    h.child_start = hook_alloc;
    qattn_act_set_check_hooks(&h);
    expect_open_fail(good, QATTN_ERR_IO, "ended with exit status 3", "hook maps 256 MiB");
    setenv("QATTN_H5_CHECK_MB", "64", 1);
    rc = qattn_act_open(good, &f, &err);
    CHECK(rc == 0, "64 MiB limit: the child cannot map 256 MiB: %s", err.msg);
    qattn_act_close(&f);
    /* the file the parent opens must be the one the child checked */
    swap_from = vlen;
    swap_to = good;
    h.child_start = hook_swap;
    qattn_act_set_check_hooks(&h);
    expect_open_fail(good, QATTN_ERR_IO, "changed while it was being checked", "file replaced");
    qattn_act_set_check_hooks(NULL);

    setenv("QATTN_H5_CHECK_MB", "0", 1);
    rc = qattn_act_open(good, &f, &err);
    CHECK(rc == QATTN_ERR_ARG, "QATTN_H5_CHECK_MB=0: %d %s", rc, err.msg);
    CHECK_STR_CONTAINS(err.msg, "QATTN_H5_CHECK_MB");
    unsetenv("QATTN_H5_CHECK_MB");
    setenv("QATTN_H5_CHECK_SECONDS", "1e9", 1);
    rc = qattn_act_open(good, &f, &err);
    CHECK(rc == QATTN_ERR_ARG, "QATTN_H5_CHECK_SECONDS=1e9: %d %s", rc, err.msg);
    CHECK_STR_CONTAINS(err.msg, "QATTN_H5_CHECK_SECONDS");
    unsetenv("QATTN_H5_CHECK_SECONDS");
}

int main(void)
{
    if (scratch_begin(DIR_))
        return 1;
    test_guard();
    rm_tree(DIR_);
    return check_done();
}
