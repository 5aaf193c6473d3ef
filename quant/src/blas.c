#include <pthread.h>

#include "blas.h"

void openblas_set_num_threads(int num_threads);

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_once(void)
{
    openblas_set_num_threads(1);
}

void qattn_blas_init(void)
{
    pthread_once(&once, init_once);
}
