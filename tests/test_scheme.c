/* Schemes: every preset parses and prints back to itself; overrides;
 * every kind of bad input names the offending word. */
#include "check.h"
#include "qattn/scheme.h"

static void bad(const char *spec, const char *word)
{
    qattn_scheme s;
    qattn_err err = {{0}};
    int rc = qattn_scheme_parse(spec, &s, &err);
    CHECK(rc == QATTN_ERR_ARG, "'%s' should fail", spec);
    CHECK_STR_CONTAINS(err.msg, word);
}

int main(void)
{
    const char *required[] = {"fp16", "bf16", "sage1-b", "sage1-vb", "sage2-8b", "sage2-8b-sm90", "sage2-4b",
                              "fa3-fp8", "ck-i8fp8bf16", "ck-i4fp8bf16", "ck-fp8bf16"};
    for (size_t i = 0; i < sizeof required / sizeof *required; i++)
        CHECK(qattn_scheme_preset_find(required[i]) != NULL, "preset %s missing", required[i]);
    for (size_t i = 0; i < qattn_scheme_preset_count(); i++) {
        qattn_scheme s, s2;
        qattn_err err;
        char buf[512], buf2[512];
        const char *spec = qattn_scheme_preset_spec(i);
        CHECK(qattn_scheme_parse(spec, &s, &err) == 0, "%s: %s", spec, err.msg);
        CHECK(!strcmp(qattn_scheme_format(&s, buf, sizeof buf), spec), "preset printed as '%s'", buf);
        CHECK(qattn_scheme_parse(qattn_scheme_preset_name(i), &s2, &err) == 0, "by name");
        CHECK(!strcmp(qattn_scheme_format(&s2, buf2, sizeof buf2), buf), "by name = by spec");
    }
    qattn_scheme s;
    qattn_err err;
    char buf[512];
    /* the DESIGN example, read field by field */
    CHECK(qattn_scheme_parse("q=int8@thread:32/8/1 k=int8@thread:64/8/2 p=e4m3@static v=e4m3@channel smooth=k "
                             "acc=fp22+fp32:64 out=bf16",
                             &s, &err) == 0,
          "%s", err.msg);
    CHECK(s.q.fmt == QATTN_FMT_INT8 && s.q.group.tok == QATTN_TOK_THREAD && s.q.group.b == 32 && s.q.group.s == 8 &&
              s.q.group.w == 1,
          "q operand");
    CHECK(s.p == QATTN_FMT_E4M3 && s.p_static && s.v.group.tok == QATTN_TOK_CHANNEL, "p and v");
    CHECK(s.smooth == QATTN_SMOOTH_K && s.acc == QATTN_ACC_FP22 && s.acc_chunk == 64 && s.kblock == 64 &&
              s.out == QATTN_FMT_BF16,
          "smooth, acc, kblock, out");
    /* overrides after a preset */
    CHECK(qattn_scheme_parse("sage2-8b acc=fp22 smooth=none", &s, &err) == 0, "%s", err.msg);
    CHECK(s.acc == QATTN_ACC_FP22 && s.acc_chunk == 0 && s.smooth == 0 && s.q.fmt == QATTN_FMT_INT8,
          "override keeps the rest");
    /* normalization: smooth order, defaults filled in */
    CHECK(qattn_scheme_parse("smooth=v+k+q q=int4@token,ch:32", &s, &err) == 0, "%s", err.msg);
    qattn_scheme_format(&s, buf, sizeof buf);
    CHECK(!strcmp(buf, "q=int4@token,ch:32 k=fp32 p=fp32 v=fp32 smooth=q+k+v acc=fp32 kblock=64 out=fp32"), "got %s",
          buf);
    CHECK(qattn_scheme_qblock(&s) == 128, "token groups smooth Q in blocks of 128");
    CHECK(qattn_scheme_parse("sage2-4b", &s, &err) == 0 && qattn_scheme_qblock(&s) == 32, "Q block = warp tile");
    CHECK(qattn_scheme_parse("sage2-4b qblock=64", &s, &err) == 0 && qattn_scheme_qblock(&s) == 64, "qblock=");
    qattn_scheme_format(&s, buf, sizeof buf);
    CHECK_STR_CONTAINS(buf, "qblock=64");
    /* rope: the head's last channels in bf16 (DeepSeek-V4); written only when set */
    CHECK(qattn_scheme_parse("q=e4m3@token,ch:64,e8m0 k=e4m3@token,ch:64,e8m0 rope=64", &s, &err) == 0 && s.rope == 64,
          "rope=64: %s", err.msg);
    qattn_scheme_format(&s, buf, sizeof buf);
    CHECK(!strcmp(buf, "q=e4m3@token,ch:64,e8m0 k=e4m3@token,ch:64,e8m0 p=fp32 v=fp32 smooth=none acc=fp32 "
                       "kblock=64 rope=64 out=fp32"),
          "got %s", buf);
    /* qk=fp22: the fp8 tensor core's Q.K per channel group; written only when set */
    CHECK(qattn_scheme_parse("q=e4m3@token,ch:64,e8m0 k=e4m3@token,ch:64,e8m0 qk=fp22 rope=64", &s, &err) == 0 &&
              s.qk_fp22 == 1,
          "qk=fp22: %s", err.msg);
    qattn_scheme_format(&s, buf, sizeof buf);
    CHECK(!strcmp(buf, "q=e4m3@token,ch:64,e8m0 k=e4m3@token,ch:64,e8m0 p=fp32 v=fp32 smooth=none acc=fp32 "
                       "kblock=64 qk=fp22 rope=64 out=fp32"),
          "got %s", buf);
    CHECK(qattn_scheme_parse("fa3-fp8 qk=exact", &s, &err) == 0 && s.qk_fp22 == 0, "qk=exact");
    qattn_scheme_format(&s, buf, sizeof buf);
    CHECK(strstr(buf, "qk=") == NULL, "qk=exact is not written: %s", buf);
    CHECK(qattn_scheme_parse("sage2-8b rope=0", &s, &err) == 0 && s.rope == 0, "rope=0");
    qattn_scheme_format(&s, buf, sizeof buf);
    CHECK(strstr(buf, "rope") == NULL, "rope=0 is not written: %s", buf);
    CHECK(qattn_scheme_parse("p=e5m2@static acc=fp16+fp32:128 kblock=128", &s, &err) == 0, "%s", err.msg);
    CHECK(s.p == QATTN_FMT_E5M2 && s.acc == QATTN_ACC_FP16 && s.acc_chunk == 128, "fp16 two-level");

    bad("", "empty");
    bad("sage3", "sage3");
    bad("x=1", "'x'");
    bad("q=int9@block:64", "int9");
    bad("q=int8", "needs a scale group");
    bad("q=fp16@block:64", "takes no");
    bad("q=int8@block:0", "block:0");
    bad("k=int8@thread:64/8", "thread:64/8");
    bad("p=int8", "int8@static");
    bad("p=e4m3@dynamic", "dynamic");
    bad("p=int4@static", "int4");
    bad("v=e8m0@channel", "e8m0");
    bad("smooth=q+q", "twice");
    bad("smooth=w", "'w'");
    bad("smooth=k+", "empty");
    bad("acc=fp64", "fp64");
    bad("acc=fp22+fp16:64", "fp16:64");
    bad("acc=fp22+fp32:0", "fp32:0");
    bad("acc=fp32+fp32:64", "needs no");
    bad("kblock=0", "kblock=0");
    bad("kblock=abc", "abc");
    bad("out=e4m3", "e4m3");
    bad("q=", "missing value");
    bad("acc=fp22 sage2-8b", "first word");
    /* a key twice: the last one used to win silently; a preset's keys may
     * still be overridden, once */
    bad("q=int8@token q=int4@token", "key 'q' is given twice");
    bad("sage2-8b acc=fp22 smooth=none acc=fp32", "key 'acc' is given twice");
    bad("kblock=64 kblock=64", "key 'kblock'");
    CHECK(qattn_scheme_parse("sage2-8b acc=fp22 q=int4@token", &s, &err) == 0, "overrides once: %s", err.msg);
    /* one length limit, QATTN_SCHEME_LEN_MAX, for every caller */
    {
        char longs[QATTN_SCHEME_LEN_MAX + 2];
        memset(longs, ' ', sizeof longs);
        memcpy(longs, "sage2-8b", 8);
        memcpy(longs + QATTN_SCHEME_LEN_MAX - 8, "acc=fp22", 8);
        longs[QATTN_SCHEME_LEN_MAX] = '\0';
        CHECK(qattn_scheme_parse(longs, &s, &err) == 0, "%d characters pass: %s", QATTN_SCHEME_LEN_MAX, err.msg);
        longs[QATTN_SCHEME_LEN_MAX - 8] = ' ';
        memcpy(longs + QATTN_SCHEME_LEN_MAX - 7, "acc=fp22", 8);
        longs[QATTN_SCHEME_LEN_MAX + 1] = '\0';
        bad(longs, "at most 255");
    }
    /* sizes: at most QATTN_SCHEME_SIZE_MAX (a per-thread group of S / W
     * scales per block used to allocate 1e9 scales for a 64-token file) */
    bad("q=int8@thread:999999999/999999999/1", "larger than 65536");
    bad("q=int8@thread:131072/8/1", "larger than 65536");
    bad("k=int8@block:65537", "larger than 65536");
    bad("k=int8@warp:65537", "larger than 65536");
    bad("q=int8@token,ch:65537", "larger than 65536");
    bad("kblock=65537", "1 to 65536");
    bad("qblock=65537", "1 to 65536");
    bad("rope=-1", "rope=-1: '-1' is not an integer from 0 to 65536");
    bad("rope=64 rope=32", "key 'rope' is given twice");
    bad("qk=fp16", "qk=fp16: unknown Q.K sum 'fp16' (exact, fp22)");
    bad("qk=fp22 qk=exact", "key 'qk' is given twice");
    bad("acc=fp22+fp32:65537", "1 to 65536");
    CHECK(qattn_scheme_parse("q=int8@thread:65536/65536/1 k=int8@block:65536,ch:65536 kblock=65536 qblock=65536 "
                             "acc=fp22+fp32:65536",
                             &s, &err) == 0,
          "sizes of 65536 pass: %s", err.msg);
    /* one operand, as a KV cache format is given */
    {
        qattn_operand op;
        qattn_err e;
        CHECK(qattn_operand_parse("k", "int8@block:32,ch:1", &op, &e) == 0 && op.fmt == QATTN_FMT_INT8 &&
                  op.group.tok == QATTN_TOK_BLOCK && op.group.b == 32 && op.group.ch == 1,
              "int8@block:32,ch:1");
        CHECK(qattn_operand_parse("v", "bf16", &op, &e) == 0 && op.fmt == QATTN_FMT_BF16, "bf16");
        CHECK(qattn_operand_parse("--caches", "int9", &op, &e) == QATTN_ERR_ARG, "int9 refused");
        CHECK_STR_CONTAINS(e.msg, "--caches=int9: unknown format 'int9'");
        CHECK(qattn_operand_parse("k", "int8", &op, &e) == QATTN_ERR_ARG, "int8 without a group refused");
        CHECK_STR_CONTAINS(e.msg, "needs a scale group");
        CHECK(qattn_operand_parse("k", "bf16@token", &op, &e) == QATTN_ERR_ARG, "bf16 with a group refused");
    }
    return check_done();
}
