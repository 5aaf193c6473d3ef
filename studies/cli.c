#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
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

int qattn_out_commit(qattn_out *o)
{
    if (!o->f)
        return -1;
    int bad = ferror(o->f) || fflush(o->f) != 0 || fsync(fileno(o->f)) != 0;
    int e = errno;
    bad |= fclose(o->f) != 0;
    o->f = NULL;
    if (!bad && rename(o->tmp_path, o->final_path) == 0) {
        qattn_cli_tmp_forget(o->tmp_path);
        return 0;
    }
    e = errno ? errno : e;
    unlink(o->tmp_path);
    qattn_cli_tmp_forget(o->tmp_path);
    errno = e;
    return -1;
}

void qattn_out_abort(qattn_out *o)
{
    if (o->f) {
        fclose(o->f);
        o->f = NULL;
    }
    if (o->tmp_path[0]) {
        unlink(o->tmp_path);
        qattn_cli_tmp_forget(o->tmp_path);
    }
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
