/* Scale groups: the granularity language of docs/DESIGN.md "Scale groups".
 *
 *   tensor | token | block:B | warp:B | thread:B/S/W | channel
 *   optional suffixes: ,ch:C  (C consecutive channels per group)
 *                      ,e8m0  (power-of-two scales)
 *
 * Within one head of a tensor [N tokens, d channels] the group of element
 * (t, c) is tokgroup(t) * nchgroups + chgroup(c). */
#ifndef QATTN_GROUP_H
#define QATTN_GROUP_H

#include <stddef.h>

#include "qattn/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qattn_tok {
    QATTN_TOK_TENSOR = 0, /* all tokens */
    QATTN_TOK_TOKEN,      /* one token */
    QATTN_TOK_BLOCK,      /* B consecutive tokens */
    QATTN_TOK_WARP,       /* same grouping as BLOCK, named for the warp tile */
    QATTN_TOK_THREAD,     /* block of B, token t -> (t mod S) div W */
    QATTN_TOK_CHANNEL     /* all tokens, one channel (ch forced to 1) */
} qattn_tok;

typedef struct qattn_group {
    qattn_tok tok;
    int b;    /* block size B (BLOCK, WARP, THREAD), else 0 */
    int s;    /* THREAD stride S, else 0 */
    int w;    /* THREAD width W, else 0 */
    int ch;   /* channels per group; 0 = all channels */
    int e8m0; /* 1: scales rounded up to powers of two */
} qattn_group;

/* Parse a spec; on error the message names the offending word. */
int qattn_group_parse(const char *spec, qattn_group *g, qattn_err *err);
/* Canonical text (e.g. "thread:32/8/1", "token,ch:64,e8m0"); returns buf. */
char *qattn_group_format(const qattn_group *g, char *buf, size_t len);

/* token groups in a head of n tokens */
size_t qattn_group_ntok(const qattn_group *g, size_t n);
/* channel groups for d channels */
size_t qattn_group_nch(const qattn_group *g, size_t d);
/* total groups = ntok * nch */
size_t qattn_group_count(const qattn_group *g, size_t n, size_t d);
size_t qattn_group_tok_index(const qattn_group *g, size_t t);
size_t qattn_group_ch_index(const qattn_group *g, size_t c);
/* group of element (token t, channel c) */
size_t qattn_group_index(const qattn_group *g, size_t n, size_t d, size_t t,
                         size_t c);
/* 1 when every token of a head shares one scale along a channel group
 * (tensor, channel, or tensor with ,ch:C): scales then factor out of a sum
 * over tokens, as V's per-channel scale does in P.V. */
int qattn_group_token_uniform(const qattn_group *g);
/* The token block the group tiles by: B for block/warp/thread, 0 otherwise. */
int qattn_group_block(const qattn_group *g);

#ifdef __cplusplus
}
#endif
#endif
