/* Shared by `qattn gpu-check` and `qattn bench`: the scheme an instance is
 * exercised with, fp16 test inputs, device name and date for the CSVs. Only
 * built with a GPU backend (QATTN_HAVE_GPU). */
#ifndef QATTN_GPU_UTIL_H
#define QATTN_GPU_UTIL_H

#ifdef QATTN_HAVE_GPU
#include <stddef.h>
#include <stdint.h>

#include "qattn_kernels.h"

/* The scheme instance sig is run with: the first preset (qattn schemes
 * order) that the dispatcher gives to sig for a plain problem of its head
 * dim, else one spelled from the signature (Q/K thread:32/8/1 and
 * thread:64/8/2, smooth=k, P/V/accumulator as the instance computes them).
 * spec receives the preset name or the spec string. 0, or -1 when no
 * scheme reaches sig (a registry the dispatcher cannot use: a bug). */
int qattn_gpu_scheme_for(const qattn_kernels_sig *sig, qattn_scheme *s, char *spec, size_t len);

/* x [n] fp16-representable values: normal(0, 0.5 + 0.2 (c mod 7)) plus
 * offs * ((37 c mod 11) - 5) per channel c = i mod d (K's channel offsets);
 * deterministic in *state */
void qattn_gpu_make_input(float *x, size_t n, size_t d, double offs, uint64_t *state);

/* short device name for file paths and the CSV's device column: "h100",
 * "h200", ... from the GPU's name, else the name lower-cased with spaces
 * as '-' */
void qattn_gpu_device_slug(const char *name, char *slug, size_t len);
/* today's date, YYYY-MM-DD (UTC) */
void qattn_gpu_date(char *buf, size_t len);
#endif
#endif
