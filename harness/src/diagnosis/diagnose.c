/* diagnose.c — see diagnose.h. A generic matcher: no bug class is named in this file. */
#include "diagnosis/diagnose.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verdict/compare.h"

/* Cuts a string cut short by snprintf back to its last whole UTF-8 character (the lines hold "—", "‖", "√"). */
static void utf8_trim(char *s)
{
    size_t n = strlen(s), i = n;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
        i--; /* continuation bytes at the end */
    if (i == 0)
        return;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (lead >= 0x80 && n - (i - 1) < want)
        s[i - 1] = '\0';
}

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

static int tensor_failed(const struct mc_diag_tensor_fact *t)
{
    return t->fail_full || t->fail_reduced;
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

/* The longest sum of the family's math: the hidden size (projections), the conv channels (the projection
 * back), the state (its contraction): what float rounding grows with. */
static int64_t reduction_of(const struct mc_family_shape *sh)
{
    int64_t n = sh->hidden > sh->conv_channels ? sh->hidden : sh->conv_channels;
    int64_t st = mc_family_state_elems(sh);
    if (st > 0 && sh->state_ndim > 0 && sh->state_dims[sh->state_ndim - 1] > n)
        n = sh->state_dims[sh->state_ndim - 1];
    return n > 0 ? n : 64;
}

static void note_error(struct mc_diag_facts *f, const struct mc_check_result *r)
{
    f->n_errored++;
    for (int i = 0; i < f->n_errors; i++)
        if (strncmp(f->errors[i].message, r->message, 80) == 0)
            return;
    if (f->n_errors == MC_DIAG_MAX_ERRORS)
        return;
    struct mc_diag_error *e = &f->errors[f->n_errors++];
    e->scenario = r->scenario;
    e->dtype = r->dtype;
    snprintf(e->message, sizeof e->message, "%.*s", (int)sizeof e->message - 1,
             r->message[0] ? r->message : "errored (no message)");
}

void mc_diag_facts_build(struct mc_diag_facts *f, const struct mc_case *c, const struct mc_golden *g,
                         const struct mc_check_result *checks, int n, const char *backend)
{
    memset(f, 0, sizeof *f);
    f->family = c ? c->family : MC_FAMILY_MAMBA2;
    f->reduction = 64; /* without a golden: a typical hidden size */
    if (g != NULL) {
        struct mc_family_shape sh;
        mc_family_shape(&g->config, &sh);
        f->reduction = reduction_of(&sh);
        f->conv_kernel = sh.conv_kernel > 0 ? sh.conv_kernel : 0;
    }
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
        /* errors are not numbers: a check that errored, crashed or ran out of time is reported as such
         * and its scenario counts as not run for the numeric signatures */
        if (r->status == MC_CHECK_ERROR) {
            note_error(f, r);
            continue;
        }
        struct mc_diag_scenario_fact *s = &f->scen[r->scenario];
        const int red = reduced(r->dtype);
        const int bad = r->status == MC_CHECK_FAIL || r->status == MC_CHECK_NONDETERMINISTIC;
        f->ran_dtypes |= MC_DTYPE_BIT(r->dtype);
        if (red)
            s->ran_reduced = 1;
        else
            s->ran_full = 1;
        if (bad) {
            f->any_failed = 1;
            f->failed_dtypes |= MC_DTYPE_BIT(r->dtype);
            if (red)
                s->failed_reduced = 1;
            else
                s->failed_full = 1;
            if (s->first_run[0] == '\0')
                snprintf(s->first_run, sizeof s->first_run, "%s", r->detail);
        }
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
            const struct mc_compare_stats *st = &tr->stats;
            if (!tensor_failed(t))
                t->cosine = 2.0;
            if (red)
                t->fail_reduced = 1;
            else
                t->fail_full = 1;
            if (st->first_fail_token >= 0 && (t->first_fail_token < 0 || st->first_fail_token < t->first_fail_token)) {
                t->first_fail_token = st->first_fail_token;
                t->first_fail_batch = st->first_fail_batch;
            }
            t->nonfinite += st->n_nonfinite;
            if (st->n_nan_bare > 0 && f->nan_bare++ == 0) {
                f->nan_bare_scenario = r->scenario;
                f->nan_bare_dtype = r->dtype;
                snprintf(f->nan_bare_tensor, sizeof f->nan_bare_tensor, "%s", tr->name);
                f->nan_bare_token = st->first_fail_token;
            }
            double nm = mc_compare_nmse(st);
            if (nm == nm && nm > t->nmse)
                t->nmse = nm;
            if (nm != nm || st->n_nonfinite > 0)
                t->nmse = 1e300;
            double mag = st->max_abs_expected > 0.0 ? st->max_abs_expected : 1.0;
            double rel = st->n_nonfinite > 0 ? 1e300 : st->max_abs_err / mag;
            if (rel > t->rel_err)
                t->rel_err = rel;
            double cs = mc_compare_cosine(st);
            if (cs == cs && cs < t->cosine)
                t->cosine = cs;
            if (!red) {
                t->full_elems += st->n_grid_read; /* the grid is read over the failing, non-zero values */
                t->offgrid_bf16 += st->n_offgrid_bf16;
                t->offgrid_f16 += st->n_offgrid_f16;
            }
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

/* One condition on one scenario. */
static enum mc_diag_truth eval_one(const struct mc_diag_cond *c, const struct mc_diag_facts *f, int k)
{
    const struct mc_diag_scenario_fact *s = &f->scen[k];
    if (c->kind == MC_DC_PADDED_GOLDEN)
        return f->padded_rows ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    if (!scen_ran(s))
        return MC_DIAG_UNKNOWN;
    const struct mc_diag_tensor_fact *t = c->tensor ? find_tensor(s, c->tensor) : NULL;
    if (c->kind == MC_DC_SHORT_SPLIT)
        return s->split < 0 || f->conv_kernel <= 1 ? MC_DIAG_UNKNOWN
               : s->split < f->conv_kernel - 1     ? MC_DIAG_TRUE
                                                   : MC_DIAG_FALSE;
    if (c->tensor && t == NULL && c->kind != MC_DC_ONLY_REDUCED && c->kind != MC_DC_RUN && c->kind != MC_DC_ON_GRID &&
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
    case MC_DC_ON_GRID: {
        /* at least a few dozen values, none of them off the grid: the port rounded the tensor there; no
         * tensor: either cache tensor; "half": bf16 or f16 */
        const char *names[2] = {c->tensor, NULL};
        if (c->tensor == NULL)
            names[0] = "conv_state", names[1] = "recurrent_state";
        enum mc_diag_truth r = MC_DIAG_UNKNOWN;
        for (int i = 0; i < 2 && names[i]; i++) {
            const struct mc_diag_tensor_fact *x = find_tensor(s, names[i]);
            if (x == NULL || !x->fail_full || x->full_elems < 32)
                continue;
            int on = strcmp(c->text, "f16") == 0    ? x->offgrid_f16 == 0
                     : strcmp(c->text, "bf16") == 0 ? x->offgrid_bf16 == 0
                                                    : x->offgrid_f16 == 0 || x->offgrid_bf16 == 0;
            if (on)
                return MC_DIAG_TRUE;
            r = MC_DIAG_FALSE;
        }
        return r;
    }
    case MC_DC_PADDED_GOLDEN:
    case MC_DC_SHORT_SPLIT:
    case MC_DC_EXPERIMENT:
    case MC_DC_EXP_REFUTED:
    case MC_DC_EXP_RATIO_BELOW:
        break;
    }
    return MC_DIAG_UNKNOWN;
}

/* A condition on an experiment's outcome. */
static enum mc_diag_truth eval_experiment(const struct mc_diag_cond *c, const struct mc_diag_facts *f)
{
    int k = (int)c->value;
    if (k < 0 || k >= MC_EXP_COUNT || f->exp[k].verdict == MC_EXP_NOT_RUN)
        return MC_DIAG_UNKNOWN;
    if (c->kind == MC_DC_EXP_RATIO_BELOW)
        return f->exp[k].ratio > 0.0 && f->exp[k].ratio < atof(c->text) ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    if (c->kind == MC_DC_EXP_REFUTED)
        return f->exp[k].verdict == MC_EXP_REFUTED ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    return f->exp[k].verdict == MC_EXP_HOLDS ? MC_DIAG_TRUE : MC_DIAG_FALSE;
}

enum mc_diag_truth mc_diag_eval(const struct mc_diag_cond *c, const struct mc_diag_facts *f)
{
    if (c->families && !(c->families & (1u << f->family)))
        return MC_DIAG_UNKNOWN;
    if (c->kind == MC_DC_PADDED_GOLDEN)
        return f->padded_rows ? MC_DIAG_TRUE : MC_DIAG_FALSE;
    if (c->kind == MC_DC_EXPERIMENT || c->kind == MC_DC_EXP_REFUTED || c->kind == MC_DC_EXP_RATIO_BELOW)
        return eval_experiment(c, f);
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
    return c->weight != 0 || c->must || c->veto;
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
    case MC_DC_SHORT_SPLIT:
        snprintf(buf1, sizeof buf1, "starts after a prefill shorter than K-1 = %lld (the window not yet full)",
                 (long long)(f->conv_kernel - 1));
        p1 = pn = buf1;
        break;
    case MC_DC_ON_GRID:
        if (c->tensor == NULL)
            snprintf(subj, ns, "%s cache", scen);
        snprintf(buf1, sizeof buf1, "holds only %s values at f32/f64 (the port rounded it)",
                 strcmp(c->text, "half") == 0 ? "bf16 or f16" : c->text);
        snprintf(bufn, sizeof bufn, "hold only %s values at f32/f64 (the port rounded them)",
                 strcmp(c->text, "half") == 0 ? "bf16 or f16" : c->text);
        p1 = buf1, pn = bufn;
        break;
    case MC_DC_EXPERIMENT:
    case MC_DC_EXP_REFUTED:
    case MC_DC_EXP_RATIO_BELOW: {
        int k = (int)c->value;
        snprintf(subj, ns, "experiment %s", mc_experiment_name((enum mc_experiment_kind)k));
        snprintf(buf1, sizeof buf1, "%.*s", (int)sizeof buf1 - 1, k >= 0 && k < MC_EXP_COUNT ? f->exp[k].text : "?");
        p1 = pn = buf1;
        break;
    }
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
        if (c->kind == MC_DC_EXPERIMENT || c->kind == MC_DC_EXP_REFUTED || c->kind == MC_DC_EXP_RATIO_BELOW) {
            int k = (int)c->value;
            append(buf, len, &used, k >= 0 && k < MC_EXP_COUNT ? f->exp[k].text : "?");
            continue;
        }
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

/* ---- what the facts establish ------------------------------------------------------------------------- */

/* The failing scenarios, tensors, first token against the split, error scale and dtypes, in words. */
static void facts_text(const struct mc_diag_facts *f, char *buf, size_t len)
{
    size_t used = 0;
    char tmp[256];
    buf[0] = '\0';
    double worst_nmse = 0.0, worst_rel = 0.0;
    int named = 0;
    for (int k = 0; k < MC_SCENARIO_COUNT; k++) {
        const struct mc_diag_scenario_fact *s = &f->scen[k];
        if (!s->failed_full && !s->failed_reduced)
            continue;
        size_t w = (size_t)snprintf(tmp, sizeof tmp, "%s%s", named ? "; " : "", mc_scenario_name((enum mc_scenario_kind)k));
        int nt = 0;
        for (int i = 0; i < s->n_tensors && w < sizeof tmp; i++) {
            const struct mc_diag_tensor_fact *t = &s->tensors[i];
            if (!tensor_failed(t))
                continue;
            w += (size_t)snprintf(tmp + w, sizeof tmp - w, "%s%s", nt++ ? ", " : " (", t->name);
            if (t->first_fail_token >= 0 && w < sizeof tmp)
                w += (size_t)snprintf(tmp + w, sizeof tmp - w, " from token %lld%s", (long long)t->first_fail_token,
                                      s->split >= 0 && t->first_fail_token == s->split  ? " = the split"
                                      : s->split >= 0 && t->first_fail_token > s->split ? " (after the split)"
                                                                                        : "");
            if (t->nmse > worst_nmse && t->nmse < 1e300)
                worst_nmse = t->nmse;
            if (t->rel_err > worst_rel && t->rel_err < 1e300)
                worst_rel = t->rel_err;
        }
        if (nt && w < sizeof tmp)
            snprintf(tmp + w, sizeof tmp - w, ")");
        if (s->first_stage[0] && strlen(tmp) + 40 < sizeof tmp)
            snprintf(tmp + strlen(tmp), sizeof tmp - strlen(tmp), " first at stage %s", s->first_stage);
        append(buf, len, &used, tmp);
        named++;
    }
    if (!named)
        return;
    char dts[64] = "";
    size_t dw = 0;
    for (int d = MC_DTYPE_F64; d <= MC_DTYPE_BF16 && dw < sizeof dts; d++)
        if (f->failed_dtypes & MC_DTYPE_BIT(d))
            dw += (size_t)snprintf(dts + dw, sizeof dts - dw, "%s%s", dw ? "/" : "", mc_dtype_name((enum mc_dtype)d));
    snprintf(tmp, sizeof tmp, " — fails at %s; worst nmse %.2g, worst error %.2g of the tensor's magnitude", dts,
             worst_nmse, worst_rel);
    append(buf, len, &used, tmp);
}

static void experiments_text(const struct mc_diag_facts *f, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < MC_EXP_COUNT; k++)
        if (f->exp[k].text[0]) {
            append(buf, len, &used, used ? "; " : "");
            append(buf, len, &used, mc_experiment_name((enum mc_experiment_kind)k));
            append(buf, len, &used, ": ");
            append(buf, len, &used, f->exp[k].text);
        }
}

static void errors_text(const struct mc_diag_facts *f, char *buf, size_t len)
{
    size_t used = 0;
    char tmp[320];
    buf[0] = '\0';
    snprintf(tmp, sizeof tmp, "%d check(s) errored", f->n_errored);
    append(buf, len, &used, tmp);
    for (int i = 0; i < f->n_errors; i++) {
        snprintf(tmp, sizeof tmp, "%s %s at %s: %s", i ? ";" : " —", mc_scenario_name(f->errors[i].scenario),
                 mc_dtype_name(f->errors[i].dtype), f->errors[i].message);
        append(buf, len, &used, tmp);
    }
}

/* ---- the precision verdict --------------------------------------------------------------------------------- */

/* How far from a precision's rounding a failure may be and still be "at its rounding level": the error's
 * scale (max |a - b| over the tensor's magnitude) up to PREC_GROWTH * sqrt(n) unit roundoffs, n the
 * longest sum (a random-walk accumulation with room for the cancellations of a recurrence), and at
 * least a quarter of one unit roundoff (a smaller error is not that precision's rounding). */
#define PREC_GROWTH 8.0

static int at_rounding_of(double rel, double u, int64_t n)
{
    return rel <= PREC_GROWTH * sqrt((double)n) * u && rel >= 0.25 * u;
}

/* Every failing tensor of every failing check at the given precisions (MC_DTYPE_BIT mask) satisfies
 * at_rounding_of(u), is finite, and no tensor is on a reduced grid (a storage fault, not arithmetic). */
static int rounding_scan(const struct mc_diag_facts *f, uint32_t dts, double u, int floor);

static int all_at_rounding(const struct mc_diag_facts *f, uint32_t dts, double u)
{
    return rounding_scan(f, dts, u, 1);
}

/* The same without the floor of a quarter unit roundoff: one intermediate of one path rounded to the precision
 * reaches some tensors only through sums that shrink it (a decode's output from an f32 state: nmse 1e-20). */
static int all_within_rounding(const struct mc_diag_facts *f, uint32_t dts, double u)
{
    return rounding_scan(f, dts, u, 0);
}

static int rounding_scan(const struct mc_diag_facts *f, uint32_t dts, double u, int floor)
{
    int any = 0;
    for (int k = 0; k < MC_SCENARIO_COUNT; k++) {
        const struct mc_diag_scenario_fact *s = &f->scen[k];
        for (int i = 0; i < s->n_tensors; i++) {
            const struct mc_diag_tensor_fact *t = &s->tensors[i];
            if (!tensor_failed(t))
                continue;
            if (t->fail_reduced && !(dts & (MC_DTYPE_BIT(MC_DTYPE_BF16) | MC_DTYPE_BIT(MC_DTYPE_F16))))
                return 0;
            if (t->nonfinite || (floor ? !at_rounding_of(t->rel_err, u, f->reduction)
                                       : !(t->rel_err <= PREC_GROWTH * sqrt((double)f->reduction) * u)))
                return 0;
            if (t->full_elems >= 32 && (t->offgrid_bf16 == 0 || t->offgrid_f16 == 0))
                return 0;
            any = 1;
        }
    }
    return any;
}

static int prefill_output_fails(const struct mc_diag_facts *f)
{
    const struct mc_diag_scenario_fact *s = &f->scen[MC_SCENARIO_PREFILL];
    const struct mc_diag_tensor_fact *t = find_tensor(s, "output");
    return t != NULL && tensor_failed(t);
}

/* "f32" when the failures are at f64 only and at float32's rounding level (confirmed by the f32 reference
 * where it ran), "bf16/f16" when at f32/f64 only, f16/bf16 checks pass, and the error is at their rounding
 * level; NULL otherwise. Every path must show it (the fresh prefill's output fails), except for f32 on one
 * path, which the f32 reference on that path's own calls must confirm (f32_paths: the fifth held-out set's
 * decode state, window and KV cache kept in f32 inside f64 calls). */
static const char *precision_of(const struct mc_diag_facts *f, char *why, size_t len)
{
    const uint32_t f64 = MC_DTYPE_BIT(MC_DTYPE_F64), f32 = MC_DTYPE_BIT(MC_DTYPE_F32);
    const uint32_t red = MC_DTYPE_BIT(MC_DTYPE_BF16) | MC_DTYPE_BIT(MC_DTYPE_F16);
    const struct mc_experiment_outcome *x = &f->exp[MC_EXP_F32_REFERENCE];
    if (!f->any_failed || f->n_errored)
        return NULL;
    if (f->failed_dtypes == f64 && all_within_rounding(f, f64, ldexp(1.0, -24)) && !prefill_output_fails(f)) {
        /* one path only (the fresh prefill right): float32 inside the decode step or the continued forward,
         * when the f32 reference on the same calls errs by as much (f32_paths); without the experiment the
         * size alone is not a verdict (a decode-only epsilon fails by as little) */
        const struct mc_experiment_outcome *xp = &f->exp[MC_EXP_F32_PATHS];
        if (xp->verdict != MC_EXP_HOLDS)
            return NULL;
        snprintf(why, len, "only f64 checks fail, on one path (the fresh prefill is right), each at float32's rounding "
                           "level (error up to %.0f·√%lld unit roundoffs of 2^-24); %s",
                 PREC_GROWTH, (long long)f->reduction, xp->text);
        return "f32";
    }
    if (!prefill_output_fails(f))
        return NULL;
    if (f->failed_dtypes == f64 && all_at_rounding(f, f64, ldexp(1.0, -24))) {
        if (x->verdict == MC_EXP_REFUTED)
            return NULL;
        snprintf(why, len, "only f64 checks fail, each at float32's rounding level (error up to %.0f·√%lld "
                           "unit roundoffs of 2^-24)%s%s",
                 PREC_GROWTH, (long long)f->reduction, x->verdict == MC_EXP_HOLDS ? "; " : "",
                 x->verdict == MC_EXP_HOLDS ? x->text : "");
        return "f32";
    }
    if ((f->failed_dtypes & ~(f64 | f32)) == 0 && (f->ran_dtypes & red) &&
        all_at_rounding(f, f64 | f32, ldexp(1.0, -8)) && !all_at_rounding(f, f64 | f32, ldexp(1.0, -24))) {
        snprintf(why, len, "f32/f64 checks fail at the rounding level of a 16-bit float while the bf16/f16 "
                           "checks pass their tolerances");
        return "bf16/f16";
    }
    return NULL;
}

/* The rounding hypothesis of one path, said beside the classes and never a verdict of its own (mc_diagnose):
 * a reduced-precision intermediate in the decode step or the continued forward leaves the fresh prefill's
 * output right and fails only where that path runs. "bf16/f16" (the text into why) when only f32/f64 checks
 * fail (the bf16/f16 checks, where the case runs them, pass their tolerances), and every failing tensor is
 * finite, off the 16-bit grids (arithmetic, not storage) and rounding-sized (nmse below 1e-5, error under one
 * bf16 unit of the tensor's magnitude), the largest above float32's rounding (more than PREC_GROWTH *
 * sqrt(n) * 2^-24; the tensors a path's intermediate reaches only through a sum can be smaller). The paths
 * named are the scenarios that failed. NULL otherwise. Drawn from the third held-out set (a decode that reads
 * its state in bf16, a continued forward that stages its initial state in f16: errors 5e-5 .. 3e-3 of the
 * magnitude, nmse 1e-9 .. 6e-6); scored as a verdict on the fourth, it named two decode-only norm epsilons
 * (structures) "bf16/f16 inside": a size cannot tell them apart, so it is a hypothesis. */
static const char *path_precision_of(const struct mc_diag_facts *f, char *why, size_t len)
{
    const uint32_t f64 = MC_DTYPE_BIT(MC_DTYPE_F64), f32 = MC_DTYPE_BIT(MC_DTYPE_F32);
    const uint32_t red = MC_DTYPE_BIT(MC_DTYPE_BF16) | MC_DTYPE_BIT(MC_DTYPE_F16);
    if (!f->any_failed || f->n_errored || f->failed_dtypes == 0 || (f->failed_dtypes & ~(f64 | f32)) != 0)
        return NULL;
    /* one path only: a fresh prefill that fails too is the every-path rule's (precision_of), where a small
     * constant of every path (an epsilon, 8.16) fails by the same sizes */
    if (prefill_output_fails(f))
        return NULL;
    /* a 16-bit intermediate breaks the f32 checks as much as the f64 ones: f64 failing alone is not it */
    if ((f->ran_dtypes & f32) && !(f->failed_dtypes & f32))
        return NULL;
    const double f32_ceiling = PREC_GROWTH * sqrt((double)(f->reduction > 0 ? f->reduction : 1)) * ldexp(1.0, -24);
    char paths[200] = "";
    size_t used = 0;
    int any = 0;
    double worst = 0.0;
    for (int k = 0; k < MC_SCENARIO_COUNT; k++) {
        const struct mc_diag_scenario_fact *s = &f->scen[k];
        int failed_here = 0;
        for (int i = 0; i < s->n_tensors; i++) {
            const struct mc_diag_tensor_fact *t = &s->tensors[i];
            if (!tensor_failed(t))
                continue;
            if (t->fail_reduced || t->nonfinite || !(t->nmse < 1e-5) || !(t->rel_err < ldexp(1.0, -8)))
                return NULL;
            if (t->rel_err > worst)
                worst = t->rel_err;
            if (t->full_elems >= 32 && (t->offgrid_bf16 == 0 || t->offgrid_f16 == 0))
                return NULL;
            failed_here = any = 1;
        }
        if (failed_here && used + 40 < sizeof paths)
            used += (size_t)snprintf(paths + used, sizeof paths - used, "%s%s", used ? ", " : "",
                                     mc_scenario_name((enum mc_scenario_kind)k));
    }
    if (!any || !(worst > f32_ceiling))
        return NULL;
    /* paths held to 120 characters, so that the message fits the 400 bytes of its callers' buffers */
    snprintf(why, len, "only f32/f64 checks fail (%.120s), each by a rounding-sized error, the largest above float32's rounding "
                       "(nmse < 1e-5, error under 2^-8 of the magnitude, over %.0f·√%lld units of 2^-24)%s: an "
                       "intermediate of that path kept in a 16-bit float",
             paths, PREC_GROWTH, (long long)f->reduction,
             (f->ran_dtypes & red) ? ", while the bf16/f16 checks pass their tolerances" : "");
    return "bf16/f16";
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
    /* a class with two signatures (two mechanisms of one id) is named once, by its better one */
    for (int i = 0; i < out->n; i++)
        if (strcmp(out->top[i].sig->id, m->sig->id) == 0) {
            if (!better(m, &out->top[i]))
                return;
            for (int j = i; j + 1 < out->n; j++)
                out->top[j] = out->top[j + 1];
            out->n--;
            break;
        }
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

/* 1 when a true supporting condition of the class says more than "the fresh prefill is wrong": a failure
 * of another scenario, where in the sequence it starts (the split, a padded row, a run's parameters), a
 * stage, an experiment, a grid, a precision. A fresh prefill can be wrong in many ways a signature cannot
 * tell apart (a norm, a constant, a layout, a swapped projection); a class whose only evidence is that is
 * never "likely". */
static int specific(const struct mc_signature *sig, const enum mc_diag_truth *truth)
{
    for (int i = 0; i < MC_DIAG_MAX_COND && present(&sig->cond[i]); i++) {
        const struct mc_diag_cond *c = &sig->cond[i];
        if (truth[i] != MC_DIAG_TRUE || c->weight <= 0 || c->kind == MC_DC_PASSES || c->kind == MC_DC_PADDED_GOLDEN)
            continue;
        int generic = c->kind == MC_DC_FROM_START || c->kind == MC_DC_NMSE_ABOVE ||
                      (c->kind == MC_DC_FAILS && c->scenario == MC_SCENARIO_PREFILL && c->scenario_name == NULL);
        if (!generic)
            return 1;
    }
    return 0;
}

/* 1 when every numeric failure at f32/f64 is rounding-sized: nmse below 1e-5 and the largest error under
 * 2^-8 of the tensor's magnitude (one bf16 unit), the size of a reduced-precision intermediate. Errors that
 * small come as often from a precision as from a structure (a half-precision buffer in one path, an
 * epsilon, a dropped small term): the pattern of what failed cannot single a structural class out. */
static int rounding_sized(const struct mc_diag_facts *f)
{
    int any = 0;
    for (int k = 0; k < MC_SCENARIO_COUNT; k++)
        for (int i = 0; i < f->scen[k].n_tensors; i++) {
            const struct mc_diag_tensor_fact *t = &f->scen[k].tensors[i];
            if (!t->fail_full)
                continue;
            if (t->nonfinite || !(t->nmse < 1e-5) || !(t->rel_err < ldexp(1.0, -8)))
                return 0;
            any = 1;
        }
    return any;
}

/* 1 when a true condition of the class reads the grid of the values (a rounding the port did, not a size). */
static int on_grid(const struct mc_signature *sig, const enum mc_diag_truth *truth)
{
    for (int i = 0; i < MC_DIAG_MAX_COND && present(&sig->cond[i]); i++)
        if (truth[i] == MC_DIAG_TRUE && sig->cond[i].kind == MC_DC_ON_GRID && sig->cond[i].weight > 0)
            return 1;
    return 0;
}

/* 1 when the first class is not singled out: a runner-up less than one defining observation (weight 3,
 * signatures.c) behind, under 60 % of its conditions' weight known, or one of its experiment conditions
 * not run (the experiment that would separate it was not possible here); or every failure is
 * rounding-sized and the class does not rest on the values' grid. */
static int thin(const struct mc_diag_match *top, int n)
{
    return (n > 1 && top[0].score - top[1].score < 3) || 5 * top[0].known < 3 * top[0].total || !top[0].specific ||
           top[0].rounding || top[0].unsettled;
}

int mc_diagnose(const struct mc_diag_facts *f, const struct mc_signature *sigs, int n_sigs, struct mc_diagnosis *out)
{
    out->n = 0;
    out->family = f->family;
    out->verdict = MC_DIAG_NO_CLASS;
    out->precision[0] = out->facts[0] = out->experiments[0] = out->errors[0] = out->rounding[0] = '\0';
    if (!f->any_failed && f->n_errored == 0)
        return 0;
    facts_text(f, out->facts, sizeof out->facts);
    experiments_text(f, out->experiments, sizeof out->experiments);
    utf8_trim(out->facts);
    utf8_trim(out->experiments);
    if (f->n_errored > 0) {
        out->verdict = MC_DIAG_ERRORS;
        errors_text(f, out->errors, sizeof out->errors);
        return 1;
    }
    if (f->nan_bare > 0) {
        /* NaN of the backend's own making: arithmetic gone out of range or memory it never had, not a
         * numeric deviation a class could be read from (docs/diagnosis.md §2) */
        out->verdict = MC_DIAG_ERRORS;
        snprintf(out->errors, sizeof out->errors,
                 "non-finite values: the backend's own NaN (no payload: not the harness's poison passed on) in "
                 "%d failing tensor(s), first %s %s at %s (first failing token %lld)",
                 (int)f->nan_bare, mc_scenario_name(f->nan_bare_scenario), f->nan_bare_tensor,
                 mc_dtype_name(f->nan_bare_dtype), (long long)f->nan_bare_token);
        return 1;
    }
    char why[720];
    const char *p = precision_of(f, why, sizeof why);
    /* one path's rounding-sized failure is a hypothesis beside the classes, not a verdict: on the fourth
     * held-out set a decode-only norm epsilon (a structure) failed exactly so, twice */
    if (p == NULL)
        (void)path_precision_of(f, out->rounding, sizeof out->rounding);
    if (p != NULL) {
        out->verdict = MC_DIAG_PRECISION;
        snprintf(out->precision, sizeof out->precision, "%s", p);
        snprintf(out->errors, sizeof out->errors, "%s", why);
        return 1;
    }
    const int small = rounding_sized(f);
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
            if (c->if_true && truth[i] == MC_DIAG_FALSE)
                truth[i] = MC_DIAG_UNKNOWN;
            if (c->must && truth[i] != MC_DIAG_TRUE)
                named = 0;
            if (c->veto && truth[i] == MC_DIAG_FALSE)
                named = 0;
            if (c->for_likely && truth[i] != MC_DIAG_TRUE)
                m.unsettled = 1;
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
        m.specific = specific(sig, truth);
        m.rounding = small && !on_grid(sig, truth);
        evidence(sig, truth, f, m.evidence, sizeof m.evidence);
        utf8_trim(m.evidence);
        keep(out, &m);
    }
    if (out->n > 0)
        out->verdict = thin(out->top, out->n) ? MC_DIAG_POSSIBLY : MC_DIAG_LIKELY;
    return 1;
}

/* The experiments a signature's conditions read (1 per kind). */
static void wanted_by(const struct mc_signature *sig, int want[MC_EXP_COUNT])
{
    for (int i = 0; i < MC_DIAG_MAX_COND && present(&sig->cond[i]); i++) {
        const struct mc_diag_cond *c = &sig->cond[i];
        if ((c->kind == MC_DC_EXPERIMENT || c->kind == MC_DC_EXP_REFUTED || c->kind == MC_DC_EXP_RATIO_BELOW) && c->value >= 0 && c->value < MC_EXP_COUNT)
            want[(int)c->value] = 1;
    }
}

void mc_diagnose_experiments(const struct mc_case *c, const struct mc_golden *g, const struct mc_check_result *checks,
                             int n, const char *backend, int out[MC_EXP_COUNT])
{
    struct mc_diag_facts f;
    memset(out, 0, sizeof(int) * MC_EXP_COUNT);
    mc_diag_facts_build(&f, c, g, checks, n, backend);
    if (!f.any_failed || f.n_errored)
        return;
    /* with every experiment pending (unknown), the classes still named are those an experiment may confirm
     * or rule out; a signature that requires one is named only once it ran, so ask for every experiment a
     * family's signatures read when they could apply: the experiments are cheap (a few forwards) */
    for (int s = 0; s < mc_n_signatures; s++) {
        const struct mc_signature *sig = &mc_signatures[s];
        if (sig->families && !(sig->families & (1u << f.family)))
            continue;
        wanted_by(sig, out);
    }
    /* the precision verdict reads the f32 reference, of the prefill and of the other paths */
    out[MC_EXP_F32_REFERENCE] = 1;
    out[MC_EXP_F32_PATHS] = 1;
}

int mc_diagnose_case(const struct mc_case *c, const struct mc_golden *g, const struct mc_check_result *checks, int n,
                     const char *backend, const struct mc_experiment_outcome *exp, struct mc_diagnosis *out)
{
    struct mc_diag_facts f;
    mc_diag_facts_build(&f, c, g, checks, n, backend);
    if (exp != NULL)
        memcpy(f.exp, exp, sizeof f.exp);
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
    for (int k = 0; k < no; k++) {
        top[k] = *acc[order[k]].best;
        top[k].score = acc[order[k]].score;
        top[k].known = acc[order[k]].known;
        top[k].total = acc[order[k]].total;
    }
    /* first: the cases that name the run's first class first and likely (a "possibly" is not a vote) */
    for (int i = 0; i < n && no > 0; i++)
        if (strcmp(d[i].backend, backend) == 0 && d[i].n > 0 && d[i].top[0].sig == top[0].sig &&
            d[i].verdict == MC_DIAG_LIKELY)
            (*first)++;
    return no;
}

void mc_diag_format(const struct mc_diag_match *m, char *buf, size_t len)
{
    snprintf(buf, len, "likely: %s (%s) \xe2\x80\x94 evidence: %s", m->sig->title, m->sig->id, m->evidence);
}

static int named_in_line(const struct mc_diag_match *top, int n)
{
    if (n <= 0)
        return 0;
    return n > 1 && thin(top, n) ? 2 : 1;
}

static void format_best(const struct mc_diag_match *top, int n, char *buf, size_t len)
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

static void format_summary(const struct mc_diag_match *top, int n, int cases, int first, char *buf, size_t len)
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

/* "also possible: A (id); B (id)" for the classes top[from..n) */
static void also_text(const struct mc_diag_match *top, int n, int from, char *also, size_t len)
{
    size_t used = 0;
    also[0] = '\0';
    for (int k = from; k < n && used < len; k++) {
        int w = snprintf(also + used, len - used, "%s %s (%s)", k > from ? ";" : "also possible:", top[k].sig->title,
                         top[k].sig->id);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* Appends " — experiments: ..." to a line when experiments ran. */
static void with_experiments(const struct mc_diagnosis *d, char *line, size_t len)
{
    size_t u = strlen(line);
    if (d->experiments[0] && u < len)
        snprintf(line + u, len - u, "; experiments: %s", d->experiments);
}

static void diag_line(const struct mc_diagnosis *d, char *line, size_t len, char *also, size_t also_len);

void mc_diag_line(const struct mc_diagnosis *d, char *line, size_t len, char *also, size_t also_len)
{
    diag_line(d, line, len, also, also_len);
    utf8_trim(line);
    utf8_trim(also);
}

/* The one-path rounding hypothesis (path_precision_of), appended to a class line or to "no class fits". */
static void with_rounding(const struct mc_diagnosis *d, char *line, size_t len)
{
    if (d->rounding[0] == '\0')
        return;
    size_t used = strlen(line);
    if (used + 64 < len)
        snprintf(line + used, len - used, "; or rounding, not structure, possibly: %s", d->rounding);
}

static void diag_line(const struct mc_diagnosis *d, char *line, size_t len, char *also, size_t also_len)
{
    also[0] = '\0';
    switch (d->verdict) {
    case MC_DIAG_ERRORS:
        snprintf(line, len, "errors, not numbers: %s (errors are never matched against numeric bug classes)%s%s",
                 d->errors, d->facts[0] ? "; the numeric failures besides: " : "", d->facts);
        return;
    case MC_DIAG_PRECISION:
        snprintf(line, len, "computes in %s inside \xe2\x80\x94 rounding, not structure: %s; facts: %s", d->precision,
                 d->errors, d->facts);
        return;
    case MC_DIAG_NO_CLASS:
        snprintf(line, len, "no class fits \xe2\x80\x94 facts: %s", d->facts);
        with_experiments(d, line, len);
        with_rounding(d, line, len);
        return;
    case MC_DIAG_LIKELY:
    case MC_DIAG_POSSIBLY:
        break;
    }
    format_best(d->top, d->n, line, len);
    also_text(d->top, d->n, named_in_line(d->top, d->n), also, also_len);
    with_rounding(d, line, len);
}

static int summary_line(const struct mc_diagnosis *d, int n, const char *backend, char *line, size_t len, char *also,
                        size_t also_len, int *cases, int *first, enum mc_diag_verdict *verdict);

int mc_diag_summary_line(const struct mc_diagnosis *d, int n, const char *backend, char *line, size_t len,
                         char *also, size_t also_len, int *cases, int *first, enum mc_diag_verdict *verdict)
{
    enum mc_diag_verdict v = MC_DIAG_NO_CLASS;
    int r = summary_line(d, n, backend, line, len, also, also_len, cases, first, &v);
    if (verdict)
        *verdict = v;
    utf8_trim(line);
    utf8_trim(also);
    return r;
}

static int summary_line(const struct mc_diagnosis *d, int n, const char *backend, char *line, size_t len, char *also,
                        size_t also_len, int *cases, int *first, enum mc_diag_verdict *verdict)
{
    int diagnosed = 0, errored = 0, precision = 0, noclass = 0, likely = 0;
    const struct mc_diagnosis *err_case = NULL, *prec_case = NULL, *none_case = NULL;
    line[0] = also[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (strcmp(d[i].backend, backend) != 0)
            continue;
        diagnosed++;
        if (d[i].verdict == MC_DIAG_ERRORS && errored++ == 0)
            err_case = &d[i];
        if (d[i].verdict == MC_DIAG_PRECISION && precision++ == 0)
            prec_case = &d[i];
        if (d[i].verdict == MC_DIAG_NO_CLASS && noclass++ == 0)
            none_case = &d[i];
        likely += d[i].verdict == MC_DIAG_LIKELY;
    }
    *cases = diagnosed;
    *first = 0;
    if (diagnosed == 0)
        return 0;
    if (errored) {
        *first = errored;
        *verdict = MC_DIAG_ERRORS;
        snprintf(line, len, "errors, not numbers: %d of %d diagnosed case(s) errored; in %s: %s", errored, diagnosed,
                 err_case->case_id, err_case->errors);
        return 1;
    }
    /* precision as the classes' likely: more than half of the diagnosed cases say it, and none names a class
     * likely (a case whose failing paths the experiments did not reach says possibly or no class) */
    if (2 * precision > diagnosed && likely == 0) {
        *first = precision;
        *verdict = MC_DIAG_PRECISION;
        snprintf(line, len, "computes in %s inside \xe2\x80\x94 rounding, not structure, in %d of %d diagnosed case(s); in %s: %s",
                 prec_case->precision, precision, diagnosed, prec_case->case_id, prec_case->errors);
        return 1;
    }
    struct mc_diag_match top[MC_DIAG_TOP];
    int named_cases = 0, likely_first = 0;
    int nt = mc_diagnose_summary(d, n, backend, top, &named_cases, &likely_first);
    if (nt == 0) {
        const struct mc_diagnosis *x = none_case ? none_case : prec_case;
        snprintf(line, len, "no class fits in any of %d diagnosed case(s) \xe2\x80\x94 facts of %s: %s", diagnosed,
                 x ? x->case_id : "?", x ? x->facts : "");
        return 1;
    }
    /* likely only when more than half of the diagnosed cases (not just those naming a class) name it likely */
    *first = likely_first;
    *verdict = 2 * likely_first > diagnosed ? MC_DIAG_LIKELY : MC_DIAG_POSSIBLY;
    format_summary(top, nt, diagnosed, likely_first, line, len);
    also_text(top, nt, 2 * likely_first > diagnosed ? 1 : nt > 1 ? 2 : 1, also, also_len);
    return 1;
}
