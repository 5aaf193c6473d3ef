/* Private: OpenBLAS entry points used by the reference and the emulation. */
#ifndef QATTN_BLAS_H
#define QATTN_BLAS_H

#include <cblas.h>

/* Make OpenBLAS single-threaded once: callers parallelize over heads. */
void qattn_blas_init(void);

#endif
