/* Helpers shared by the subcommands: option parsing, CSV quoting, atomic
 * output files and cleanup of temporary files when the program is
 * interrupted. */
#ifndef QATTN_CLI_H
#define QATTN_CLI_H

#include <stddef.h>
#include <stdio.h>

/* What a long option takes and where its value goes. */
typedef enum qattn_opt_kind {
    QATTN_OPT_FLAG, /* no value; dst: int *, set to 1 */
    QATTN_OPT_STR,  /* dst: const char **, the last value given */
    QATTN_OPT_LIST, /* repeatable; dst: const char *[max], count: size_t * */
    QATTN_OPT_INT,  /* dst: long long *, an integer in [min, max] */
    QATTN_OPT_U64,  /* dst: unsigned long long *, any decimal 64-bit value */
} qattn_opt_kind;

typedef struct qattn_opt {
    const char *name;   /* the long name without "--"; NULL ends a table */
    qattn_opt_kind kind;
    void *dst;          /* see qattn_opt_kind */
    size_t *count;      /* LIST: values stored so far */
    long long min, max; /* INT: the range; LIST: max is dst's capacity */
} qattn_opt;

#define QATTN_CLI_HELP (-1)

/* Parses the options of command argv[0] (argv[1..argc-1]) against opts (a
 * table ended by a NULL name); --help and -h are built in. Returns 0 to run
 * the command, QATTN_CLI_HELP when help was asked for (print the usage on
 * stdout, exit 0), or QATTN_EXIT_INPUT after one line on stderr ("qattn
 * CMD: ..."): an unknown option, a missing or bad value, too many values
 * of a list, or a positional argument when first_arg is NULL; else
 * *first_arg is the index of the first positional argument (getopt
 * permutes them to the end). */
int qattn_cli_parse(int argc, char **argv, const qattn_opt *opts, int *first_arg);

/* One integer value of `what` (an option name, e.g. "--threads") of
 * command cmd in [min, max]: 0, or QATTN_EXIT_INPUT after a one-line
 * message naming what, the range and the value. */
int qattn_cli_int(const char *cmd, const char *what, const char *s, long long min, long long max,
                  long long *out);

/* The most worker threads --threads takes: 4 per online CPU, at least
 * 256. More threads than CPUs only add overhead, and libgomp itself fails
 * on huge counts (thread creation errors, a stack overflow at 99999). */
long long qattn_cli_threads_max(void);
/* Use `threads` OpenMP threads (0: the default, capped at the same
 * maximum, since OMP_NUM_THREADS may ask for any number). */
void qattn_cli_threads_apply(long long threads);

/* The memory a run may plan to hold, in bytes: this machine's physical
 * memory, or QATTN_MEMORY_MB MiB when that is set (a shared machine, or a
 * test). */
double qattn_cli_memory(void);
/* Bytes one worker thread holds while it runs the float64 reference or the
 * emulation of one head of n tokens x d channels (its copies of Q, K, V,
 * the dequantized operands, a 64-row tile of logits; a lower bound). */
double qattn_cli_head_bytes(size_t n, size_t d);
/* 0 when `need` bytes (what command cmd will hold for file `path`) fit in
 * qattn_cli_memory(); else QATTN_EXIT_INPUT after one line naming the
 * file, what it needs and what there is: a file declaring more than the
 * machine can hold is bad input, checked before anything is allocated. */
int qattn_cli_memory_check(const char *cmd, const char *path, double need);

struct qattn_act_file;
/* Opens activation file `path` for study cmd and checks what every study
 * checks before any work: at most 1024 layers and heads, and the --layers /
 * --heads selections (NULL: all) fit it. On success *f is open, the
 * selections are in lsel[1024] / hsel[1024] (*nl, *nh) and the return is 0;
 * else one line on stderr, *f closed, and the exit status. */
int qattn_cli_open_selected(const char *cmd, const char *path, const char *layers, const char *heads,
                            struct qattn_act_file *f, size_t *lsel, size_t *nl, size_t *hsel, size_t *nh);
/* 0 when the model name of file fi (models[fi]) differs from those of files
 * 0 .. fi - 1; else QATTN_EXIT_INPUT after one line naming both files */
int qattn_cli_distinct_model(const char *cmd, const char *const *data, char (*models)[256], size_t fi);

/* the --help paragraph on what an activation file must hold and the
 * memory a run may take (the commands that read layers print it) */
void qattn_cli_files_usage(FILE *f);

/* The options qattn accuracy and the studies share: which layers and
 * heads, the mask, worker threads and the bootstrap. */
typedef struct qattn_run_opts {
    const char *layers, *heads; /* selections (select.h), default "all" */
    const char *mask;           /* NULL: the file's causal attribute */
    long long threads;          /* 0: all cores */
    long long boot, seed;       /* bootstrap resamples and seed */
} qattn_run_opts;

#define QATTN_RUN_OPTS_INIT {"all", "all", NULL, 0, 2000, 1}
/* the option table entries of r (a qattn_run_opts *) */
#define QATTN_RUN_OPTS(r)                                             \
    {"layers", QATTN_OPT_STR, &(r)->layers, NULL, 0, 0},              \
    {"heads", QATTN_OPT_STR, &(r)->heads, NULL, 0, 0},                \
    {"mask", QATTN_OPT_STR, &(r)->mask, NULL, 0, 0},                  \
    {"threads", QATTN_OPT_INT, &(r)->threads, NULL, 1, qattn_cli_threads_max()}, \
    {"boot", QATTN_OPT_INT, &(r)->boot, NULL, 0, 100000000},          \
    {"seed", QATTN_OPT_INT, &(r)->seed, NULL, 0, 100000000}
/* their lines of --help */
void qattn_cli_run_opts_usage(FILE *f);

/* s as one CSV field: in double quotes, a quote inside doubled */
void qattn_cli_csv_quote(FILE *f, const char *s);

/* Remember a temporary path: it is unlinked if SIGINT/SIGTERM/SIGHUP arrive
 * before qattn_cli_tmp_forget(path). At most 16 at a time. */
void qattn_cli_tmp_remember(const char *path);
void qattn_cli_tmp_forget(const char *path);
/* installs the signal handlers (idempotent); a signal the program was
 * started with ignored (nohup) stays ignored */
void qattn_cli_signals_init(void);
/* removes the temporary files ".BASE.tmp.PID" beside path (BASE its last
 * component) whose process is gone (kill(PID, 0) fails with ESRCH): what a
 * SIGKILL left; those of live processes stay */
void qattn_cli_clean_stale(const char *path);

/* Atomic text output: open DIR/.NAME.tmp.PID for writing; close commits by
 * fflush + fsync + rename to final; abort unlinks. */
typedef struct qattn_out {
    FILE *f;
    char final_path[1024];
    char tmp_path[1100];
} qattn_out;

int qattn_out_open(qattn_out *o, const char *final_path);  /* 0 or -1 (errno) */
int qattn_out_commit(qattn_out *o);                         /* 0 or -1 (errno) */
/* opens DIR/names[i] for i < n; on failure none stays open: -1 (errno) */
int qattn_out_open_all(qattn_out *o, const char *dir, const char *const *names, size_t n);
/* Commit n outputs together: all are flushed and synced before any is
 * renamed, so that a write error (a full disk) leaves every earlier file
 * as it was; on failure the temporary files are removed, never a final
 * one. 0 or -1 with errno. */
int qattn_out_commit_all(qattn_out *o, size_t n);
/* removes the temporary file; keeps errno */
void qattn_out_abort(qattn_out *o);

/* A command's outputs in one step: creates dir, opens dir/names[i] (i < n,
 * at most 8), calls write(files, ctx) (nonzero: out of memory) and commits
 * them together (qattn_out_commit_all), or leaves none. Errors get one line
 * "qattn CMD: ..." on stderr. QATTN_EXIT_OK or QATTN_EXIT_FAIL. */
int qattn_cli_write_outputs(const char *cmd, const char *dir, const char *const *names, size_t n,
                            int (*write)(FILE *const *files, void *ctx), void *ctx);

/* Before any work, so that a run never ends in a rename it cannot do:
 * output `path` (given by option opt) is not empty and, if it exists, a
 * regular file (stale temporary files beside it are removed:
 * qattn_cli_clean_stale); the n `files` of a directory likewise, and the directory
 * a directory, or one that can be made. 0, or QATTN_EXIT_INPUT after one
 * line on stderr. */
int qattn_cli_check_out_file(const char *cmd, const char *opt, const char *path);
int qattn_cli_check_out_dir(const char *cmd, const char *dir, const char *const *files, size_t n);

/* mkdir -p; 0 or -1 with errno */
int qattn_cli_mkdirs(const char *dir);

/* progress on stderr, only when stderr is a terminal or QATTN_PROGRESS=1:
 * "\r<label> done/total" ; a newline when done == total */
void qattn_cli_progress(const char *label, size_t done, size_t total);

#endif
