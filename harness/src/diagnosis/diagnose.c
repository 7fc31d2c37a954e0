/* diagnose.c — see diagnose.h. A generic matcher: no bug class is named in this file. */
#include "diagnosis/diagnose.h"

#include <stdio.h>
#include <string.h>

#include "verdict/compare.h"

/* ---- facts ------------------------------------------------------------------------------------------- */

static int reduced(enum mc_dtype d)
{
    return d == MC_DTYPE_F16 || d == MC_DTYPE_BF16;
}

static struct mc_diag_tensor_fact *tensor_fact(struct mc_diag_scenario_fact *s, const char *name)
{
    for (int i = 0; i < s->n_tensors; i++)
        if (strcmp(s->tensors[i].name, name) == 0)
            return &s->tensors[i];
    if (s->n_tensors == MC_DIAG_MAX_TENSORS)
        return NULL;
    struct mc_diag_tensor_fact *t = &s->tensors[s->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->first_fail_token = -1;
    t->first_fail_batch = -1;
    return t;
}

/* The token a scenario's continued forward starts at: its `prefill` where it has one. */
static int64_t split_of(const struct mc_case *c, enum mc_scenario_kind kind)
{
    if (c == NULL)
        return -1;
    for (int i = 0; i < c->n_scenarios; i++) {
        const struct mc_scenario_spec *sp = &c->scenarios[i];
        if (sp->kind != kind)
            continue;
        switch (kind) {
        case MC_SCENARIO_DECODE:
        case MC_SCENARIO_FIRST_TOKEN_CAUSALITY:
        case MC_SCENARIO_SPECULATIVE_VERIFY:
        case MC_SCENARIO_DETERMINISM:
            return sp->prefill;
        default:
            return -1;
        }
    }
    return -1;
}

void mc_diag_facts_build(struct mc_diag_facts *f, const struct mc_case *c, const struct mc_golden *g,
                         const struct mc_check_result *checks, int n, const char *backend)
{
    memset(f, 0, sizeof *f);
    f->family = c ? c->family : MC_FAMILY_MAMBA2;
    for (int k = 0; k < MC_SCENARIO_COUNT; k++)
        f->scen[k].split = split_of(c, (enum mc_scenario_kind)k);
    if (g != NULL && g->mask != NULL)
        for (int64_t b = 0; b < g->batch && b < 64; b++)
            for (int64_t t = 0; t < g->len; t++)
                if (g->mask[b * g->len + t] == 0)
                    f->padded_rows |= 1ull << b;
    for (int i = 0; i < n; i++) {
        const struct mc_check_result *r = &checks[i];
        if (r->backend == NULL || strcmp(r->backend, backend) != 0 || r->scenario < 0 || r->scenario >= MC_SCENARIO_COUNT)
            continue;
        if (r->status == MC_CHECK_UNSUPPORTED || r->status == MC_CHECK_SKIPPED)
            continue;
        f->family = r->family;
        struct mc_diag_scenario_fact *s = &f->scen[r->scenario];
        const int red = reduced(r->dtype);
        const int bad = r->status == MC_CHECK_FAIL || r->status == MC_CHECK_ERROR || r->status == MC_CHECK_NONDETERMINISTIC;
        if (red)
            s->ran_reduced = 1;
        else
            s->ran_full = 1;
        if (bad) {
            f->any_failed = 1;
            if (red)
                s->failed_reduced = 1;
            else
                s->failed_full = 1;
            if (s->first_run[0] == '\0')
                snprintf(s->first_run, sizeof s->first_run, "%s", r->detail);
        }
        s->errored |= r->status == MC_CHECK_ERROR;
        s->nondeterministic |= r->status == MC_CHECK_NONDETERMINISTIC;
        /* The first failing stage of the scenario's first probed failing check (stage probes,
         * docs/scenarios.md §1.3/§3.6): what MC_DC_STAGE conditions read; "" (unknown) without probes. */
        if (r->first_stage.probed && r->first_stage.name[0] && s->first_stage[0] == '\0')
            snprintf(s->first_stage, sizeof s->first_stage, "%s", r->first_stage.name);
        for (int k = 0; k < r->n_tensors; k++) {
            const struct mc_tensor_result *tr = &r->tensors[k];
            struct mc_diag_tensor_fact *t = tensor_fact(s, tr->name);
            if (t == NULL || mc_compare_passed(&tr->stats))
                continue;
            if (red)
                t->fail_reduced = 1;
            else
                t->fail_full = 1;
            const struct mc_compare_stats *st = &tr->stats;
            if (st->first_fail_token >= 0 && (t->first_fail_token < 0 || st->first_fail_token < t->first_fail_token)) {
                t->first_fail_token = st->first_fail_token;
                t->first_fail_batch = st->first_fail_batch;
            }
            t->nonfinite += st->n_nonfinite;
            double nm = mc_compare_nmse(st);
            if (nm == nm && nm > t->nmse)
                t->nmse = nm;
            if (nm != nm || st->n_nonfinite > 0)
                t->nmse = 1e300;
        }
    }
}

/* ---- conditions -------------------------------------------------------------------------------------- */

static int scen_ran(const struct mc_diag_scenario_fact *s)
{
    return s->ran_full || s->ran_reduced;
}

static int scen_failed(const struct mc_diag_scenario_fact *s)
{
    return s->failed_full || s->failed_reduced;
}

static const struct mc_diag_tensor_fact *find_tensor(const struct mc_diag_scenario_fact *s, const char *name)
{
    for (int i = 0; i < s->n_tensors; i++)
        if (strcmp(s->tensors[i].name, name) == 0)
            return &s->tensors[i];
    return NULL;
}

static int tensor_failed(const struct mc_diag_tensor_fact *t)
{
    return t->fail_full || t->fail_reduced;
}

/* One condition on one scenario. */
static enum mc_diag_truth eval_one(const struct mc_diag_cond *c, const struct mc_diag_facts *f, int k)
{
    const struct mc_diag_scenario_fact *s = &f->scen[k];
    if (c->kind == MC_DC_PADDED_GOLDEN)
        return f->padded_rows ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    if (!scen_ran(s))
        return MC_DIAG_UNKNOWN;
    const struct mc_diag_tensor_fact *t = c->tensor ? find_tensor(s, c->tensor) : NULL;
    if (c->tensor && t == NULL && c->kind != MC_DC_ONLY_REDUCED && c->kind != MC_DC_RUN &&
        c->kind != MC_DC_RUN_FIRST && c->kind != MC_DC_RUN_LAST && c->kind != MC_DC_STAGE && c->kind != MC_DC_NONDET)
        return MC_DIAG_UNKNOWN;
    const int failed = t ? tensor_failed(t) : scen_failed(s);
    switch (c->kind) {
    case MC_DC_FAILS:
        return failed ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    case MC_DC_PASSES:
        return failed ? MC_DIAG_FALSE : MC_DIAG_TRUE;
    case MC_DC_AT_SPLIT:
    case MC_DC_AFTER_SPLIT:
        if (t == NULL || !failed || t->first_fail_token < 0 || s->split < 0)
            return MC_DIAG_UNKNOWN;
        if (c->kind == MC_DC_AT_SPLIT)
            return t->first_fail_token == s->split ? MC_DIAG_TRUE : MC_DIAG_FALSE;
        return t->first_fail_token > s->split ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    case MC_DC_FROM_START:
        if (t == NULL || !failed || t->first_fail_token < 0)
            return MC_DIAG_UNKNOWN;
        return t->first_fail_token == 0 ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    case MC_DC_ONLY_REDUCED:
        if (s->failed_full)
            return MC_DIAG_FALSE;
        return s->failed_reduced && s->ran_full ? MC_DIAG_TRUE : MC_DIAG_UNKNOWN;
    case MC_DC_NMSE_BELOW:
    case MC_DC_NMSE_ABOVE:
        if (t == NULL || !failed)
            return MC_DIAG_UNKNOWN;
        return (t->nmse < c->value) == (c->kind == MC_DC_NMSE_BELOW) ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    case MC_DC_NONFINITE:
        if (t == NULL || !failed)
            return MC_DIAG_UNKNOWN;
        return t->nonfinite > 0 ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    case MC_DC_PADDED_ROW:
        if (t == NULL || !failed || t->first_fail_batch < 0 || t->first_fail_batch >= 64 || f->padded_rows == 0)
            return MC_DIAG_UNKNOWN;
        return (f->padded_rows >> t->first_fail_batch) & 1u ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    case MC_DC_RUN:
        if (!scen_failed(s) || s->first_run[0] == '\0')
            return MC_DIAG_UNKNOWN;
        return strstr(s->first_run, c->text) ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    case MC_DC_RUN_FIRST:
    case MC_DC_RUN_LAST: {
        /* the label ends "[v0, v1, ..., vn]" (mc_session_run_begin) */
        const char *open = scen_failed(s) ? strrchr(s->first_run, '[') : NULL;
        const char *close = open ? strchr(open, ']') : NULL;
        if (close == NULL)
            return MC_DIAG_UNKNOWN;
        const char *p = open + 1;
        if (c->kind == MC_DC_RUN_LAST)
            for (p = close; p > open + 1 && p[-1] != ' ';)
                p--;
        long long v;
        if (p >= close || sscanf(p, "%lld", &v) != 1)
            return MC_DIAG_UNKNOWN;
        return (double)v == c->value ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    }
    case MC_DC_STAGE:
        if (s->first_stage[0] == '\0')
            return MC_DIAG_UNKNOWN;
        return strcmp(s->first_stage, c->text) == 0 ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    case MC_DC_NONDET:
        return s->nondeterministic ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    case MC_DC_PADDED_GOLDEN:
        break;
    }
    return MC_DIAG_UNKNOWN;
}

enum mc_diag_truth mc_diag_eval(const struct mc_diag_cond *c, const struct mc_diag_facts *f)
{
    if (c->families && !(c->families & (1u << f->family)))
        return MC_DIAG_UNKNOWN;
    if (c->kind == MC_DC_PADDED_GOLDEN)
        return f->padded_rows ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    if (c->scenario_name != NULL) {
        enum mc_scenario_kind k;
        return mc_scenario_from_name(c->scenario_name, &k) == 0 ? eval_one(c, f, k) : MC_DIAG_UNKNOWN;
    }
    if (c->scenario != MC_DIAG_ANY)
        return c->scenario >= 0 && c->scenario < MC_SCENARIO_COUNT ? eval_one(c, f, c->scenario) : MC_DIAG_UNKNOWN;
    /* any scenario: true when one says true, false when some say false and none true */
    enum mc_diag_truth r = MC_DIAG_UNKNOWN;
    for (int k = 0; k < MC_SCENARIO_COUNT; k++) {
        enum mc_diag_truth v = eval_one(c, f, k);
        if (v == MC_DIAG_TRUE)
            return MC_DIAG_TRUE;
        if (v == MC_DIAG_FALSE)
            r = MC_DIAG_FALSE;
    }
    return r;
}

/* A table row's conditions end at the first zero entry. */
static int present(const struct mc_diag_cond *c)
{
    return c->weight != 0 || c->must;
}

/* ---- evidence in words ------------------------------------------------------------------------------- */

/* Subject ("first_token_causality consistency") and predicate (singular, plural) of a true condition. */
static void phrase(const struct mc_diag_cond *c, const struct mc_diag_facts *f, char *subj, size_t ns,
                   char *pred1, char *predn, size_t np)
{
    const char *scen = c->scenario_name ? c->scenario_name
                       : c->scenario == MC_DIAG_ANY ? ""
                                                    : mc_scenario_name((enum mc_scenario_kind)c->scenario);
    snprintf(subj, ns, "%s%s%s", scen, *scen && c->tensor ? " " : "", c->tensor ? c->tensor : "");
    if (subj[0] == '\0')
        snprintf(subj, ns, "a check");
    const char *p1 = "", *pn = "";
    char buf1[160] = "", bufn[160] = "";
    switch (c->kind) {
    case MC_DC_FAILS:
        p1 = "fails", pn = "fail";
        break;
    case MC_DC_PASSES:
        p1 = "passes", pn = "pass";
        break;
    case MC_DC_AT_SPLIT:
        p1 = "fails from the first token after the split", pn = "fail from the first token after the split";
        break;
    case MC_DC_AFTER_SPLIT:
        p1 = "fails only after the first token after the split (row 0 right)";
        pn = "fail only after the first token after the split (row 0 right)";
        break;
    case MC_DC_FROM_START:
        p1 = "fails from token 0", pn = "fail from token 0";
        break;
    case MC_DC_ONLY_REDUCED:
        p1 = "fails at f16/bf16 only (f32/f64 pass)", pn = "fail at f16/bf16 only (f32/f64 pass)";
        break;
    case MC_DC_NMSE_BELOW:
        snprintf(buf1, sizeof buf1, "is off by a small additive amount (nmse < %g)", c->value);
        snprintf(bufn, sizeof bufn, "are off by a small additive amount (nmse < %g)", c->value);
        p1 = buf1, pn = bufn;
        break;
    case MC_DC_NMSE_ABOVE:
        snprintf(buf1, sizeof buf1, "is far off (nmse >= %g)", c->value);
        snprintf(bufn, sizeof bufn, "are far off (nmse >= %g)", c->value);
        p1 = buf1, pn = bufn;
        break;
    case MC_DC_NONFINITE:
        p1 = "has non-finite values", pn = "have non-finite values";
        break;
    case MC_DC_PADDED_ROW:
        p1 = "fails first on a padded row", pn = "fail first on a padded row";
        break;
    case MC_DC_RUN:
    case MC_DC_RUN_FIRST:
    case MC_DC_RUN_LAST: {
        const struct mc_diag_scenario_fact *s = c->scenario == MC_DIAG_ANY ? NULL : &f->scen[c->scenario];
        snprintf(buf1, sizeof buf1, "fails first in run %.120s", s ? s->first_run : c->text);
        p1 = pn = buf1;
        break;
    }
    case MC_DC_STAGE:
        snprintf(buf1, sizeof buf1, "fails first at stage %s", c->text);
        p1 = pn = buf1;
        break;
    case MC_DC_NONDET:
        p1 = "is nondeterministic", pn = "are nondeterministic";
        break;
    case MC_DC_PADDED_GOLDEN:
        snprintf(subj, ns, "the golden");
        p1 = pn = "has padded rows";
        break;
    }
    snprintf(pred1, np, "%s", p1);
    snprintf(predn, np, "%s", pn);
}

/* 1 when two conditions read the same scenario. */
static int same_scenario(const struct mc_diag_cond *a, const struct mc_diag_cond *b)
{
    if (a->scenario_name || b->scenario_name)
        return a->scenario_name && b->scenario_name && strcmp(a->scenario_name, b->scenario_name) == 0;
    return a->scenario == b->scenario;
}

/* 1 when a more specific true condition of the signature speaks about the same failing tensor. */
static int said_better(const struct mc_signature *sig, int i, const enum mc_diag_truth *truth)
{
    const struct mc_diag_cond *c = &sig->cond[i];
    if (c->kind != MC_DC_FAILS || c->tensor == NULL)
        return 0;
    for (int j = 0; j < MC_DIAG_MAX_COND && present(&sig->cond[j]); j++) {
        const struct mc_diag_cond *o = &sig->cond[j];
        if (j != i && truth[j] == MC_DIAG_TRUE && o->weight > 0 && o->kind != MC_DC_FAILS && o->kind != MC_DC_PASSES &&
            same_scenario(o, c) && o->tensor && strcmp(o->tensor, c->tensor) == 0)
            return 1;
    }
    return 0;
}

static void append(char *buf, size_t len, size_t *used, const char *s)
{
    if (*used < len)
        *used += (size_t)snprintf(buf + *used, len - *used, "%s", s);
}

/* The true supporting conditions in words; those with the same predicate share it:
 * "first_token_causality consistency and chunked output fail from the first token after the split". */
static void evidence(const struct mc_signature *sig, const enum mc_diag_truth *truth, const struct mc_diag_facts *f,
                     char *buf, size_t len)
{
    size_t used = 0;
    int done[MC_DIAG_MAX_COND] = {0};
    buf[0] = '\0';
    for (int i = 0; i < MC_DIAG_MAX_COND && present(&sig->cond[i]); i++) {
        const struct mc_diag_cond *c = &sig->cond[i];
        if (done[i] || truth[i] != MC_DIAG_TRUE || c->weight <= 0 || said_better(sig, i, truth) ||
            (c->say && c->say[0] == '\0')) /* say "": a precondition, not evidence */
            continue;
        done[i] = 1;
        append(buf, len, &used, used ? "; " : "");
        if (c->say) {
            append(buf, len, &used, c->say);
            continue;
        }
        char subj[MC_DIAG_MAX_COND][96], p1[160], pn[160], q1[160], qn[160];
        const struct mc_diag_cond *who[MC_DIAG_MAX_COND] = {c};
        phrase(c, f, subj[0], sizeof subj[0], p1, pn, sizeof p1);
        int ns = 1;
        for (int j = i + 1; j < MC_DIAG_MAX_COND && present(&sig->cond[j]); j++) {
            const struct mc_diag_cond *o = &sig->cond[j];
            if (done[j] || truth[j] != MC_DIAG_TRUE || o->weight <= 0 || o->say || said_better(sig, j, truth))
                continue;
            phrase(o, f, subj[ns], sizeof subj[ns], q1, qn, sizeof q1);
            if (strcmp(q1, p1) != 0 || strcmp(subj[ns], subj[0]) == 0)
                continue;
            done[j] = 1;
            who[ns++] = o;
        }
        for (int k = 0; k < ns; k++) {
            append(buf, len, &used, k == 0 ? "" : k == ns - 1 ? " and " : ", ");
            /* "first_token_causality consistency and output": the scenario once */
            int same = k > 0 && who[k]->tensor && who[k - 1]->tensor && same_scenario(who[k], who[k - 1]) &&
                       (who[k]->scenario != MC_DIAG_ANY || who[k]->scenario_name);
            append(buf, len, &used, same ? who[k]->tensor : subj[k]);
        }
        append(buf, len, &used, " ");
        append(buf, len, &used, ns > 1 ? pn : p1);
    }
}

/* ---- matching ---------------------------------------------------------------------------------------- */

static int better(const struct mc_diag_match *a, const struct mc_diag_match *b)
{
    if (a->score != b->score)
        return a->score > b->score;
    return (long long)a->score * b->known > (long long)b->score * a->known; /* the larger share of the known */
}

static void keep(struct mc_diagnosis *out, const struct mc_diag_match *m)
{
    int at = out->n < MC_DIAG_TOP ? out->n : MC_DIAG_TOP;
    while (at > 0 && better(m, &out->top[at - 1]))
        at--;
    if (at >= MC_DIAG_TOP)
        return;
    int last = out->n < MC_DIAG_TOP ? out->n : MC_DIAG_TOP - 1;
    for (int i = last; i > at; i--)
        out->top[i] = out->top[i - 1];
    out->top[at] = *m;
    if (out->n < MC_DIAG_TOP)
        out->n++;
}

int mc_diagnose(const struct mc_diag_facts *f, const struct mc_signature *sigs, int n_sigs, struct mc_diagnosis *out)
{
    out->n = 0;
    out->family = f->family;
    if (!f->any_failed)
        return 0;
    for (int s = 0; s < n_sigs; s++) {
        const struct mc_signature *sig = &sigs[s];
        if (sig->families && !(sig->families & (1u << f->family)))
            continue;
        enum mc_diag_truth truth[MC_DIAG_MAX_COND];
        struct mc_diag_match m = {.sig = sig};
        int named = 1, support = 0;
        for (int i = 0; i < MC_DIAG_MAX_COND && present(&sig->cond[i]); i++) {
            const struct mc_diag_cond *c = &sig->cond[i];
            truth[i] = mc_diag_eval(c, f);
            if (c->must && truth[i] != MC_DIAG_TRUE)
                named = 0;
            int w = c->weight < 0 ? -c->weight : c->weight;
            if ((!c->families || (c->families & (1u << f->family))) && (c->kind != MC_DC_STAGE || truth[i] != MC_DIAG_UNKNOWN))
                m.total += w;
            if (truth[i] == MC_DIAG_UNKNOWN)
                continue;
            m.known += w;
            /* a negative weight is evidence against the class when the condition holds */
            int sign = (truth[i] == MC_DIAG_TRUE) == (c->weight > 0) ? 1 : -1;
            m.score += sign * w;
            /* support: something that failed, not only things that passed */
            support |= truth[i] == MC_DIAG_TRUE && c->weight > 0 && c->kind != MC_DC_PASSES &&
                       c->kind != MC_DC_PADDED_GOLDEN;
        }
        if (!named || !support || m.score <= 0)
            continue;
        evidence(sig, truth, f, m.evidence, sizeof m.evidence);
        keep(out, &m);
    }
    return 1;
}

int mc_diagnose_case(const struct mc_case *c, const struct mc_golden *g, const struct mc_check_result *checks, int n,
                     const char *backend, struct mc_diagnosis *out)
{
    struct mc_diag_facts f;
    mc_diag_facts_build(&f, c, g, checks, n, backend);
    memset(out, 0, sizeof *out);
    snprintf(out->case_id, sizeof out->case_id, "%s", c ? c->id : "");
    out->backend = backend;
    return mc_diagnose(&f, mc_signatures, mc_n_signatures, out);
}

int mc_diagnose_backend_first(const struct mc_diagnosis *d, int i)
{
    for (int j = 0; j < i; j++)
        if (strcmp(d[j].backend, d[i].backend) == 0)
            return 0;
    return 1;
}

int mc_diagnose_summary(const struct mc_diagnosis *d, int n, const char *backend, struct mc_diag_match *top,
                        int *cases, int *first)
{
    struct {
        const struct mc_signature *sig;
        int firsts, score, known, total;
        const struct mc_diag_match *best;
    } acc[64];
    int na = 0;
    *cases = 0;
    *first = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(d[i].backend, backend) != 0 || d[i].n == 0)
            continue;
        (*cases)++;
        for (int k = 0; k < d[i].n; k++) {
            const struct mc_diag_match *m = &d[i].top[k];
            int a = 0;
            while (a < na && acc[a].sig != m->sig)
                a++;
            if (a == na) {
                if (na == (int)(sizeof acc / sizeof acc[0]))
                    continue;
                acc[na].sig = m->sig;
                acc[na].firsts = acc[na].score = acc[na].known = acc[na].total = 0;
                acc[na].best = m;
                na++;
            }
            acc[a].firsts += k == 0;
            acc[a].score += m->score;
            acc[a].known += m->known;
            acc[a].total += m->total;
            if (m->score > acc[a].best->score)
                acc[a].best = m;
        }
    }
    /* rank: cases naming it first, then summed score (insertion into at most MC_DIAG_TOP) */
    int order[MC_DIAG_TOP], no = 0;
    for (int a = 0; a < na; a++) {
        int at = no;
        while (at > 0 && (acc[a].firsts > acc[order[at - 1]].firsts ||
                          (acc[a].firsts == acc[order[at - 1]].firsts && acc[a].score > acc[order[at - 1]].score)))
            at--;
        if (at >= MC_DIAG_TOP)
            continue;
        for (int i = (no < MC_DIAG_TOP ? no : MC_DIAG_TOP - 1); i > at; i--)
            order[i] = order[i - 1];
        order[at] = a;
        if (no < MC_DIAG_TOP)
            no++;
    }
    struct mc_diagnosis sum = {.n = no};
    for (int k = 0; k < no; k++) {
        top[k] = *acc[order[k]].best;
        top[k].score = acc[order[k]].score;
        top[k].known = acc[order[k]].known;
        top[k].total = acc[order[k]].total;
        sum.top[k] = top[k];
    }
    for (int i = 0; i < n && sum.n > 0; i++)
        if (strcmp(d[i].backend, backend) == 0 && d[i].n > 0 && d[i].top[0].sig == sum.top[0].sig)
            (*first)++;
    return sum.n;
}

void mc_diag_format(const struct mc_diag_match *m, char *buf, size_t len)
{
    snprintf(buf, len, "likely: %s (%s) \xe2\x80\x94 evidence: %s", m->sig->title, m->sig->id, m->evidence);
}

/* 1 when the first class is not clearly the answer: a runner-up less than one defining observation
 * (weight 3, signatures.c) behind, or under 60 % of its conditions' weight known. */
static int thin(const struct mc_diag_match *top, int n)
{
    return (n > 1 && top[0].score - top[1].score < 3) || 5 * top[0].known < 3 * top[0].total;
}

int mc_diag_named_in_line(const struct mc_diag_match *top, int n)
{
    if (n <= 0)
        return 0;
    return n > 1 && thin(top, n) ? 2 : 1;
}

void mc_diag_format_best(const struct mc_diag_match *top, int n, char *buf, size_t len)
{
    if (n <= 0) {
        snprintf(buf, len, "%s", "");
        return;
    }
    if (!thin(top, n)) {
        mc_diag_format(&top[0], buf, len);
        return;
    }
    if (n == 1) {
        snprintf(buf, len, "possibly: %s (%s) \xe2\x80\x94 evidence: %s", top[0].sig->title, top[0].sig->id,
                 top[0].evidence);
        return;
    }
    snprintf(buf, len, "possibly: %s (%s), or %s (%s) \xe2\x80\x94 evidence: %s", top[0].sig->title, top[0].sig->id,
             top[1].sig->title, top[1].sig->id, top[0].evidence);
}

void mc_diag_format_summary(const struct mc_diag_match *top, int n, int cases, int first, char *buf, size_t len)
{
    if (n <= 0) {
        snprintf(buf, len, "%s", "");
    } else if (2 * first > cases) {
        mc_diag_format(&top[0], buf, len);
    } else if (n == 1) {
        snprintf(buf, len, "possibly: %s (%s) \xe2\x80\x94 evidence: %s", top[0].sig->title, top[0].sig->id,
                 top[0].evidence);
    } else {
        snprintf(buf, len, "possibly: %s (%s), or %s (%s) \xe2\x80\x94 evidence: %s", top[0].sig->title,
                 top[0].sig->id, top[1].sig->title, top[1].sig->id, top[0].evidence);
    }
}
