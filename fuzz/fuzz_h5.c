/* The HDF5 activation reader as qattn uses it: qattn_act_open (whose
 * validation runs first in a child process, h5io_guard.c), then every
 * layer read in this process. libhdf5 crashing or hanging in the child is
 * a clean rejection, what the guard is for; a finding is anything that
 * goes wrong in this process, a rejection that is not one line naming the
 * file, or a sanitizer report from the child that blames qattn's own code.
 *
 * The child's coverage is copied back (shared memory) when it ends or
 * dies, so that the fuzzer sees the validation code it ran; its sanitizer
 * reports go to files (report.<pid>) in a scratch directory, read after
 * each input. A report's frames are told apart by address: qattn's code is
 * the instrumented code (the range of libFuzzer's PC table), so reports
 * need no symbolizer (ASAN_OPTIONS=symbolize=0 makes a crash in libhdf5
 * cost 10 ms, not 100). The check's limits: 0.1 s and 256 MiB, unless
 * set in the environment. */
#define _GNU_SOURCE /* mkdtemp, setenv, dl_iterate_phdr */
#include <dirent.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "qattn/h5io.h"

void __sanitizer_set_report_path(const char *path);
void __sanitizer_set_death_callback(void (*callback)(void));

static char dir[256], input[300], report[300];
static uint8_t *cntrs;  /* [counters] libFuzzer's inline 8-bit counters */
static uint8_t *shared; /* [counters] the child's copy, MAP_SHARED */
static size_t counters;
static uintptr_t code_lo, code_hi; /* qattn's (instrumented) code */
static size_t unclassified; /* child reports cut short (killed at the limit) */
/* what became of the inputs: opened, refused, the check crashed, ran out
 * of time, died otherwise (a sanitizer in libhdf5) */
static size_t outcome[5];

static void copy_counters(void)
{
    if (shared)
        memcpy(shared, cntrs, counters);
}

static void child_start(void)
{
    __sanitizer_set_report_path(report);
    __sanitizer_set_death_callback(copy_counters);
}

static void report_outcomes(void)
{
    fprintf(stderr, "fuzz_h5: inputs opened %zu, refused %zu; the check crashed %zu, timed out %zu, "
                    "died %zu; %zu child reports cut short\n",
            outcome[0], outcome[1], outcome[2], outcome[3], outcome[4], unclassified);
}

static int load_bias(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(uintptr_t *)data = (uintptr_t)info->dlpi_addr;
    return 1; /* the first object is the program */
}

/* The counters' section "__sancov_cntrs" and the PC table "__sancov_pcs"
 * ({pc, flags} pairs), from this program's section headers (a reference to
 * the linker's __start_ / __stop_ symbols would keep libFuzzer from
 * registering the counters at all). */
static void find_counters(void)
{
    FILE *f = fopen("/proc/self/exe", "rb");
    Elf64_Ehdr eh;
    if (!f || fread(&eh, sizeof eh, 1, f) != 1 || eh.e_shentsize != sizeof(Elf64_Shdr))
        goto done;
    Elf64_Shdr *sh = calloc(eh.e_shnum, sizeof *sh);
    if (!sh || fseek(f, (long)eh.e_shoff, SEEK_SET) || fread(sh, sizeof *sh, eh.e_shnum, f) != eh.e_shnum)
        goto free_sh;
    Elf64_Shdr *str = &sh[eh.e_shstrndx];
    char *names = malloc(str->sh_size + 1);
    if (!names || fseek(f, (long)str->sh_offset, SEEK_SET) || fread(names, 1, str->sh_size, f) != str->sh_size)
        goto free_names;
    names[str->sh_size] = '\0';
    uintptr_t bias = 0;
    dl_iterate_phdr(load_bias, &bias);
    for (unsigned i = 0; i < eh.e_shnum; i++)
        if (sh[i].sh_name < str->sh_size && !strcmp(names + sh[i].sh_name, "__sancov_cntrs")) {
            cntrs = (uint8_t *)(bias + sh[i].sh_addr);
            counters = sh[i].sh_size;
        } else if (sh[i].sh_name < str->sh_size && !strcmp(names + sh[i].sh_name, "__sancov_pcs")) {
            const uintptr_t *pcs = (const uintptr_t *)(bias + sh[i].sh_addr);
            code_lo = UINTPTR_MAX;
            for (size_t j = 0; j < sh[i].sh_size / sizeof *pcs; j += 2) {
                code_lo = pcs[j] < code_lo ? pcs[j] : code_lo;
                code_hi = pcs[j] > code_hi ? pcs[j] : code_hi;
            }
            code_hi += 4096; /* the return addresses after a function's last block */
        }
free_names:
    free(names);
free_sh:
    free(sh);
done:
    if (f)
        fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/qattn-fuzz-h5.XXXXXX", tmp);
    if (!mkdtemp(dir))
        abort();
    snprintf(input, sizeof input, "%s/input.h5", dir);
    snprintf(report, sizeof report, "%s/report", dir);
    setenv("QATTN_H5_CHECK_SECONDS", "0.1", 0);
    setenv("QATTN_H5_CHECK_MB", "256", 0);
    find_counters();
    if (counters) {
        shared = mmap(NULL, counters, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (shared == MAP_FAILED)
            shared = NULL;
    }
    qattn_act_check_hooks h = {child_start, copy_counters};
    qattn_act_set_check_hooks(&h);
    atexit(report_outcomes);
    return 0;
}

/* The first frame of the report's stack that is not the sanitizer's own
 * (interceptors, the runtime) or libc: 1 when it is qattn's code, 0 when it
 * is libhdf5's (or the report says nothing more, cut short by the limit). */
static int blames_qattn(const char *text)
{
    if (strstr(text, "runtime error:")) /* UBSan: only qattn's code is instrumented */
        return 1;
    int frames = 0;
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        unsigned long long pc;
        int n = -1;
        char frame[1024];
        size_t len = strcspn(l, "\n");
        snprintf(frame, sizeof frame, "%.*s", (int)(len < sizeof frame ? len : sizeof frame - 1), l);
        if (sscanf(frame, " #%*d 0x%llx%n", &pc, &n) < 1 || n < 0)
            continue;
        frames++;
        if (strstr(frame, "libhdf5"))
            return 0;
        if ((pc >= code_lo && pc < code_hi) || strstr(frame, "/quant/src/") || strstr(frame, "/studies/"))
            return 1;
        /* the sanitizer runtime, libc: on to the caller */
    }
    if (!frames || !strstr(text, "SUMMARY:")) {
        unclassified++;
        return 0;
    }
    return 1; /* a whole report that names neither: look at it */
}

/* the child's sanitizer reports of this input: abort on one that blames qattn */
static void child_reports(void)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (strncmp(ent->d_name, "report.", 7))
            continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        FILE *f = fopen(path, "r");
        static char text[1 << 16];
        size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
        text[n] = '\0';
        if (f)
            fclose(f);
        unlink(path);
        int ours = blames_qattn(text);
        if (getenv("QATTN_FUZZ_VERBOSE"))
            fprintf(stderr, "fuzz_h5: a child report, blaming %s:\n%s\n", ours ? "qattn" : "libhdf5", text);
        if (ours) {
            fprintf(stderr, "fuzz_h5: the check's child found a bug in qattn:\n%s\n", text);
            abort();
        }
    }
    closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(input, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f))
        abort();
    if (shared)
        memset(shared, 0, counters);
    qattn_act_file af;
    qattn_err e = {""};
    int rc = qattn_act_open(input, &af, &e);
    if (shared) /* what the child covered counts */
        for (size_t i = 0; i < counters; i++)
            if (shared[i] > cntrs[i])
                cntrs[i] = shared[i];
    child_reports();
    outcome[!rc ? 0 : strstr(e.msg, "libhdf5 crashed") ? 2 : strstr(e.msg, "still reading") ? 3
               : strstr(e.msg, "check of its metadata ended") ? 4 : 1]++;
    if (rc) {
        fuzz_check_error(rc, &e, input);
        FUZZ_CHECK(rc == QATTN_ERR_IO || rc == QATTN_ERR_SCHEMA || rc == QATTN_ERR_NAN || rc == QATTN_ERR_NOMEM,
                   "code %d: %s", rc, e.msg);
        FUZZ_CHECK(!strncmp(e.msg, input, strlen(input)), "the message does not name the file: %s", e.msg);
        return 0;
    }
    const qattn_act_meta *m = &af.meta;
    FUZZ_CHECK(m->nlayers >= 1 && m->hq >= 1 && m->hkv >= 1 && m->n >= 1 && m->d >= 1 && m->hq % m->hkv == 0,
               "accepted shape: %zu layers, [%zu, %zu, %zu, %zu]", m->nlayers, m->hq, m->hkv, m->n, m->d);
    FUZZ_CHECK(!m->has_softmax_scale || (m->softmax_scale > 0 && m->softmax_scale <= QATTN_SOFTMAX_SCALE_MAX),
               "softmax_scale %g", m->softmax_scale);
    if (m->nseq) {
        int64_t sum = 0;
        for (size_t i = 0; i < m->nseq; i++) {
            FUZZ_CHECK(m->seqlens[i] >= 1, "seqlens[%zu] = %lld", i, (long long)m->seqlens[i]);
            sum += m->seqlens[i];
        }
        FUZZ_CHECK(sum == (int64_t)m->n, "seqlens sum to %lld, N = %zu", (long long)sum, m->n);
    }
    /* the layers, as the commands read them (a run needing more than 64 MiB
     * is refused by the commands' memory check on a small machine anyway) */
    double bytes = (double)(m->hq + 2 * m->hkv) * (double)m->n * (double)m->d * 4.0;
    if (bytes <= 64.0 * 1048576.0) {
        size_t nq = m->hq * m->n * m->d, nk = m->hkv * m->n * m->d;
        float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
        if (!q || !k || !v)
            abort();
        for (size_t l = 0; l < m->nlayers && l < 64; l++) {
            rc = qattn_act_read_layer(&af, l, q, k, v, &e);
            if (rc) {
                fuzz_check_error(rc, &e, input);
                FUZZ_CHECK(!strncmp(e.msg, input, strlen(input)), "the message does not name the file: %s", e.msg);
            }
        }
        free(q);
        free(k);
        free(v);
    }
    qattn_act_close(&af);
    return 0;
}
