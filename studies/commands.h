/* The qattn program's subcommands: one function each, argv[0] is the
 * subcommand's name. Exit status: 0 success, 2 usage or input error (with a
 * one-line message on stderr and no output file left behind), 1 any other
 * failure. */
#ifndef QATTN_COMMANDS_H
#define QATTN_COMMANDS_H

#define QATTN_EXIT_OK 0
#define QATTN_EXIT_FAIL 1
#define QATTN_EXIT_INPUT 2

int qattn_cmd_schemes(int argc, char **argv);
int qattn_cmd_scheme_check(int argc, char **argv);
int qattn_cmd_synth(int argc, char **argv);
int qattn_cmd_inspect(int argc, char **argv);
int qattn_cmd_accuracy(int argc, char **argv);
int qattn_cmd_bench_cpu(int argc, char **argv);
int qattn_cmd_paper_tables(int argc, char **argv);
int qattn_cmd_outliers(int argc, char **argv);
int qattn_cmd_entropy(int argc, char **argv);
int qattn_cmd_kvcache(int argc, char **argv);
int qattn_cmd_dsv4(int argc, char **argv);
int qattn_cmd_e2e(int argc, char **argv);
int qattn_cmd_compare(int argc, char **argv);
int qattn_cmd_pareto(int argc, char **argv);
int qattn_cmd_studies(int argc, char **argv);
int qattn_cmd_models(int argc, char **argv);
int qattn_cmd_kernels(int argc, char **argv);
int qattn_cmd_gpu_check(int argc, char **argv);
int qattn_cmd_bench(int argc, char **argv);
int qattn_cmd_decode_bench(int argc, char **argv);
int qattn_cmd_sparse_bench(int argc, char **argv);

#endif
