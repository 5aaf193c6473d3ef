#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "qattn/h5io.h"
#include "select.h"

int qattn_cli_int(const char *cmd, const char *what, const char *s, long long min, long long max,
                  long long *out)
{
    /* digits only (a sign for negative ranges): strtoll alone would take
     * leading blanks and a '+' */
    const char *p = s[0] == '-' && min < 0 ? s + 1 : s;
    char *end = NULL;
    errno = 0;
    long long v = p[0] >= '0' && p[0] <= '9' ? strtoll(s, &end, 10) : 0;
    if (end && !*end && !errno && v >= min && v <= max) {
        *out = v;
        return 0;
    }
    if (min == 1)
        fprintf(stderr, "qattn %s: %s must be a positive integer up to %lld, got '%s'\n", cmd, what, max, s);
    else if (min == 0)
        fprintf(stderr, "qattn %s: %s must be a non-negative integer up to %lld, got '%s'\n", cmd, what, max, s);
    else
        fprintf(stderr, "qattn %s: %s must be an integer from %lld to %lld, got '%s'\n", cmd, what, min, max, s);
    return QATTN_EXIT_INPUT;
}

static int parse_u64(const char *cmd, const char *what, const char *s, unsigned long long *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &end, 10) : 0;
    if (end && !*end && !errno) {
        *out = v;
        return 0;
    }
    fprintf(stderr, "qattn %s: %s must be a non-negative integer below 2^64, got '%s'\n", cmd, what, s);
    return QATTN_EXIT_INPUT;
}

/* stores value s of option o; 0 or QATTN_EXIT_INPUT after the message */
static int store(const char *cmd, const qattn_opt *o, const char *s)
{
    char what[96];
    snprintf(what, sizeof what, "--%s", o->name);
    switch (o->kind) {
    case QATTN_OPT_FLAG: *(int *)o->dst = 1; return 0;
    case QATTN_OPT_STR: *(const char **)o->dst = s; return 0;
    case QATTN_OPT_LIST:
        if (*o->count >= (size_t)o->max) {
            fprintf(stderr, "qattn %s: at most %lld %s options\n", cmd, o->max, what);
            return QATTN_EXIT_INPUT;
        }
        ((const char **)o->dst)[(*o->count)++] = s;
        return 0;
    case QATTN_OPT_INT: return qattn_cli_int(cmd, what, s, o->min, o->max, (long long *)o->dst);
    case QATTN_OPT_U64: return parse_u64(cmd, what, s, (unsigned long long *)o->dst);
    }
    return QATTN_EXIT_INPUT;
}

#define QATTN_CLI_MAX_OPTS 32

int qattn_cli_parse(int argc, char **argv, const qattn_opt *opts, int *first_arg)
{
    const char *cmd = argv[0];
    struct option lo[QATTN_CLI_MAX_OPTS + 2];
    size_t n = 0;
    for (; opts[n].name; n++) {
        if (n == QATTN_CLI_MAX_OPTS) {
            fprintf(stderr, "qattn %s: internal: more than %d options\n", cmd, QATTN_CLI_MAX_OPTS);
            return QATTN_EXIT_FAIL;
        }
        /* values from 256 on: clear of 'h' and of getopt's '?' and ':' */
        lo[n] = (struct option){opts[n].name, opts[n].kind == QATTN_OPT_FLAG ? no_argument : required_argument,
                                NULL, 256 + (int)n};
    }
    lo[n] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n + 1] = (struct option){NULL, 0, NULL, 0};
    opterr = 0;
    optind = 1;
    int c;
    /* the leading ':' tells a missing value from an unknown option */
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        if (c == 'h')
            return QATTN_CLI_HELP;
        if (c == ':') {
            fprintf(stderr, "qattn %s: missing value for '%s' (qattn %s --help)\n", cmd, argv[optind - 1], cmd);
            return QATTN_EXIT_INPUT;
        }
        if (c < 256) {
            fprintf(stderr, "qattn %s: unknown option '%s' (qattn %s --help)\n", cmd, argv[optind - 1], cmd);
            return QATTN_EXIT_INPUT;
        }
        int rc = store(cmd, &opts[c - 256], optarg);
        if (rc)
            return rc;
    }
    if (first_arg) {
        *first_arg = optind;
    } else if (optind < argc) {
        fprintf(stderr, "qattn %s: unexpected argument '%s' (qattn %s --help)\n", cmd, argv[optind], cmd);
        return QATTN_EXIT_INPUT;
    }
    return 0;
}

long long qattn_cli_threads_max(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 64 ? 4 * (long long)n : 256;
}

void qattn_cli_threads_apply(long long threads)
{
    long long max = qattn_cli_threads_max();
    if (threads > 0)
        omp_set_num_threads((int)(threads < max ? threads : max));
    else if (omp_get_max_threads() > max)
        omp_set_num_threads((int)max);
}

double qattn_cli_memory(void)
{
    const char *env = getenv("QATTN_MEMORY_MB");
    if (env && *env) {
        char *end;
        double mb = strtod(env, &end);
        if (!*end && mb > 0)
            return mb * 1048576.0;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 1e300;
}

double qattn_cli_head_bytes(size_t n, size_t d)
{
    /* reference: Q, K, V in float64 and 64 rows of logits; emulation: six
     * float32 copies of [n, d] and 64 rows of float32 + float64 logits */
    return (double)n * (double)d * (24.0 + 24.0) + (double)n * 64.0 * (8.0 + 12.0);
}

int qattn_cli_memory_check(const char *cmd, const char *path, double need)
{
    double have = qattn_cli_memory();
    if (need <= have)
        return 0;
    const char *env = getenv("QATTN_MEMORY_MB");
    fprintf(stderr, "qattn %s: %s: the run would hold %.3g GB (activations, reference and working buffers), more "
                    "than the %.3g GB of memory %s\n",
            cmd, path, need / 1e9, have / 1e9, env && *env ? "QATTN_MEMORY_MB allows" : "this machine has");
    return QATTN_EXIT_INPUT;
}

int qattn_cli_open_selected(const char *cmd, const char *path, const char *layers, const char *heads,
                            qattn_act_file *f, size_t *lsel, size_t *nl, size_t *hsel, size_t *nh)
{
    qattn_err err;
    if (qattn_act_open(path, f, &err)) {
        fprintf(stderr, "qattn %s: %s\n", cmd, err.msg);
        return QATTN_EXIT_INPUT;
    }
    const qattn_act_meta *mt = &f->meta;
    if (((mt->nlayers > 1024 || mt->hq > 1024) &&
         qattn_err_set(&err, QATTN_ERR_RANGE, "more than 1024 layers or heads")) ||
        qattn_select_parse(layers, mt->nlayers, lsel, nl, &err) || qattn_select_parse(heads, mt->hq, hsel, nh, &err)) {
        fprintf(stderr, "qattn %s: %s: %s\n", cmd, path, err.msg);
        qattn_act_close(f);
        return QATTN_EXIT_INPUT;
    }
    return 0;
}

int qattn_cli_distinct_model(const char *cmd, const char *const *data, char (*models)[256], size_t fi)
{
    for (size_t j = 0; j < fi; j++)
        if (!strcmp(models[j], models[fi])) {
            fprintf(stderr, "qattn %s: %s and %s are both model '%s' (one --data file per model)\n", cmd, data[j],
                    data[fi], models[fi]);
            return QATTN_EXIT_INPUT;
        }
    return 0;
}

void qattn_cli_files_usage(FILE *f)
{
    double secs = QATTN_H5_CHECK_SECONDS, mb = QATTN_H5_CHECK_MB;
    qattn_err err;
    if (qattn_act_check_limits(&secs, &mb, &err))
        secs = QATTN_H5_CHECK_SECONDS, mb = QATTN_H5_CHECK_MB;
    fprintf(f,
            "\nFiles are checked before any work: every element the q/k/v shapes declare must be\n"
            "stored in the file (no unwritten chunks, no external or virtual data), and a run\n"
            "that would hold more than this machine's %.3g GB of memory (or QATTN_MEMORY_MB MiB\n"
            "when set) is refused (exit 2). libhdf5 first reads each file's metadata in a child\n"
            "process: a file that crashes it, or keeps it busy longer than %g s or beyond %g MiB\n"
            "(QATTN_H5_CHECK_SECONDS, QATTN_H5_CHECK_MB), is refused as corrupt (exit 2).\n",
            qattn_cli_memory() / 1e9, secs, mb);
}

void qattn_cli_run_opts_usage(FILE *f)
{
    fprintf(f,
            "  --layers SEL      layers: all (default), 3, 0,2 or 4-7\n"
            "  --heads SEL       query heads, same syntax\n"
            "  --mask M          none, causal, causal-br, window:L,R (default: the file's causal attribute)\n"
            "  --threads N       worker threads (default: all cores), at most %lld here\n"
            "                    (4 per online CPU, at least 256)\n"
            "  --boot N          bootstrap resamples for the intervals (default 2000)\n"
            "  --seed S          bootstrap seed (default 1)\n",
            qattn_cli_threads_max());
}

void qattn_cli_csv_quote(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

#define QATTN_TMP_MAX 16
static char tmp_paths[QATTN_TMP_MAX][1100];
static volatile sig_atomic_t tmp_used[QATTN_TMP_MAX];

static void on_signal(int sig)
{
    for (int i = 0; i < QATTN_TMP_MAX; i++)
        if (tmp_used[i])
            unlink(tmp_paths[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

void qattn_cli_signals_init(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        /* a signal ignored when the program started stays ignored: a
         * nohup'ed run must live through SIGHUP */
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

/* 1 when name is ".BASE.tmp.PID" of a process that no longer exists */
static int stale_tmp(const char *name, const char *base)
{
    size_t bl = strlen(base);
    if (name[0] != '.' || strncmp(name + 1, base, bl) || strncmp(name + 1 + bl, ".tmp.", 5))
        return 0;
    const char *p = name + 1 + bl + 5;
    char *end;
    errno = 0;
    long pid = p[0] >= '1' && p[0] <= '9' ? strtol(p, &end, 10) : 0;
    if (pid <= 0 || *end || errno || pid > INT_MAX)
        return 0;
    /* ESRCH only: EPERM is someone else's live process */
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

void qattn_cli_clean_stale(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[1100];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path + (slash == path)) : 1, slash ? path : ".");
    DIR *d = base[0] ? opendir(dir) : NULL;
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!stale_tmp(e->d_name, base))
            continue;
        char p[2200];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
            unlink(p);
    }
    closedir(d);
}

void qattn_cli_tmp_remember(const char *path)
{
    qattn_cli_signals_init();
    for (int i = 0; i < QATTN_TMP_MAX; i++)
        if (!tmp_used[i]) {
            snprintf(tmp_paths[i], sizeof tmp_paths[i], "%s", path);
            tmp_used[i] = 1;
            return;
        }
}

void qattn_cli_tmp_forget(const char *path)
{
    for (int i = 0; i < QATTN_TMP_MAX; i++)
        if (tmp_used[i] && !strcmp(tmp_paths[i], path)) {
            tmp_used[i] = 0;
            return;
        }
}

int qattn_out_open(qattn_out *o, const char *final_path)
{
    memset(o, 0, sizeof *o);
    snprintf(o->final_path, sizeof o->final_path, "%s", final_path);
    const char *slash = strrchr(final_path, '/');
    int dirlen = slash ? (int)(slash - final_path + 1) : 0;
    snprintf(o->tmp_path, sizeof o->tmp_path, "%.*s.%s.tmp.%ld", dirlen, final_path,
             slash ? slash + 1 : final_path, (long)getpid());
    qattn_cli_tmp_remember(o->tmp_path);
    o->f = fopen(o->tmp_path, "w");
    if (!o->f) {
        int e = errno;
        qattn_cli_tmp_forget(o->tmp_path);
        errno = e;
        return -1;
    }
    return 0;
}

int qattn_out_open_all(qattn_out *o, const char *dir, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (qattn_out_open(&o[i], path)) {
            while (i-- > 0)
                qattn_out_abort(&o[i]);
            return -1;
        }
    }
    return 0;
}

/* flush, sync and close o's temporary file: 0, or -1 with errno */
static int out_finish(qattn_out *o)
{
    if (!o->f) {
        errno = EBADF;
        return -1;
    }
    /* fflush first: after a failed write it tries again and sets errno
     * (ferror alone keeps no errno) */
    errno = 0;
    int e = fflush(o->f) != 0 || ferror(o->f) || fsync(fileno(o->f)) != 0 ? (errno ? errno : EIO) : 0;
    errno = 0;
    if (fclose(o->f) != 0 && !e)
        e = errno ? errno : EIO;
    o->f = NULL;
    errno = e;
    return e ? -1 : 0;
}

int qattn_out_commit_all(qattn_out *o, size_t n)
{
    int e = 0;
    for (size_t i = 0; i < n && !e; i++)
        if (out_finish(&o[i]))
            e = errno;
    for (size_t i = 0; i < n && !e; i++) {
        if (rename(o[i].tmp_path, o[i].final_path)) {
            e = errno;
        } else {
            qattn_cli_tmp_forget(o[i].tmp_path);
            o[i].tmp_path[0] = '\0';
        }
    }
    for (size_t i = 0; i < n; i++)
        qattn_out_abort(&o[i]); /* what is left: temporary files only */
    errno = e;
    return e ? -1 : 0;
}

int qattn_out_commit(qattn_out *o) { return qattn_out_commit_all(o, 1); }

int qattn_cli_write_outputs(const char *cmd, const char *dir, const char *const *names, size_t n,
                            int (*write)(FILE *const *files, void *ctx), void *ctx)
{
    qattn_out out[8];
    FILE *files[8];
    if (n > 8) {
        fprintf(stderr, "qattn %s: more than 8 outputs\n", cmd);
        return QATTN_EXIT_FAIL;
    }
    if (qattn_cli_mkdirs(dir)) {
        fprintf(stderr, "qattn %s: cannot create %s: %s\n", cmd, dir, strerror(errno));
        return QATTN_EXIT_FAIL;
    }
    if (qattn_out_open_all(out, dir, names, n)) {
        fprintf(stderr, "qattn %s: cannot write into %s: %s\n", cmd, dir, strerror(errno));
        return QATTN_EXIT_FAIL;
    }
    for (size_t i = 0; i < n; i++)
        files[i] = out[i].f;
    int oom = write(files, ctx);
    if (oom)
        for (size_t i = 0; i < n; i++)
            qattn_out_abort(&out[i]);
    if (oom || qattn_out_commit_all(out, n)) {
        fprintf(stderr, "qattn %s: cannot write into %s: %s\n", cmd, dir, oom ? "out of memory" : strerror(errno));
        return QATTN_EXIT_FAIL;
    }
    return QATTN_EXIT_OK;
}

void qattn_out_abort(qattn_out *o)
{
    int e = errno; /* callers report the error that made them abort */
    if (o->f) {
        fclose(o->f);
        o->f = NULL;
    }
    if (o->tmp_path[0]) {
        unlink(o->tmp_path);
        qattn_cli_tmp_forget(o->tmp_path);
        o->tmp_path[0] = '\0';
    }
    errno = e;
}

int qattn_cli_check_out_file(const char *cmd, const char *opt, const char *path)
{
    struct stat st;
    if (!path[0]) {
        fprintf(stderr, "qattn %s: %s is empty: it must name a file\n", cmd, opt);
        return QATTN_EXIT_INPUT;
    }
    qattn_cli_clean_stale(path);
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "qattn %s: %s exists and is %s, not a file it could replace\n", cmd, path,
                S_ISDIR(st.st_mode) ? "a directory" : "something else");
        return QATTN_EXIT_INPUT;
    }
    return 0;
}

int qattn_cli_check_out_dir(const char *cmd, const char *dir, const char *const *files, size_t n)
{
    struct stat st;
    if (!dir[0]) {
        fprintf(stderr, "qattn %s: --out is empty: it must name a directory\n", cmd);
        return QATTN_EXIT_INPUT;
    }
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "qattn %s: cannot create directory %s: it exists and is not a directory\n", cmd, dir);
        return QATTN_EXIT_INPUT;
    }
    if (stat(dir, &st) != 0) {
        /* it will be made at the end: its nearest existing ancestor must be
         * a directory that can take it */
        char anc[1024];
        int e = 0;
        if (strlen(dir) >= sizeof anc)
            e = ENAMETOOLONG;
        snprintf(anc, sizeof anc, "%s", dir);
        while (!e) {
            char *slash = strrchr(anc, '/');
            while (slash && slash > anc && slash[-1] == '/')
                slash--;
            if (!slash)
                snprintf(anc, sizeof anc, ".");
            else
                slash[slash == anc] = '\0'; /* keep "/" itself */
            if (stat(anc, &st) == 0) {
                e = !S_ISDIR(st.st_mode) ? ENOTDIR : access(anc, W_OK | X_OK) ? errno : 0;
                break;
            }
            if (!strcmp(anc, ".") || !strcmp(anc, "/"))
                break;
        }
        if (e) {
            fprintf(stderr, "qattn %s: cannot create directory %s: %s\n", cmd, dir, strerror(e));
            return QATTN_EXIT_INPUT;
        }
    }
    for (size_t i = 0; i < n; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        int rc = qattn_cli_check_out_file(cmd, "--out", path);
        if (rc)
            return rc;
    }
    return 0;
}

int qattn_cli_mkdirs(const char *dir)
{
    char buf[1024];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            buf[i] = c;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

void qattn_cli_progress(const char *label, size_t done, size_t total)
{
    static int mode = -1;
    if (mode < 0) {
        const char *env = getenv("QATTN_PROGRESS");
        mode = env ? atoi(env) != 0 : isatty(STDERR_FILENO);
    }
    if (!mode)
        return;
    fprintf(stderr, "\r%s %zu/%zu", label, done, total);
    if (done >= total)
        fputc('\n', stderr);
    fflush(stderr);
}
