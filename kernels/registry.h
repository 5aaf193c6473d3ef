/* Private: the instance table written by kernels/gen_instances.sh
 * (kernels/generated/registry.c). */
#ifndef QATTN_KERNELS_REGISTRY_H
#define QATTN_KERNELS_REGISTRY_H

#include <stddef.h>

#include "qattn_kernels.h"

extern const qattn_kernels_sig qattn_kernels_table[];
extern const size_t qattn_kernels_table_len;

#endif
