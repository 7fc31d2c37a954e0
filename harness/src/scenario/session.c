/* session.c — see session.h. */
#include "scenario/session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "exec/guard.h"
#include "exec/isolate.h"
#include "golden/weightset.h"

void *mc_session_calloc(size_t n, size_t size, struct mc_session *s)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        mc_error_set(s->err, MC_ERR_NOMEM, "out of memory (%zu x %zu bytes)", n, size);
    return p;
}

/* Marks the check as errored by the backend (first message wins). */
static void backend_failed(struct mc_session *s, enum mc_backend_status st, const char *what, const struct mc_msg *msg)
{
    if (!s->broken) {
        s->res->status = st == MC_BACKEND_UNSUPPORTED ? MC_CHECK_UNSUPPORTED : MC_CHECK_ERROR;
        snprintf(s->res->message, sizeof s->res->message, "%s: %s", what, msg->text[0] ? msg->text : "(no message)");
    }
    s->broken = 1;
}

void mc_session_backend_failed(struct mc_session *s, enum mc_backend_status st, const char *what,
                               const struct mc_msg *msg)
{
    backend_failed(s, st, what, msg);
}

/* Records a contract violation found by the harness (guards, modified inputs) as the check's error. */
static void violation(struct mc_session *s, const char *call, const char *what)
{
    if (!s->broken) {
        s->res->status = MC_CHECK_ERROR;
        snprintf(s->res->message, sizeof s->res->message, "%s: %s", call, what);
    }
    s->broken = 1;
}

void mc_session_violation(struct mc_session *s, const char *call, const char *what)
{
    violation(s, call, what);
}

/* Checks the guards of a buffer handed to `call`; records a violation when one was written. */
static int guard_ok(struct mc_session *s, const char *call, const struct mc_guarded *g, const char *name)
{
    char what[256];
    if (mc_guard_check(g, name, what, sizeof what) == 0)
        return 1;
    violation(s, call, what);
    return 0;
}

/* 1 when an input buffer still holds what was handed over; else records which element changed. */
static int input_unchanged(struct mc_session *s, const char *call, const char *name, const void *now,
                           const void *before, size_t bytes, size_t elem_bytes)
{
    if (memcmp(now, before, bytes) == 0)
        return 1;
    size_t i = 0;
    while (((const unsigned char *)now)[i] == ((const unsigned char *)before)[i])
        i++;
    char what[160];
    snprintf(what, sizeof what, "modified its input '%s' (first at element %zu)", name, i / elem_bytes);
    violation(s, call, what);
    return 0;
}

static struct mc_tensor_result *tensor(struct mc_session *s, const char *name, enum mc_tensor_kind kind, int bitwise)
{
    struct mc_check_result *r = s->res;
    for (int i = 0; i < r->n_tensors; i++)
        if (strcmp(r->tensors[i].name, name) == 0)
            return &r->tensors[i];
    if (r->n_tensors >= MC_CHECK_MAX_TENSORS) {
        mc_error_set(s->err, MC_ERR_INTERNAL, "check compares more than %d tensors (no room for '%s')",
                     MC_CHECK_MAX_TENSORS, name);
        return NULL;
    }
    struct mc_tensor_result *t = &r->tensors[r->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    if (bitwise) {
        t->tol.atol = 0.0;
        t->tol.rtol = 0.0;
    } else {
        t->tol = s->tol[kind];
    }
    if (bitwise || kind == MC_TENSOR_CONSISTENCY)
        t->expected = MC_EXPECTED_SELF;
    else if (s->live_reference || kind == MC_TENSOR_REF_OUTPUT || kind == MC_TENSOR_REF_CONV_STATE ||
             kind == MC_TENSOR_REF_RECURRENT_STATE)
        t->expected = MC_EXPECTED_F64_REFERENCE;
    else
        t->expected = MC_EXPECTED_GOLDEN;
    mc_compare_stats_init(&t->stats);
    return t;
}

void mc_session_compare(struct mc_session *s, const char *name, enum mc_tensor_kind kind, int bitwise,
                         const double *actual, const double *expected, const struct mc_compare_view *view)
{
    struct mc_tensor_result *t = tensor(s, name, kind, bitwise);
    if (t == NULL)
        return;
    struct mc_compare_stats one;
    mc_compare_stats_init(&one);
    mc_compare_accumulate(actual, expected, view, t->tol, &one);
    mc_compare_stats_merge(&t->stats, &one);
    t->comparisons++;
    struct mc_check_result *r = s->res;
    if (!mc_compare_passed(&one) && r->first_fail_tensor[0] == '\0') {
        snprintf(r->first_fail_tensor, sizeof r->first_fail_tensor, "%s", t->name);
        r->first_fail = one;
        snprintf(r->detail, sizeof r->detail, "%s", s->run_label[0] ? s->run_label : "the scenario's only run");
    }
}

enum mc_err_code mc_session_open(struct mc_session *s, const struct mc_scenario_ctx *ctx, struct mc_check_result *res,
                                 struct mc_error *err)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->g = ctx->g;
    s->ops = ctx->ops;
    s->res = res;
    s->err = err;
    s->esz = mc_dtype_size(ctx->dtype);
    s->threads = ctx->threads;
    mc_family_shape(&ctx->g->config, &s->shape);

    const struct mc_tolerance_profile *prof = ctx->tolerance ? ctx->tolerance : &ctx->c->tolerance;
    const char *dev = ctx->tolerance_device ? ctx->tolerance_device : ctx->ops->device;
    snprintf(res->tolerance_path, sizeof res->tolerance_path, "%s", prof->path ? prof->path : "");
    snprintf(res->tolerance_device, sizeof res->tolerance_device, "%s", dev);
    for (int k = 0; k < MC_TENSOR_COUNT; k++) {
        enum mc_err_code rc = mc_tolerance_lookup(prof, dev, ctx->dtype, (enum mc_tensor_kind)k, &s->tol[k], err);
        if (rc != MC_ERR_NONE)
            return rc;
    }
    /* each tensor's magnitude over the golden, what an atol_scale is in units of (case/tolerance.h) */
    double out = ctx->g->output_max, conv = ctx->g->conv_max, state = ctx->g->state_max;
    s->tol[MC_TENSOR_OUTPUT].magnitude = s->tol[MC_TENSOR_REF_OUTPUT].magnitude = out;
    s->tol[MC_TENSOR_CONSISTENCY].magnitude = out;
    s->tol[MC_TENSOR_CONV_STATE].magnitude = s->tol[MC_TENSOR_REF_CONV_STATE].magnitude = conv;
    s->tol[MC_TENSOR_RECURRENT_STATE].magnitude = s->tol[MC_TENSOR_REF_RECURRENT_STATE].magnitude = state;
    if (!(ctx->ops->dtypes & MC_DTYPE_BIT(ctx->dtype))) {
        res->status = MC_CHECK_UNSUPPORTED;
        snprintf(res->message, sizeof res->message, "backend '%s' does not support dtype %s", ctx->ops->name,
                 mc_dtype_name(ctx->dtype));
        s->broken = 1;
        return MC_ERR_NONE;
    }
    /* reduced precision: also against the reference on the same rounded weights and inputs */
    if (ctx->ref != NULL && ctx->ops != ctx->ref_ops)
        s->ref = ctx->ref;
    return mc_session_model(s, 0);
}

enum mc_err_code mc_session_model(struct mc_session *s, int64_t chunk_size)
{
    enum mc_err_code rc = MC_ERR_NONE;
    const struct mc_golden *g = s->g;
    const struct mc_scenario_ctx *ctx = s->ctx;
    struct mc_weightset own = {0};
    const struct mc_weightset *ws = ctx->weights;
    if (s->model != NULL) {
        mc_isolate_enter("model_destroy");
        s->ops->model_destroy(s->model);
        mc_isolate_leave();
    }
    s->model = NULL;
    if (s->broken)
        return MC_ERR_NONE;
    if (ws == NULL) {
        if (mc_weightset_build(g, ctx->dtype, &own, s->err) != MC_ERR_NONE)
            return s->err->code;
        ws = &own;
    }
    struct mc_weight *w = mc_session_calloc((size_t)g->n_weights, sizeof *w, s);
    void **bufs = mc_session_calloc((size_t)g->n_weights, sizeof *bufs, s);
    struct mc_guarded *gw = mc_session_calloc((size_t)g->n_weights, sizeof *gw, s);
    if (w == NULL || bufs == NULL || gw == NULL) {
        rc = MC_ERR_NOMEM;
        goto out;
    }
    /* the backend gets its own copy; the weightset stays pristine to check it against. The copies are
     * read-only inputs: guarded, and fenced (guard.h) so a read past a weight's end faults */
    for (int i = 0; i < g->n_weights; i++) {
        const struct mc_array *a = &g->weights[i].value;
        size_t bytes = (size_t)mc_array_elems(a) * s->esz;
        bufs[i] = mc_guard_alloc_input(&gw[i], bytes, s->esz, g->weights[i].name, "model_create");
        if (bufs[i] == NULL) {
            rc = mc_error_set(s->err, MC_ERR_NOMEM, "out of memory (%zu bytes)", bytes);
            goto out;
        }
        memcpy(bufs[i], ws->data[i], bytes);
        w[i].name = g->weights[i].name;
        w[i].ndim = a->ndim;
        memcpy(w[i].dims, a->dims, sizeof w[i].dims);
        w[i].data = bufs[i];
    }
    struct mc_model_desc desc = {
        .family = g->config.family,
        .dtype = ctx->dtype,
        .config = &g->config.u,
        .weights = w,
        .n_weights = g->n_weights,
        .chunk_size = chunk_size,
        .threads = s->threads,
    };
    struct mc_msg msg = {{0}};
    char what[64];
    if (chunk_size != 0 || s->threads != 0)
        snprintf(what, sizeof what, "model_create(chunk_size %lld, threads %d)", (long long)chunk_size,
                 (int)s->threads);
    else
        snprintf(what, sizeof what, "model_create");
    mc_isolate_enter(what);
    enum mc_backend_status st = ctx->ops->model_create(&desc, &s->model, &msg);
    mc_isolate_leave();
    if (st != MC_BACKEND_OK) {
        s->model = NULL;
        snprintf(what, sizeof what, "model_create(chunk_size %lld)", (long long)chunk_size);
        backend_failed(s, st, chunk_size ? what : "model_create", &msg);
        goto out;
    }
    /* the weights are inputs too: a backend must not write them */
    for (int i = 0; i < g->n_weights && !s->broken; i++)
        input_unchanged(s, "model_create", g->weights[i].name, bufs[i], ws->data[i],
                        (size_t)mc_array_elems(&g->weights[i].value) * s->esz, s->esz);
    if (s->ctx->probes != NULL) /* a diagnosing rerun: probes on (scenario/probes.h) */
        s->ctx->probes->model(s);
out:
    if (gw != NULL)
        for (int i = 0; i < g->n_weights; i++)
            mc_guard_free(&gw[i]);
    free(gw);
    free(bufs);
    free(w);
    mc_weightset_free(&own);
    return rc;
}

void mc_session_close(struct mc_session *s)
{
    if (s->model != NULL) {
        mc_isolate_enter("model_destroy");
        s->ops->model_destroy(s->model);
        mc_isolate_leave();
    }
    s->model = NULL;
    if (s->probe != NULL) /* only a probing rerun's hooks set it */
        s->ctx->probes->close(s);
}

int mc_session_cache_new(struct mc_session *s, int64_t batch, struct mc_session_cache *c)
{
    c->h = NULL;
    c->batch = batch;
    if (s->broken)
        return -1;
    struct mc_msg msg = {{0}};
    char call[48];
    snprintf(call, sizeof call, "cache_alloc(batch %lld)", (long long)batch);
    mc_isolate_enter(call);
    enum mc_backend_status st = s->ops->cache_alloc(s->model, batch, &c->h, &msg);
    mc_isolate_leave();
    if (st != MC_BACKEND_OK) {
        c->h = NULL;
        backend_failed(s, st, "cache_alloc", &msg);
        return -1;
    }
    return 0;
}

int mc_session_cache_dup(struct mc_session *s, const struct mc_session_cache *src, struct mc_session_cache *dst)
{
    if (mc_session_cache_new(s, src->batch, dst) != 0)
        return -1;
    struct mc_msg msg = {{0}};
    mc_isolate_enter("cache_copy");
    enum mc_backend_status st = s->ops->cache_copy(s->model, dst->h, src->h, &msg);
    mc_isolate_leave();
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, "cache_copy", &msg);
        return -1;
    }
    return 0;
}

void mc_session_cache_drop(struct mc_session *s, struct mc_session_cache *c)
{
    if (c->h != NULL && s->model != NULL) {
        mc_isolate_enter("cache_free");
        s->ops->cache_free(s->model, c->h);
        mc_isolate_leave();
    }
    c->h = NULL;
}


/* The backend's host memory, where the arguments of forward and forward_packed go when it has some
 * (struct mc_backend_ops host_map: the Python adapter's shared memory), else NULL. */
static const struct mc_guard_mem *host_memory(const struct mc_session *s, struct mc_guard_mem *mem)
{
    if (s->ops->host_map == NULL || s->ops->host_unmap == NULL)
        return NULL;
    mem->map = s->ops->host_map;
    mem->unmap = s->ops->host_unmap;
    return mem;
}

/* One forward over a slice; y receives [nrows][len][D] in float64. Returns 0, or -1 when the backend
 * failed (recorded in the result) or memory ran out (recorded in err). */
int mc_session_forward(struct mc_session *s, struct mc_session_cache *c, const struct mc_slice *sl, double *y)
{
    if (s->broken)
        return -1;
    const struct mc_golden *g = s->g;
    int64_t D = s->shape.hidden;
    size_t n = (size_t)(sl->nrows * sl->len * D), nmask = (size_t)(sl->nrows * sl->len);
    int rc = -1;
    char call[96];
    snprintf(call, sizeof call, "forward(rows %lld..%lld, tokens %lld..%lld)", (long long)sl->r0,
             (long long)(sl->r0 + sl->nrows - 1), (long long)sl->t0, (long long)(sl->t0 + sl->len - 1));
    /* x and the mask are read-only inputs: fenced as well as guarded (guard.h) */
    struct mc_guarded gx = {0}, gy = {0}, gm = {0};
    double *xf = mc_session_calloc(n, sizeof *xf, s);
    void *xcopy = mc_session_calloc(n, s->esz, s);
    struct mc_guard_mem hm;
    const struct mc_guard_mem *mem = host_memory(s, &hm);
    void *xb = mc_guard_alloc_input_in(&gx, n * s->esz, s->esz, "x", call, mem);
    void *yb = mc_guard_alloc_in(&gy, n * s->esz, mem);
    uint8_t *mask = NULL, *mask_copy = NULL;
    if (xf == NULL || xcopy == NULL || xb == NULL || yb == NULL) {
        mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t b = 0; b < sl->nrows; b++) {
        const double *src = sl->x != NULL ? sl->x + b * sl->len * D
                                          : g->hidden_states.data + ((sl->r0 + b) * g->len + sl->t0) * D;
        memcpy(xf + b * sl->len * D, src, (size_t)(sl->len * D) * sizeof *xf);
    }
    mc_dtype_from_f64(s->ctx->dtype, xf, xb, n);
    memcpy(xcopy, xb, n * s->esz);
    if (sl->masked && g->mask != NULL) {
        mask = mc_guard_alloc_input_in(&gm, nmask, 1, "mask", call, mem);
        mask_copy = mc_session_calloc(nmask, 1, s);
        if (mask == NULL || mask_copy == NULL) {
            mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int64_t b = 0; b < sl->nrows; b++)
            memcpy(mask + b * sl->len, g->mask + (sl->r0 + b) * g->len + sl->t0, (size_t)sl->len);
        memcpy(mask_copy, mask, nmask);
    }
    if (s->ctx->probes != NULL && s->ctx->probes->before(s, c, sl) != 0)
        goto out;
    mc_dtype_fill_nan(s->ctx->dtype, yb, n);
    struct mc_forward_args args = {.batch = sl->nrows, .len = sl->len, .x = xb, .mask = mask, .y = yb};
    struct mc_msg msg = {{0}};
    mc_isolate_enter(call);
    enum mc_backend_status st = s->ops->forward(s->model, c != NULL ? c->h : NULL, &args, &msg);
    mc_isolate_leave();
    if (!guard_ok(s, call, &gy, "y") || !guard_ok(s, call, &gx, "x") || !guard_ok(s, call, &gm, "mask") ||
        !input_unchanged(s, call, "x", xb, xcopy, n * s->esz, s->esz) ||
        (mask != NULL && !input_unchanged(s, call, "mask", mask, mask_copy, nmask, 1)))
        goto out;
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, call, &msg);
        goto out;
    }
    mc_dtype_to_f64(s->ctx->dtype, yb, y, n);
    if (s->probe != NULL) { /* the inputs as the backend got them, for the reference's run of the call */
        mc_dtype_to_f64(s->ctx->dtype, xcopy, xf, n);
        s->ctx->probes->after(s, sl, xf, mask, call);
    }
    rc = s->broken ? -1 : 0;
out:
    free(xf);
    free(xcopy);
    free(mask_copy);
    mc_guard_free(&gx);
    mc_guard_free(&gy);
    mc_guard_free(&gm);
    return rc;
}

/* The dtype of exported and imported caches: f64 for f64 models, else f32. */
static enum mc_dtype export_dtype(const struct mc_session *s)
{
    return s->ctx->dtype == MC_DTYPE_F64 ? MC_DTYPE_F64 : MC_DTYPE_F32;
}

size_t mc_session_export_size(const struct mc_session *s)
{
    return mc_dtype_size(export_dtype(s));
}

int mc_session_cache_read_raw(struct mc_session *s, const struct mc_session_cache *c, void *conv, void *state)
{
    if (s->broken)
        return -1;
    enum mc_dtype edt = export_dtype(s);
    size_t esz = mc_dtype_size(edt);
    size_t nconv = (size_t)(c->batch * s->shape.conv_channels * s->shape.conv_kernel);
    size_t nstate = (size_t)(c->batch * mc_family_state_elems(&s->shape));
    int rc = -1;
    struct mc_guarded gc = {0}, gs = {0};
    void *cb = mc_guard_alloc(&gc, nconv * esz);
    void *sb = nstate ? mc_guard_alloc(&gs, nstate * esz) : NULL;
    if (cb == NULL || (nstate && sb == NULL)) {
        mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
        goto out;
    }
    mc_dtype_fill_nan(edt, cb, nconv);
    if (sb != NULL)
        mc_dtype_fill_nan(edt, sb, nstate);
    struct mc_msg msg = {{0}};
    mc_isolate_enter("cache_export");
    enum mc_backend_status st = s->ops->cache_export(s->model, c->h, cb, sb, &msg);
    mc_isolate_leave();
    if (!guard_ok(s, "cache_export", &gc, "conv_state") || !guard_ok(s, "cache_export", &gs, "recurrent_state"))
        goto out;
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, "cache_export", &msg);
        goto out;
    }
    memcpy(conv, cb, nconv * esz);
    if (sb != NULL && state != NULL)
        memcpy(state, sb, nstate * esz);
    rc = 0;
out:
    mc_guard_free(&gc);
    mc_guard_free(&gs);
    return rc;
}

/* Exports a cache as float64: conv [batch][C][K], state [batch][state dims] (state may be NULL). */
int mc_session_cache_read(struct mc_session *s, const struct mc_session_cache *c, double *conv, double *state)
{
    if (s->broken)
        return -1;
    enum mc_dtype edt = export_dtype(s);
    size_t esz = mc_dtype_size(edt);
    size_t nconv = (size_t)(c->batch * s->shape.conv_channels * s->shape.conv_kernel);
    size_t nstate = (size_t)(c->batch * mc_family_state_elems(&s->shape));
    void *cb = mc_session_calloc(nconv, esz, s);
    void *sb = nstate ? mc_session_calloc(nstate, esz, s) : NULL;
    int rc = -1;
    if (cb != NULL && (nstate == 0 || sb != NULL) && mc_session_cache_read_raw(s, c, cb, sb) == 0) {
        mc_dtype_to_f64(edt, cb, conv, nconv);
        if (sb != NULL && state != NULL)
            mc_dtype_to_f64(edt, sb, state, nstate);
        rc = 0;
    }
    free(cb);
    free(sb);
    return rc;
}

int mc_session_cache_write_raw(struct mc_session *s, struct mc_session_cache *c, const void *conv, const void *state)
{
    if (s->broken)
        return -1;
    size_t esz = mc_dtype_size(export_dtype(s));
    size_t nconv = (size_t)(c->batch * s->shape.conv_channels * s->shape.conv_kernel);
    size_t nstate = state != NULL ? (size_t)(c->batch * mc_family_state_elems(&s->shape)) : 0;
    int rc = -1;
    struct mc_guarded gc = {0}, gs = {0};
    /* read-only for the backend: fenced like x (guard.h) */
    void *cb = mc_guard_alloc_input(&gc, nconv * esz, esz, "conv_state", "cache_import");
    void *sb = nstate ? mc_guard_alloc_input(&gs, nstate * esz, esz, "recurrent_state", "cache_import") : NULL;
    if (cb == NULL || (nstate && sb == NULL)) {
        mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
        goto out;
    }
    memcpy(cb, conv, nconv * esz);
    if (nstate)
        memcpy(sb, state, nstate * esz);
    struct mc_msg msg = {{0}};
    mc_isolate_enter("cache_import");
    enum mc_backend_status st = s->ops->cache_import(s->model, c->h, cb, sb, &msg);
    mc_isolate_leave();
    if (!guard_ok(s, "cache_import", &gc, "conv_state") || !guard_ok(s, "cache_import", &gs, "recurrent_state") ||
        !input_unchanged(s, "cache_import", "conv_state", cb, conv, nconv * esz, esz) ||
        (nstate && !input_unchanged(s, "cache_import", "recurrent_state", sb, state, nstate * esz, esz)))
        goto out;
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, "cache_import", &msg);
        goto out;
    }
    rc = 0;
out:
    mc_guard_free(&gc);
    mc_guard_free(&gs);
    return rc;
}

int mc_session_cache_write(struct mc_session *s, struct mc_session_cache *c, const double *conv, const double *state)
{
    if (s->broken)
        return -1;
    enum mc_dtype edt = export_dtype(s);
    size_t esz = mc_dtype_size(edt);
    size_t nconv = (size_t)(c->batch * s->shape.conv_channels * s->shape.conv_kernel);
    size_t nstate = state != NULL ? (size_t)(c->batch * mc_family_state_elems(&s->shape)) : 0;
    void *cb = mc_session_calloc(nconv, esz, s);
    void *sb = nstate ? mc_session_calloc(nstate, esz, s) : NULL;
    int rc = -1;
    if (cb != NULL && (nstate == 0 || sb != NULL)) {
        mc_dtype_from_f64(edt, conv, cb, nconv);
        if (nstate)
            mc_dtype_from_f64(edt, state, sb, nstate);
        rc = mc_session_cache_write_raw(s, c, cb, sb);
    }
    free(cb);
    free(sb);
    return rc;
}

int mc_session_need_packed(struct mc_session *s)
{
    if (s->broken)
        return -1;
    if (s->ops->forward_packed != NULL)
        return 0;
    s->res->status = MC_CHECK_UNSUPPORTED;
    snprintf(s->res->message, sizeof s->res->message, "backend %s has no packed call (forward_packed)",
             s->ops->name);
    s->broken = 1;
    return -1;
}

int mc_session_forward_packed(struct mc_session *s, struct mc_session_cache *pool, const struct mc_packed_seq *seq,
                              int64_t n, double *y)
{
    if (mc_session_need_packed(s) != 0)
        return -1;
    const struct mc_golden *g = s->g;
    const int64_t D = s->shape.hidden;
    int64_t T = 0;
    for (int64_t i = 0; i < n; i++)
        T += seq[i].len;
    size_t nx = (size_t)(T * D);
    int rc = -1;
    char call[96];
    snprintf(call, sizeof call, "forward_packed(%lld sequences, %lld tokens, pool of %lld)", (long long)n,
             (long long)T, (long long)pool->batch);
    struct mc_guarded gx = {0}, gy = {0}, gcu = {0}, gsl = {0}, ghi = {0};
    double *xf = mc_session_calloc(nx, sizeof *xf, s);
    void *xcopy = mc_session_calloc(nx, s->esz, s);
    struct mc_guard_mem hm;
    const struct mc_guard_mem *mem = host_memory(s, &hm);
    void *xb = mc_guard_alloc_in(&gx, nx * s->esz, mem);
    void *yb = mc_guard_alloc_in(&gy, nx * s->esz, mem);
    int64_t *cu = mc_guard_alloc_in(&gcu, (size_t)(n + 1) * sizeof *cu, mem);
    int64_t *slots = mc_guard_alloc_in(&gsl, (size_t)n * sizeof *slots, mem);
    uint8_t *hi = mc_guard_alloc_in(&ghi, (size_t)n, mem);
    int64_t *cu_copy = mc_session_calloc((size_t)(n + 1), sizeof *cu_copy, s);
    int64_t *slots_copy = mc_session_calloc((size_t)n, sizeof *slots_copy, s);
    uint8_t *hi_copy = mc_session_calloc((size_t)n, 1, s);
    if (xf == NULL || xcopy == NULL || xb == NULL || yb == NULL || cu == NULL || (n && (slots == NULL || hi == NULL)) ||
        cu_copy == NULL || slots_copy == NULL || hi_copy == NULL) {
        mc_error_set(s->err, MC_ERR_NOMEM, "out of memory");
        goto out;
    }
    cu[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        cu[i + 1] = cu[i] + seq[i].len;
        slots[i] = seq[i].slot;
        hi[i] = (uint8_t)(seq[i].resume ? 1 : 0);
        if (seq[i].len > 0) {
            const double *src = seq[i].x != NULL ? seq[i].x
                                                 : g->hidden_states.data + (seq[i].row * g->len + seq[i].t0) * D;
            memcpy(xf + cu[i] * D, src, (size_t)(seq[i].len * D) * sizeof *xf);
        }
    }
    mc_dtype_from_f64(s->ctx->dtype, xf, xb, nx);
    memcpy(xcopy, xb, nx * s->esz);
    memcpy(cu_copy, cu, (size_t)(n + 1) * sizeof *cu);
    memcpy(slots_copy, slots, (size_t)n * sizeof *slots);
    memcpy(hi_copy, hi, (size_t)n);
    mc_dtype_fill_nan(s->ctx->dtype, yb, nx);
    struct mc_packed_args args = {
        .n_seqs = n, .cu_seqlens = cu, .slots = slots, .has_initial_state = hi, .x = xb, .y = yb};
    struct mc_msg msg = {{0}};
    mc_isolate_enter(call);
    enum mc_backend_status st = s->ops->forward_packed(s->model, pool->h, &args, &msg);
    mc_isolate_leave();
    if (!guard_ok(s, call, &gy, "y") || !guard_ok(s, call, &gx, "x") || !guard_ok(s, call, &gcu, "cu_seqlens") ||
        !guard_ok(s, call, &gsl, "slots") || !guard_ok(s, call, &ghi, "has_initial_state") ||
        !input_unchanged(s, call, "x", xb, xcopy, nx * s->esz, s->esz) ||
        !input_unchanged(s, call, "cu_seqlens", cu, cu_copy, (size_t)(n + 1) * sizeof *cu, sizeof *cu) ||
        (n && !input_unchanged(s, call, "slots", slots, slots_copy, (size_t)n * sizeof *slots, sizeof *slots)) ||
        (n && !input_unchanged(s, call, "has_initial_state", hi, hi_copy, (size_t)n, 1)))
        goto out;
    if (st != MC_BACKEND_OK) {
        backend_failed(s, st, call, &msg);
        goto out;
    }
    mc_dtype_to_f64(s->ctx->dtype, yb, y, nx);
    rc = 0;
out:
    free(xf);
    free(xcopy);
    free(cu_copy);
    free(slots_copy);
    free(hi_copy);
    mc_guard_free(&gx);
    mc_guard_free(&gy);
    mc_guard_free(&gcu);
    mc_guard_free(&gsl);
    mc_guard_free(&ghi);
    return rc;
}

/* Views of the golden's output and cache tensors for rows [r0, r0+nrows). */
void mc_session_output_view(const struct mc_session *s, const struct mc_slice *sl, const uint8_t *valid,
                        struct mc_compare_view *v)
{
    memset(v, 0, sizeof *v);
    v->ndim = 3;
    v->dims[0] = sl->nrows;
    v->dims[1] = sl->len;
    v->dims[2] = s->shape.hidden;
    v->dim_names[0] = "batch";
    v->dim_names[1] = "token";
    v->dim_names[2] = "channel";
    v->token_axis = 1;
    v->token_offset = sl->t0;
    v->batch_offset = sl->r0;
    v->valid = valid;
}

/* Compares y [nrows][len][D] with the golden output of the slice; padding is only checked finite. */
int mc_session_check_output_against(struct mc_session *s, const struct mc_slice *sl, const double *y,
                                    const double *all, const char *name, enum mc_tensor_kind kind)
{
    const struct mc_golden *g = s->g;
    int64_t D = s->shape.hidden;
    size_t n = (size_t)(sl->nrows * sl->len * D);
    double *exp = mc_session_calloc(n, sizeof *exp, s);
    uint8_t *valid = g->mask ? mc_session_calloc((size_t)(sl->nrows * sl->len), 1, s) : NULL;
    if (exp == NULL || (g->mask && valid == NULL)) {
        free(exp);
        free(valid);
        return -1;
    }
    for (int64_t b = 0; b < sl->nrows; b++) {
        memcpy(exp + b * sl->len * D, all + ((sl->r0 + b) * g->len + sl->t0) * D, (size_t)(sl->len * D) * sizeof *exp);
        if (valid)
            memcpy(valid + b * sl->len, g->mask + (sl->r0 + b) * g->len + sl->t0, (size_t)sl->len);
    }
    struct mc_compare_view v;
    mc_session_output_view(s, sl, valid, &v);
    mc_session_compare(s, name, kind, 0, y, exp, &v);
    free(exp);
    free(valid);
    return 0;
}

int mc_session_check_output(struct mc_session *s, const struct mc_slice *sl, const double *y)
{
    if (mc_session_check_output_against(s, sl, y, s->g->output.data, "output", MC_TENSOR_OUTPUT) != 0)
        return -1;
    if (s->ref != NULL && sl->x == NULL)
        return mc_session_check_output_against(s, sl, y, s->ref->output, "ref_output", MC_TENSOR_REF_OUTPUT);
    return 0;
}

void mc_session_conv_view(const struct mc_session *s, int64_t r0, int64_t nrows, int64_t pos, struct mc_compare_view *v)
{
    memset(v, 0, sizeof *v);
    v->ndim = 3;
    v->dims[0] = nrows;
    v->dims[1] = s->shape.conv_channels;
    v->dims[2] = s->shape.conv_kernel;
    v->dim_names[0] = "batch";
    v->dim_names[1] = "channel";
    v->dim_names[2] = "tap";
    v->token_axis = -1;
    v->token_offset = pos;
    v->batch_offset = r0;
}

void mc_session_state_view(const struct mc_session *s, int64_t r0, int64_t nrows, int64_t pos, struct mc_compare_view *v)
{
    memset(v, 0, sizeof *v);
    v->ndim = 1 + s->shape.state_ndim;
    v->dims[0] = nrows;
    v->dim_names[0] = "batch";
    for (int d = 0; d < s->shape.state_ndim; d++) {
        v->dims[1 + d] = s->shape.state_dims[d];
        v->dim_names[1 + d] = s->shape.state_dim_names[d];
    }
    v->token_axis = -1;
    v->token_offset = pos;
    v->batch_offset = r0;
}

/* Reads the cache of golden rows [r0, r0+c->batch) at absolute position pos and compares it with the
 * golden when the golden holds that position. */
int mc_session_check_states(struct mc_session *s, const struct mc_session_cache *c, int64_t r0, int64_t pos)
{
    const struct mc_golden *g = s->g;
    int64_t ti = mc_golden_position_index(g, pos);
    if (ti < 0 || s->broken)
        return 0;
    int64_t nconv_row = s->shape.conv_channels * s->shape.conv_kernel;
    int64_t nstate_row = mc_family_state_elems(&s->shape);
    double *conv = mc_session_calloc((size_t)(c->batch * nconv_row), sizeof *conv, s);
    double *state = nstate_row ? mc_session_calloc((size_t)(c->batch * nstate_row), sizeof *state, s) : NULL;
    int rc = -1;
    if (conv == NULL || (nstate_row && state == NULL))
        goto out;
    if (mc_session_cache_read(s, c, conv, state) != 0)
        goto out;
    struct mc_compare_view v;
    int64_t conv_at = (ti * g->batch + r0) * nconv_row, state_at = (ti * g->batch + r0) * nstate_row;
    mc_session_conv_view(s, r0, c->batch, pos, &v);
    mc_session_compare(s, "conv_state", MC_TENSOR_CONV_STATE, 0, conv, g->conv_state.data + conv_at, &v);
    if (s->ref != NULL)
        mc_session_compare(s, "ref_conv_state", MC_TENSOR_REF_CONV_STATE, 0, conv, s->ref->conv_state + conv_at, &v);
    if (state != NULL) {
        mc_session_state_view(s, r0, c->batch, pos, &v);
        mc_session_compare(s, "recurrent_state", MC_TENSOR_RECURRENT_STATE, 0, state,
                           g->recurrent_state.data + state_at, &v);
        if (s->ref != NULL)
            mc_session_compare(s, "ref_recurrent_state", MC_TENSOR_REF_RECURRENT_STATE, 0, state,
                               s->ref->recurrent_state + state_at, &v);
    }
    rc = 0;
out:
    free(conv);
    free(state);
    return rc;
}

/* Forward + output check over a slice (y scratch owned here). */
int mc_session_step(struct mc_session *s, struct mc_session_cache *c, const struct mc_slice *sl)
{
    double *y = mc_session_calloc((size_t)(sl->nrows * sl->len * s->shape.hidden), sizeof *y, s);
    int rc = -1;
    if (y == NULL)
        return -1;
    if (mc_session_forward(s, c, sl, y) == 0 && mc_session_check_output(s, sl, y) == 0)
        rc = 0;
    free(y);
    return rc;
}

int mc_session_run_begin(struct mc_session *s, const char *label, const int64_t *vals, int n)
{
    if (s->run_label[0] != '\0')
        return 0;
    size_t cap = sizeof s->run_label;
    if (vals == NULL) {
        snprintf(s->run_label, cap, "%s", label);
        return 1;
    }
    size_t used = (size_t)snprintf(s->run_label, cap, "%s [", label);
    for (int i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(s->run_label + used, cap - used, "%s%lld", i ? ", " : "", (long long)vals[i]);
    if (used < cap)
        snprintf(s->run_label + used, cap - used, "]");
    return 1;
}

void mc_session_run_end(struct mc_session *s, int token)
{
    if (token)
        s->run_label[0] = '\0';
}

int mc_session_compare_cache(struct mc_session *s, const struct mc_session_cache *c, const struct mc_cache_compare *how,
                             const double *conv, const double *state, int64_t r0, int64_t pos)
{
    int64_t nconv = c->batch * s->shape.conv_channels * s->shape.conv_kernel;
    int64_t nstate = c->batch * mc_family_state_elems(&s->shape);
    double *cnow = mc_session_calloc((size_t)nconv, sizeof *cnow, s);
    double *snow = nstate ? mc_session_calloc((size_t)nstate, sizeof *snow, s) : NULL;
    int rc = -1;
    if (cnow != NULL && (nstate == 0 || snow != NULL) && mc_session_cache_read(s, c, cnow, snow) == 0) {
        struct mc_compare_view v;
        mc_session_conv_view(s, r0, c->batch, pos, &v);
        mc_session_compare(s, how->conv_name, how->conv_kind, how->bitwise, cnow, conv, &v);
        if (nstate) {
            mc_session_state_view(s, r0, c->batch, pos, &v);
            mc_session_compare(s, how->state_name, how->state_kind, how->bitwise, snow, state, &v);
        }
        rc = 0;
    }
    free(cnow);
    free(snow);
    return rc;
}

void mc_session_check_source(struct mc_session *s, const struct mc_session_cache *c, const double *conv,
                             const double *state, int64_t r0, int64_t pos, const char *label)
{
    int tok = mc_session_run_begin(s, label, &pos, 1);
    mc_session_check_cache_same(s, c, "snapshot", conv, state, r0, pos);
    mc_session_run_end(s, tok);
}

int mc_session_check_cache_same(struct mc_session *s, const struct mc_session_cache *c, const char *name,
                                const double *conv, const double *state, int64_t r0, int64_t pos)
{
    const struct mc_cache_compare how = {name, name, MC_TENSOR_CONV_STATE, MC_TENSOR_RECURRENT_STATE, 1};
    return mc_session_compare_cache(s, c, &how, conv, state, r0, pos);
}

void mc_session_check_row_state(struct mc_session *s, const double *conv, const double *state, int64_t slot,
                                int64_t row, int64_t pos)
{
    const struct mc_golden *g = s->g;
    int64_t ti = mc_golden_position_index(g, pos);
    if (ti < 0 || s->broken)
        return;
    int64_t nconv_row = s->shape.conv_channels * s->shape.conv_kernel;
    int64_t nstate_row = mc_family_state_elems(&s->shape);
    int64_t conv_at = (ti * g->batch + row) * nconv_row, state_at = (ti * g->batch + row) * nstate_row;
    struct mc_compare_view v;
    mc_session_conv_view(s, row, 1, pos, &v);
    mc_session_compare(s, "conv_state", MC_TENSOR_CONV_STATE, 0, conv + slot * nconv_row, g->conv_state.data + conv_at,
                       &v);
    if (s->ref != NULL)
        mc_session_compare(s, "ref_conv_state", MC_TENSOR_REF_CONV_STATE, 0, conv + slot * nconv_row,
                           s->ref->conv_state + conv_at, &v);
    if (nstate_row && state != NULL) {
        mc_session_state_view(s, row, 1, pos, &v);
        mc_session_compare(s, "recurrent_state", MC_TENSOR_RECURRENT_STATE, 0, state + slot * nstate_row,
                           g->recurrent_state.data + state_at, &v);
        if (s->ref != NULL)
            mc_session_compare(s, "ref_recurrent_state", MC_TENSOR_REF_RECURRENT_STATE, 0, state + slot * nstate_row,
                               s->ref->recurrent_state + state_at, &v);
    }
}

/* Elements [n] of size esz: 0 where now and before hold the same bytes, 1 where they differ. */
static void byte_diff(const unsigned char *now, const unsigned char *before, size_t n, size_t esz, double *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = memcmp(now + i * esz, before + i * esz, esz) == 0 ? 0.0 : 1.0;
}

void mc_session_check_row_bytes(struct mc_session *s, const char *name, const void *conv_now, const void *state_now,
                                const void *conv_before, const void *state_before, int64_t slot)
{
    if (s->broken)
        return;
    size_t esz = mc_session_export_size(s);
    int64_t nconv_row = s->shape.conv_channels * s->shape.conv_kernel;
    int64_t nstate_row = mc_family_state_elems(&s->shape);
    int64_t most = nconv_row > nstate_row ? nconv_row : nstate_row;
    double *diff = mc_session_calloc((size_t)most, sizeof *diff, s);
    double *zero = mc_session_calloc((size_t)most, sizeof *zero, s);
    if (diff == NULL || zero == NULL)
        goto out;
    size_t at = (size_t)(slot * nconv_row) * esz;
    byte_diff((const unsigned char *)conv_now + at, (const unsigned char *)conv_before + at, (size_t)nconv_row, esz,
              diff);
    struct mc_compare_view v;
    mc_session_conv_view(s, slot, 1, 0, &v);
    mc_session_compare(s, name, MC_TENSOR_CONV_STATE, 1, diff, zero, &v);
    if (nstate_row && state_now != NULL && state_before != NULL) {
        at = (size_t)(slot * nstate_row) * esz;
        byte_diff((const unsigned char *)state_now + at, (const unsigned char *)state_before + at, (size_t)nstate_row,
                  esz, diff);
        mc_session_state_view(s, slot, 1, 0, &v);
        mc_session_compare(s, name, MC_TENSOR_RECURRENT_STATE, 1, diff, zero, &v);
    }
out:
    free(diff);
    free(zero);
}
