/* Helpers shared by the subcommands: atomic output files and cleanup of
 * temporary files when the program is interrupted. */
#ifndef QATTN_CLI_H
#define QATTN_CLI_H

#include <stdio.h>

/* Remember a temporary path: it is unlinked if SIGINT/SIGTERM/SIGHUP arrive
 * before qattn_cli_tmp_forget(path). At most 16 at a time. */
void qattn_cli_tmp_remember(const char *path);
void qattn_cli_tmp_forget(const char *path);
/* installs the signal handlers (idempotent) */
void qattn_cli_signals_init(void);

/* Atomic text output: open DIR/.NAME.tmp.PID for writing; close commits by
 * fflush + fsync + rename to final; abort unlinks. */
typedef struct qattn_out {
    FILE *f;
    char final_path[1024];
    char tmp_path[1100];
} qattn_out;

int qattn_out_open(qattn_out *o, const char *final_path);  /* 0 or -1 (errno) */
int qattn_out_commit(qattn_out *o);                         /* 0 or -1 */
void qattn_out_abort(qattn_out *o);

/* mkdir -p; 0 or -1 with errno */
int qattn_cli_mkdirs(const char *dir);

/* progress on stderr, only when stderr is a terminal or QATTN_PROGRESS=1:
 * "\r<label> done/total" ; a newline when done == total */
void qattn_cli_progress(const char *label, size_t done, size_t total);

#endif
