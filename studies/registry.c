/* Looking up the study records (registry.h) and building their grids. */
#include <stdio.h>
#include <string.h>

#include "registry.h"

const qattn_study_rec *qattn_studies_find(const char *name)
{
    for (size_t i = 0; qattn_studies[i]; i++)
        if (!strcmp(qattn_studies[i]->name, name))
            return qattn_studies[i];
    return NULL;
}

const char *qattn_studies_header(const qattn_study_rec *r, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int f = 0; f < r->nf; f++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", f ? "," : "", r->factor[f].name);
    return buf;
}

void qattn_studies_grid(const qattn_study_rec *r, qattn_study *st)
{
    memset(st, 0, sizeof *st);
    st->name = r->name;
    st->about = r->about;
    qattn_studies_header(r, st->factor_header, sizeof st->factor_header);
    if (r->cells) {
        r->cells(st);
        return;
    }
    if (!r->cell || r->nf == 0)
        return;
    /* every point of the levels, the last factor fastest */
    size_t idx[QATTN_STUDY_MAXF] = {0};
    for (;;) {
        const char *v[QATTN_STUDY_MAXF];
        for (int f = 0; f < r->nf; f++)
            v[f] = r->factor[f].levels[idx[f]];
        r->cell(st, v);
        int f = r->nf - 1;
        while (f >= 0 && !r->factor[f].levels[++idx[f]])
            idx[f--] = 0;
        if (f < 0)
            return;
    }
}

const char *qattn_studies_pub(const char *name)
{
    for (size_t i = 0; qattn_studies[i]; i++)
        for (const qattn_pub *p = qattn_studies[i]->pubs; p && p->name; p++)
            if (!strcmp(p->name, name))
                return p->tex;
    return NULL;
}
