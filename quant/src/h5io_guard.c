/* The isolated check of an activation file (qattn/h5io.h, docs/DESIGN.md
 * "Activation files (HDF5)").
 *
 * libhdf5 (1.10.8 in Debian 12) trusts a file's metadata: one edited size
 * of a global-heap object makes it read out of bounds (SIGSEGV in H5HG_read)
 * or loop forever (H5C_protect). qattn cannot fix the library, so it never
 * lets the library parse a file's metadata in its own process first: a
 * forked child runs the whole validation, under an address-space limit
 * (RLIMIT_AS) and a time limit, and sends back its result through a pipe.
 * The caller opens the file only when the child succeeded; a child that
 * crashed or ran out of time is a corrupt file, one line naming it. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "h5io_priv.h"

static qattn_act_check_hooks hooks;

void qattn_act_set_check_hooks(const qattn_act_check_hooks *h)
{
    if (h)
        hooks = *h;
    else
        memset(&hooks, 0, sizeof hooks);
}

/* env var name as a number in (0, max], or def when unset; -1 when bad */
static double env_limit(const char *name, double def, double max)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    return *end || errno || !(v > 0 && v <= max) ? -1 : v;
}

int qattn_act_check_limits(double *seconds, double *mb, qattn_err *err)
{
    *seconds = env_limit("QATTN_H5_CHECK_SECONDS", QATTN_H5_CHECK_SECONDS, 86400);
    if (*seconds < 0)
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "QATTN_H5_CHECK_SECONDS must be a number of seconds > 0 and at "
                             "most 86400, got '%s'", getenv("QATTN_H5_CHECK_SECONDS"));
    *mb = env_limit("QATTN_H5_CHECK_MB", QATTN_H5_CHECK_MB, 1 << 30);
    if (*mb < 0)
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "QATTN_H5_CHECK_MB must be a number of MiB > 0, got '%s'",
                             getenv("QATTN_H5_CHECK_MB"));
    return 0;
}

/* the address space this process holds now, in bytes (0 if unknown) */
static double vm_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0;
    if (f) {
        if (fscanf(f, "%llu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    return (double)pages * (double)sysconf(_SC_PAGE_SIZE);
}

typedef struct check_msg {
    int32_t code;
    char msg[sizeof(((qattn_err *)0)->msg)];
} check_msg;

static void write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* the child: never returns */
static void child_run(int fd, const char *path, double seconds, double mb,
                      int (*check)(const char *, qattn_err *))
{
    /* the caller's handlers are not ours to run (they would remove its
     * temporary files); a signal it ignores (nohup) stays ignored */
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGALRM, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN &&
            sigs[i] != SIGALRM)
            continue;
        signal(sigs[i], SIG_DFL);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* nothing of a crash reaches the terminal or the disk */
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, STDOUT_FILENO);
        dup2(devnull, STDERR_FILENO);
        if (devnull > STDERR_FILENO)
            close(devnull);
    }
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
    double as = vm_bytes() + mb * 1048576.0;
    if (as < 9e18) {
        rl.rlim_cur = rl.rlim_max = (rlim_t)as;
        setrlimit(RLIMIT_AS, &rl);
    }
    /* a backstop should the parent die: it kills the child at the limit */
    alarm((unsigned)ceil(seconds) + 1);
    if (hooks.child_start)
        hooks.child_start();
    check_msg m;
    memset(&m, 0, sizeof m);
    qattn_err e = {""};
    m.code = check(path, &e);
    memcpy(m.msg, e.msg, sizeof m.msg);
    m.msg[sizeof m.msg - 1] = '\0';
    write_all(fd, &m, sizeof m);
    if (hooks.child_end)
        hooks.child_end();
    _exit(0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int qattn_h5_isolate(const char *path, int (*check)(const char *, qattn_err *), qattn_err *err)
{
    double seconds, mb;
    int rc = qattn_act_check_limits(&seconds, &mb, err);
    if (rc)
        return rc;
    int fds[2];
    if (pipe(fds) != 0)
        return qattn_err_set(err, QATTN_ERR_NOMEM, "%s: cannot check the file: pipe: %s", path,
                             strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return qattn_err_set(err, QATTN_ERR_NOMEM, "%s: cannot check the file: fork: %s", path,
                             strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        child_run(fds[1], path, seconds, mb, check);
    }
    close(fds[1]);
    check_msg m;
    size_t got = 0;
    int timed_out = 0;
    double end = now_s() + seconds;
    for (;;) {
        double left = end - now_s();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd p = {fds[0], POLLIN, 0};
        int pr = poll(&p, 1, (int)ceil(left * 1000));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0)
            continue; /* the loop sees the time is up */
        if (pr < 0)
            break;
        /* the record, then EOF: the child exited or died */
        char extra;
        ssize_t r = got < sizeof m ? read(fds[0], (char *)&m + got, sizeof m - got)
                                   : read(fds[0], &extra, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (got < sizeof m)
            got += (size_t)r;
    }
    close(fds[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int status = 0;
    pid_t w;
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    /* waitpid fails only where SIGCHLD is ignored: the record decides */
    int exited_ok = w < 0 ? got == sizeof m : WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (timed_out)
        return qattn_err_set(err, QATTN_ERR_IO,
                             "%s: corrupt HDF5 file: libhdf5 was still reading its metadata "
                             "after %g s (QATTN_H5_CHECK_SECONDS sets the limit)", path,
                             seconds);
    if (got == sizeof m && exited_ok) {
        if (m.code == 0)
            return 0;
        m.msg[sizeof m.msg - 1] = '\0';
        return qattn_err_set(err, m.code, "%s", m.msg);
    }
    if (w >= 0 && WIFSIGNALED(status))
        return qattn_err_set(err, QATTN_ERR_IO,
                             "%s: corrupt HDF5 file: libhdf5 crashed reading its metadata "
                             "(signal %d, %s)", path, WTERMSIG(status),
                             strsignal(WTERMSIG(status)));
    return qattn_err_set(err, QATTN_ERR_IO,
                         "%s: corrupt HDF5 file: the check of its metadata ended with exit "
                         "status %d", path, w >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}
