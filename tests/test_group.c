/* Scale groups (docs/DESIGN.md "Scale groups"): parse/print of every spec, the (token, channel) ->
 * group map by hand, tails, and group sizes as a property. */
#include <stdlib.h>

#include "check.h"
#include "qattn/group.h"

static void roundtrip(const char *spec, const char *want)
{
    qattn_group g;
    qattn_err err;
    char buf[64];
    int rc = qattn_group_parse(spec, &g, &err);
    CHECK(rc == 0, "parse '%s': %s", spec, rc ? err.msg : "");
    if (!rc)
        CHECK(!strcmp(qattn_group_format(&g, buf, sizeof buf), want), "'%s' printed as '%s', want '%s'", spec, buf,
              want);
}

static void bad(const char *spec, const char *word)
{
    qattn_group g;
    qattn_err err = {{0}};
    int rc = qattn_group_parse(spec, &g, &err);
    CHECK(rc == QATTN_ERR_ARG, "'%s' should fail", spec);
    CHECK_STR_CONTAINS(err.msg, word);
}

int main(void)
{
    /* every spec of the DESIGN table */
    roundtrip("tensor", "tensor");
    roundtrip("token", "token");
    roundtrip("block:128", "block:128");
    roundtrip("warp:32", "warp:32");
    roundtrip("thread:32/8/1", "thread:32/8/1");
    roundtrip("thread:64/8/2", "thread:64/8/2");
    roundtrip("token,ch:64", "token,ch:64");
    roundtrip("channel", "channel");
    roundtrip("block:32,e8m0", "block:32,e8m0");
    roundtrip("token,e8m0,ch:32", "token,ch:32,e8m0");

    bad("", "empty");
    bad("blk:64", "blk");
    bad("block", "block");
    bad("block:0", "block:0");
    bad("block:-4", "block:-4");
    bad("thread:32/8", "thread:32/8");
    bad("thread:32/6/1", "S must divide B");
    bad("thread:32/8/3", "W must divide S");
    bad("token,ch:0", "ch:0");
    bad("token,foo", "foo");
    bad("channel,ch:4", "ch:4");
    bad("token,ch:8,ch:8", "twice");
    bad("token,", "empty word");

    qattn_group g;
    qattn_err err;
    /* Q per-thread on mma.m16n8k32 with a 32-token warp tile: lane group g
     * holds rows g, g+8, g+16, g+24 -> tokens 0, 8, 16, 24 share group 0 */
    qattn_group_parse("thread:32/8/1", &g, &err);
    CHECK(qattn_group_tok_index(&g, 0) == 0 && qattn_group_tok_index(&g, 8) == 0 &&
              qattn_group_tok_index(&g, 16) == 0 && qattn_group_tok_index(&g, 24) == 0,
          "tokens 0,8,16,24 in group 0");
    CHECK(qattn_group_tok_index(&g, 1) == 1 && qattn_group_tok_index(&g, 9) == 1, "token 1 and 9 in group 1");
    CHECK(qattn_group_tok_index(&g, 7) == 7, "token 7 in group 7");
    CHECK(qattn_group_tok_index(&g, 32) == 8, "next block starts at group 8, got %zu", qattn_group_tok_index(&g, 32));
    CHECK(qattn_group_ntok(&g, 64) == 16, "two blocks x 8 groups");
    CHECK(qattn_group_ntok(&g, 40) == 16, "a partial block still has 8 groups");
    /* K per-thread: columns 2i, 2i+1 of every 8-column tile of 64 tokens */
    qattn_group_parse("thread:64/8/2", &g, &err);
    CHECK(qattn_group_tok_index(&g, 0) == 0 && qattn_group_tok_index(&g, 1) == 0 &&
              qattn_group_tok_index(&g, 8) == 0 && qattn_group_tok_index(&g, 57) == 0,
          "tokens 0,1,8,57 share group 0");
    CHECK(qattn_group_tok_index(&g, 2) == 1 && qattn_group_tok_index(&g, 7) == 3, "2 -> 1, 7 -> 3");
    CHECK(qattn_group_tok_index(&g, 64) == 4, "block 1 starts at group 4");
    /* blocks with a tail: N = 100, block:64 -> 2 groups */
    qattn_group_parse("block:64", &g, &err);
    CHECK(qattn_group_ntok(&g, 100) == 2 && qattn_group_tok_index(&g, 99) == 1, "tail block");
    qattn_group_parse("token,ch:64", &g, &err);
    CHECK(qattn_group_nch(&g, 128) == 2 && qattn_group_nch(&g, 100) == 2, "channel groups with a tail");
    CHECK(qattn_group_index(&g, 10, 128, 3, 70) == 3 * 2 + 1, "(3, 70) -> 7, got %zu",
          qattn_group_index(&g, 10, 128, 3, 70));
    CHECK(qattn_group_count(&g, 10, 128) == 20, "10 tokens x 2 channel groups");
    qattn_group_parse("channel", &g, &err);
    CHECK(qattn_group_count(&g, 50, 16) == 16 && qattn_group_index(&g, 50, 16, 49, 5) == 5, "per-channel");
    CHECK(qattn_group_token_uniform(&g), "channel is token-uniform");
    qattn_group_parse("tensor", &g, &err);
    CHECK(qattn_group_count(&g, 50, 16) == 1 && qattn_group_token_uniform(&g), "tensor: one group");
    qattn_group_parse("token", &g, &err);
    CHECK(!qattn_group_token_uniform(&g) && qattn_group_count(&g, 7, 3) == 7, "token");

    /* property: in full blocks each thread group has B/S*W tokens, and the
     * group index is always below the count */
    srand(7);
    for (int it = 0; it < 200; it++) {
        int bs[] = {16, 32, 64, 128}, ss[] = {4, 8, 16};
        int b = bs[rand() % 4], s = ss[rand() % 3], w = 1 << (rand() % 3);
        if (b % s || s % w)
            continue;
        char spec[48];
        snprintf(spec, sizeof spec, "thread:%d/%d/%d", b, s, w);
        CHECK(qattn_group_parse(spec, &g, &err) == 0, "%s", spec);
        size_t n = (size_t)(b * (1 + rand() % 4)), ng = qattn_group_ntok(&g, n);
        int *cnt = calloc(ng, sizeof *cnt), ok = 1;
        for (size_t t = 0; t < n; t++) {
            size_t gi = qattn_group_tok_index(&g, t);
            if (gi >= ng)
                ok = 0;
            else
                cnt[gi]++;
        }
        for (size_t i = 0; i < ng && ok; i++)
            ok = cnt[i] == b / s * w;
        CHECK(ok, "%s over %zu tokens: groups of %d tokens", spec, n, b / s * w);
        free(cnt);
    }
    return check_done();
}
