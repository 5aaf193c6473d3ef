/* qattn paper-tables: the anchors table (our paired comparisons next to the
 * published findings, with a generated verdict sentence) and the published
 * values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paper.h"

/* --------------------------------------------- published numbers */

/* \QApub<name> for the published values of every study */
void qattn_paper_def_pubs(qattn_paper *c)
{
    for (size_t i = 0; qattn_studies[i]; i++)
        for (const qattn_pub *p = qattn_studies[i]->pubs; p && p->name; p++) {
            qattn_mname m = qattn_mname_make("QApub");
            qattn_mname_cat(&m, p->name);
            qattn_paper_def(c, m.s, p->tex, 0);
        }
}

/* ------------------------------------------------- anchors table */

static const char *const index_words[] = {"One",   "Two",   "Three", "Four", "Five",
                                          "Six",   "Seven", "Eight", "Nine", "Ten",
                                          "Eleven", "Twelve"};

/* every claim of the studies, in record order; returns their number */
static size_t all_claims(const qattn_claim **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; qattn_studies[i]; i++)
        for (const qattn_claim *cl = qattn_studies[i]->claims; cl && cl->name && n < max; cl++)
            out[n++] = cl;
    return n;
}

/* a claim's published values: its text with each @Name replaced by the
 * value of \QApub<Name> ("??" if no study has it) */
static void published_text(qattn_text *b, const qattn_claim *cl)
{
    for (const char *s = cl->published; *s;) {
        if (*s != '@') {
            size_t n = strcspn(s, "@");
            qattn_text_add(b, s, n);
            s += n;
            continue;
        }
        char name[128];
        size_t n = 0;
        for (s++; ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')) && n < sizeof name - 1; s++)
            name[n++] = *s;
        name[n] = '\0';
        const char *v = qattn_studies_pub(name);
        qattn_text_puts(b, v ? v : "??");
    }
}

/* the claim called name, or NULL */
static const qattn_claim *find_claim(const char *name)
{
    for (size_t i = 0; qattn_studies[i]; i++)
        for (const qattn_claim *cl = qattn_studies[i]->claims; cl && cl->name; cl++)
            if (!strcmp(cl->name, name))
                return cl;
    return NULL;
}

/* What the published finding predicts for one comparison of claim name */
static qattn_expect expectation(const char *name, const char *a, const char *b)
{
    qattn_expect e = {QATTN_EXPECT_NONE, 0};
    const qattn_claim *cl = find_claim(name);
    if (cl && cl->expect)
        return cl->expect(a, b);
    if (cl)
        e.kind = QATTN_EXPECT_BETTER; /* a is the side the claim names first */
    return e;
}

enum { V_A, V_B, V_INC };
enum { W_AGREES, W_DISAGREES, W_INCONCLUSIVE, W_NOANCHOR };
static const char *const word_text[] = {"agrees", "disagrees", "inconclusive", "no anchor"};
static const char *const word_cap[] = {"Agrees", "Disagrees", "Inconclusive",
                                       "No published anchor"};

static int agreement(qattn_expect e, int verdict)
{
    int winner = verdict == V_A ? 0 : verdict == V_B ? 1 : -1;
    switch (e.kind) {
    case QATTN_EXPECT_BETTER:
        return winner < 0 ? W_INCONCLUSIVE : winner == e.side ? W_AGREES : W_DISAGREES;
    case QATTN_EXPECT_NO_LOSS:
        return winner >= 0 && winner != e.side ? W_DISAGREES : W_AGREES;
    default:
        return W_NOANCHOR;
    }
}

/* The generated sentence for one comparison (or several metrics of it with
 * the same outcome), after its word ("Agrees: "); a and b already escaped. */
static void sentence(qattn_text *o, qattn_expect e, int verdict, int word, const char *a, const char *b,
                     const char *metric)
{
    const char *side = e.side ? b : a, *other = e.side ? a : b;
    int winner = verdict == V_A ? 0 : verdict == V_B ? 1 : -1;
    switch (word) {
    case W_AGREES:
        if (e.kind == QATTN_EXPECT_BETTER)
            qattn_text_printf(o, "%s is better than %s on %s, as published.", side, other, metric);
        else if (winner < 0)
            qattn_text_printf(o,
                              "no measurable difference between %s and %s on %s (the interval contains "
                              "zero), as published.",
                              side, other, metric);
        else
            qattn_text_printf(o,
                              "%s is not worse than %s on %s (it is measurably better); the published "
                              "finding is that nothing is lost.",
                              side, other, metric);
        break;
    case W_DISAGREES:
        if (e.kind == QATTN_EXPECT_BETTER)
            qattn_text_printf(o, "%s is better than %s on %s, the opposite of the published finding.",
                              other, side, metric);
        else
            qattn_text_printf(o,
                              "%s is measurably better than %s on %s, where the published finding is "
                              "that %s loses nothing.",
                              other, side, metric, side);
        break;
    case W_INCONCLUSIVE:
        qattn_text_printf(o,
                          "the 95\\%% interval of the difference contains zero, so our data neither "
                          "confirm nor contradict that %s is better than %s on %s.",
                          side, other, metric);
        break;
    default:
        qattn_text_printf(o, "verdict on %s: %s.", metric,
                          verdict == V_A ? "a better" : verdict == V_B ? "b better" : "inconclusive");
    }
}

static void claim_macro(qattn_mname *m, const char *prefix, const char *claim)
{
    *m = qattn_mname_make(prefix);
    qattn_mname_word(m, claim);
}

static const char *const cmp_fields[] = {"A",  "B",  "Metric",  "MeanA", "MeanB",   "Diff",
                                         "Lo", "Hi", "Ci",      "N",     "Verdict", "Word",
                                         "Sentence"};
#define NCMPF (sizeof cmp_fields / sizeof cmp_fields[0])

enum { K_CLAIM, K_STUDY, K_MODEL, K_A, K_B, K_METRIC, K_N, K_MA, K_MB, K_D, K_LO, K_HI,
       K_VERDICT, K_NREQ };

/* one comparison row, formatted */
typedef struct cmp_row {
    size_t r;
    int verdict, word, is_cos;
    qattn_expect e;
    qattn_num d, lo, hi, ci, ma, mb;
    char metric[64]; /* TeX */
} cmp_row;

static void format_row(const qattn_csv *t, const int *col, const double *vals,
                       const int *verdicts, size_t r, const char *claim, cmp_row *o)
{
    const double *v = &vals[r * K_NREQ];
    const char *metric = qattn_csv_str(t, r, col[K_METRIC]);
    o->r = r;
    o->verdict = verdicts[r];
    o->is_cos = !strcmp(metric, "cos");
    double scale = o->is_cos ? 100.0 : 1.0;
    int dd = qattn_num_diff_decimals(scale * v[K_D], scale * v[K_LO], scale * v[K_HI]);
    o->d = qattn_num_signed(scale * v[K_D], dd);
    o->lo = qattn_num_signed(scale * v[K_LO], dd);
    o->hi = qattn_num_signed(scale * v[K_HI], dd);
    o->ci = qattn_num_ci(o->lo.s, o->hi.s);
    o->ma = o->is_cos ? qattn_num_pct1(v[K_MA]) : qattn_num_g3(v[K_MA]);
    o->mb = o->is_cos ? qattn_num_pct1(v[K_MB]) : qattn_num_g3(v[K_MB]);
    if (o->is_cos)
        snprintf(o->metric, sizeof o->metric, "cos");
    else if (!strcmp(metric, "rel_l1"))
        snprintf(o->metric, sizeof o->metric, "relative L1");
    else {
        qattn_text m = {0};
        qattn_text_tex(&m, metric);
        snprintf(o->metric, sizeof o->metric, "%.60s", qattn_text_str(&m));
        qattn_text_free(&m);
    }
    o->e = expectation(claim, qattn_csv_str(t, r, col[K_A]), qattn_csv_str(t, r, col[K_B]));
    o->word = agreement(o->e, o->verdict);
}

int qattn_paper_anchors_table(qattn_paper *c, qattn_text *tab)
{
    qattn_paper_input *in = c->cmp;
    qattn_text tmp = {0}, sa = {0}, sbb = {0}, mets = {0};
    int e = 0;
    size_t counts[4] = {0}, rows_total = 0;
    qattn_text_puts(tab, "% generated by qattn paper-tables");
    if (in->present)
        qattn_text_printf(tab, " from %s", in->path);
    static const char *const head =
        "\\toprule\nmodel & ours: $a$ vs $b$ & means of $a$ and $b$; $a-b$ [95\\% interval] "
        "& assessment \\\\\n\\midrule\n";
    qattn_text_puts(tab, "\n{\\footnotesize\\setlength{\\LTcapwidth}{\\linewidth}\n"
                         "\\begin{longtable}{p{2.1cm}p{3.3cm}p{4.5cm}p{4.7cm}}\n"
                         "\\caption{Published findings next to ours. For each finding: the published "
                         "direction and values; then, per model, our paired comparisons on the same "
                         "heads: the means of $a$ and $b$, the mean of $a-b$ over heads with its 95\\% "
                         "paired-bootstrap interval (cos in percentage points), and whether the verdict "
                         "of the interval agrees with the published direction.}\\label{tab:anchors}\\\\\n");
    qattn_text_printf(tab, "%s\\endfirsthead\n%s\\endhead\n\\bottomrule\n\\endfoot\n", head, head);
    const qattn_csv *t = in->present ? &in->t : NULL;
    static const char *const req[] = {"claim",  "study",  "model",  "a",     "b",
                                      "metric", "n",      "mean_a", "mean_b", "mean_diff",
                                      "ci_lo",  "ci_hi",  "verdict"};
    int col[K_NREQ];
    double *vals = NULL;
    int *verdicts = NULL;
    unsigned char *used = NULL;
    cmp_row *grp = NULL;
    if (t) {
        if ((e = qattn_paper_need_cols(c, t, req, K_NREQ, col)))
            goto done;
        vals = calloc(t->nrows * K_NREQ + 1, sizeof *vals);
        verdicts = calloc(t->nrows + 1, sizeof *verdicts);
        used = calloc(t->nrows + 1, 1);
        grp = calloc(t->nrows + 1, sizeof *grp);
        if (!vals || !verdicts || !used || !grp) {
            e = qattn_err_set(&c->err, QATTN_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (size_t r = 0; r < t->nrows; r++) {
            long n;
            if ((e = qattn_csv_long(t, r, col[K_N], &n, &c->err)))
                goto done;
            vals[r * K_NREQ + K_N] = (double)n;
            for (int k = K_MA; k <= K_HI; k++)
                if ((e = qattn_csv_num(t, r, col[k], &vals[r * K_NREQ + k], &c->err)))
                    goto done;
            const char *v = qattn_csv_str(t, r, col[K_VERDICT]);
            if (!strcmp(v, "a better"))
                verdicts[r] = V_A;
            else if (!strcmp(v, "b better"))
                verdicts[r] = V_B;
            else if (!strcmp(v, "inconclusive"))
                verdicts[r] = V_INC;
            else {
                e = qattn_err_set(&c->err, QATTN_ERR_SCHEMA,
                                  "%s:%zu: column 'verdict': '%s' is not 'a better', 'b better' "
                                  "or 'inconclusive'",
                                  t->path, t->line[r], v);
                goto done;
            }
        }
    }

    /* the studies' claims in record order, then any others ("no published anchor") */
    const qattn_claim *claims[64];
    size_t nclaims = all_claims(claims, 64);
    for (size_t ci = 0; ci <= nclaims; ci++) {
        const char *claim = ci < nclaims ? claims[ci]->name : NULL;
        size_t nrows = 0;
        if (t)
            for (size_t r = 0; r < t->nrows; r++)
                if (claim ? !strcmp(qattn_csv_str(t, r, col[K_CLAIM]), claim) : !used[r])
                    nrows++;
        if (!claim && !nrows)
            break;
        if (claim) {
            qattn_text_printf(tab, "\\multicolumn{4}{p{15.6cm}}{\\textbf{%s.} Published: %s. ",
                              claims[ci]->title, claims[ci]->direction);
            published_text(tab, claims[ci]);
            qattn_text_puts(tab, "}\\\\\n");
        } else {
            qattn_text_puts(tab, "\\multicolumn{4}{p{15.6cm}}{\\textbf{Other comparisons} (no published "
                                 "anchor).}\\\\\n");
        }
        if (!nrows)
            qattn_text_printf(tab, "\\multicolumn{4}{p{15.6cm}}{\\emph{%s}}\\\\\n",
                              t ? "Not tested: no row for this claim in \\texttt{comparisons.csv}."
                        : "Not run: \\texttt{comparisons.csv} was not found.");
        size_t cw[4] = {0};
        /* per model (table order), rows grouped by (a, b): one table row with
         * every metric of that pair */
        for (size_t mi = 0; t && mi < c->nmodels; mi++) {
            char tag[16];
            qattn_mname_model(tag, sizeof tag, mi);
            size_t idx = 0;
            for (size_t r = 0; r < t->nrows; r++) {
                const char *rc = qattn_csv_str(t, r, col[K_CLAIM]);
                if (used[r] || (claim && strcmp(rc, claim)) ||
                    strcmp(qattn_csv_str(t, r, col[K_MODEL]), c->models[mi]))
                    continue;
                const char *a = qattn_csv_str(t, r, col[K_A]), *b = qattn_csv_str(t, r, col[K_B]);
                size_t ng = 0;
                for (size_t r2 = r; r2 < t->nrows; r2++)
                    if (!used[r2] && !strcmp(qattn_csv_str(t, r2, col[K_CLAIM]), rc) &&
                        !strcmp(qattn_csv_str(t, r2, col[K_MODEL]), c->models[mi]) &&
                        !strcmp(qattn_csv_str(t, r2, col[K_A]), a) &&
                        !strcmp(qattn_csv_str(t, r2, col[K_B]), b)) {
                        used[r2] = 1;
                        format_row(t, col, vals, verdicts, r2, rc, &grp[ng++]);
                    }
                qattn_text_clear(&sa);
                qattn_text_clear(&sbb);
                qattn_text_puts(&sa, "\\texttt{");
                qattn_text_tex(&sa, a);
                qattn_text_puts(&sa, "}");
                qattn_text_puts(&sbb, "\\texttt{");
                qattn_text_tex(&sbb, b);
                qattn_text_puts(&sbb, "}");

                /* model, pair */
                qattn_text_puts(tab, "\\raggedright\\texttt{");
                qattn_text_tex_path(tab, c->models[mi]);
                qattn_text_puts(tab, "}");
                if (!strcmp(qattn_csv_str(t, r, col[K_STUDY]), "kbias"))
                    qattn_text_puts(tab, " (augmented real data)");
                qattn_text_printf(tab, " & \\raggedright %s vs %s ($n=%.0f$) & \\raggedright ", qattn_text_str(&sa),
                                  qattn_text_str(&sbb), vals[r * K_NREQ + K_N]);
                /* numbers, one line per metric */
                for (size_t g = 0; g < ng; g++) {
                    const cmp_row *w = &grp[g];
                    qattn_text_printf(tab, "%s%s: %s%s vs %s%s; %s %s%s", g ? "\\newline " : "", w->metric,
                                      w->ma.s, w->is_cos ? "\\%" : "", w->mb.s, w->is_cos ? "\\%" : "",
                                      w->d.s, w->ci.s, w->is_cos ? " pts" : "");
                }
                /* assessment: one sentence when every metric has the same outcome */
                int same = 1;
                for (size_t g = 1; g < ng; g++)
                    same &= grp[g].word == grp[0].word && grp[g].verdict == grp[0].verdict;
                qattn_text_puts(tab, " & \\raggedright ");
                if (same) {
                    qattn_text_clear(&mets);
                    for (size_t g = 0; g < ng; g++)
                        qattn_text_printf(&mets, "%s%s", g == 0 ? "" : g + 1 == ng ? " and " : ", ",
                                          grp[g].metric);
                    qattn_text_clear(&tmp);
                    sentence(&tmp, grp[0].e, grp[0].verdict, grp[0].word, qattn_text_str(&sa), qattn_text_str(&sbb),
                             qattn_text_str(&mets));
                    qattn_text_printf(tab, "\\textbf{%s:} %s", word_cap[grp[0].word], qattn_text_str(&tmp));
                } else {
                    for (size_t g = 0; g < ng; g++) {
                        qattn_text_clear(&tmp);
                        sentence(&tmp, grp[g].e, grp[g].verdict, grp[g].word, qattn_text_str(&sa),
                                 qattn_text_str(&sbb), grp[g].metric);
                        qattn_text_printf(tab, "%s\\textbf{%s:} %s", g ? " " : "", word_cap[grp[g].word],
                                          qattn_text_str(&tmp));
                    }
                }
                qattn_text_puts(tab, "\\tabularnewline\n");

                /* counts and macros, one set per metric row */
                for (size_t g = 0; g < ng; g++) {
                    const cmp_row *w = &grp[g];
                    cw[w->word]++;
                    counts[w->word]++;
                    rows_total++;
                    if (!claim || idx >= sizeof index_words / sizeof index_words[0]) {
                        idx++;
                        continue;
                    }
                    qattn_mname base;
                    claim_macro(&base, "QAcmp", claim);
                    qattn_mname_cat(&base, tag);
                    qattn_mname_cat(&base, index_words[idx++]);
                    char nbuf[32];
                    snprintf(nbuf, sizeof nbuf, "%.0f", vals[w->r * K_NREQ + K_N]);
                    qattn_text_clear(&tmp);
                    sentence(&tmp, w->e, w->verdict, w->word, qattn_text_str(&sa), qattn_text_str(&sbb), w->metric);
                    qattn_text_clear(&mets);
                    qattn_text_printf(&mets, "%s: %s", word_cap[w->word], qattn_text_str(&tmp));
                    const char *vals_f[NCMPF] = {qattn_text_str(&sa), qattn_text_str(&sbb), w->metric, w->ma.s,
                                                 w->mb.s,     w->d.s,      w->lo.s,   w->hi.s,
                                                 w->ci.s,     nbuf,
                                                 qattn_csv_str(t, w->r, col[K_VERDICT]),
                                                 word_text[w->word], qattn_text_str(&mets)};
                    for (size_t k = 0; k < NCMPF; k++)
                        qattn_paper_def_metric(c, &base, cmp_fields[k], vals_f[k], k == 0);
                }
            }
        }
        if (claim) {
            /* per-claim summary over all its rows */
            qattn_mname w, s2;
            claim_macro(&w, "QAclaim", claim);
            s2 = w;
            qattn_mname_cat(&w, "Word");
            qattn_mname_cat(&s2, "Summary");
            size_t tot = cw[0] + cw[1] + cw[2];
            qattn_text_clear(&tmp);
            if (!t) {
                qattn_paper_def(c, w.s, QATTN_PAPER_NA, 0);
                qattn_paper_def(c, s2.s, QATTN_PAPER_NA, 0);
            } else if (!tot) {
                qattn_paper_def(c, w.s, "not tested", 0);
                qattn_paper_def(c, s2.s, "not tested", 0);
            } else {
                int all = -1;
                for (int k = 0; k < 3; k++)
                    if (cw[k] == tot)
                        all = k;
                qattn_paper_def(c, w.s, all >= 0 ? word_text[all] : "mixed", 0);
                const char *sep = "";
                for (int k = 0; k < 3; k++)
                    if (cw[k]) {
                        qattn_text_printf(&tmp, "%s%s in %zu of %zu comparison%s", sep, word_text[k],
                                          cw[k], tot, tot == 1 ? "" : "s");
                        sep = ", ";
                    }
                qattn_paper_def(c, s2.s, qattn_text_str(&tmp), 0);
            }
            /* n/a for the first two rows of the first models */
            for (size_t mi = 0; mi < c->ntags; mi++) {
                char tag[16];
                qattn_mname_model(tag, sizeof tag, mi);
                for (int i = 0; i < 2; i++) {
                    qattn_mname base;
                    claim_macro(&base, "QAcmp", claim);
                    qattn_mname_cat(&base, tag);
                    qattn_mname_cat(&base, index_words[i]);
                    for (size_t k = 0; k < NCMPF; k++)
                        qattn_paper_def_metric(c, &base, cmp_fields[k], QATTN_PAPER_NA, 0);
                }
            }
        }
        qattn_text_puts(tab, "\\midrule\n");
    }
    qattn_text_puts(tab, "\\end{longtable}\n}\n");
    char buf[32];
    static const char *const cnames[] = {"QAanchorsAgree", "QAanchorsDisagree",
                                         "QAanchorsInconclusive", "QAanchorsNoAnchor"};
    for (int k = 0; k < 4; k++) {
        snprintf(buf, sizeof buf, "%zu", counts[k]);
        qattn_paper_def(c, cnames[k], t ? buf : QATTN_PAPER_NA, 0);
    }
    snprintf(buf, sizeof buf, "%zu", rows_total);
    qattn_paper_def(c, "QAanchorsRows", t ? buf : QATTN_PAPER_NA, 0);
    if (tmp.oom || sa.oom || sbb.oom || mets.oom)
        e = qattn_err_set(&c->err, QATTN_ERR_NOMEM, "out of memory");
done:
    free(vals);
    free(verdicts);
    free(used);
    free(grp);
    qattn_text_free(&tmp);
    qattn_text_free(&sa);
    qattn_text_free(&sbb);
    qattn_text_free(&mets);
    return e;
}

