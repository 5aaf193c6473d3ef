/* Private: the instance table written by kernels/gen_instances.sh
 * (kernels/generated/registry.c), the dispatcher's environment test and the
 * wgmma instances' tests that dispatch.c and routes.c share. */
#ifndef QATTN_KERNELS_REGISTRY_H
#define QATTN_KERNELS_REGISTRY_H

#include <stddef.h>

#include "qattn_kernels.h"
#include "wgmma_form.h" /* qattn_wg_solo_can */

extern const qattn_kernels_sig qattn_kernels_table[];
extern const size_t qattn_kernels_table_len;

/* why instance g cannot take problem pb (a family's own problem struct) on a device of compute
 * capability cc with the path bits paths, or NULL when it can */
typedef const char *(*qattn_kernels_misfit_fn)(const qattn_kernels_sig *g, const void *pb, int cc, unsigned paths);

/* the instance of family fam on the most preferred path that misfit accepts for pb, or NULL with
 * *why the last reason it gave (none_built when the family has no instance); cc 0: the current
 * device's; paths 0: all */
const qattn_kernels_sig *qattn_kernels_pick(qattn_kernels_family fam, qattn_kernels_misfit_fn misfit, const void *pb,
                                            int cc, unsigned paths, const char *none_built, const char **why);

/* 1 when the environment variable name is set to value (the comparison switches the dispatcher's and
 * the decode plan's fills read) */
int qattn_kernels_env_is(const char *name, const char *value);

/* 1 when g is a wgmma attention instance */
static inline int qattn_registry_wg_attn(const qattn_kernels_sig *g)
{
    return g && g->family == QATTN_KERNELS_FAMILY_ATTN_FWD && g->path == QATTN_KERNELS_PATH_WGMMA;
}

/* 1 when g has both block forms (kernels/wgmma_form.h) */
static inline int qattn_registry_wg_both(const qattn_kernels_sig *g)
{
    return qattn_registry_wg_attn(g) && qattn_wg_solo_can(g->head_dim, g->kblock_max, g->q, g->p, g->acc);
}

#endif
