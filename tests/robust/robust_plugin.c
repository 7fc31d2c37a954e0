/*
 * robust_plugin.c — misbehaving Mamba2 backends for test_robust: each runs the reference and then
 * misbehaves in one way a port under development does. The harness must report each as the failure
 * of its own check, with the cause, and go on.
 *   robust_segv      dies with SIGSEGV inside forward
 *   robust_abort     calls abort() inside forward
 *   robust_hang      never returns from forward
 *   robust_overrun   writes one element past the end of its output
 *   robust_nan       returns a NaN in its output
 *   robust_scribble  modifies its input x
 *   robust_exit      calls exit(0) inside forward (a library must never exit)
 *   robust_leftover  state left in the process: a model made after another was destroyed perturbs its
 *                    output (a static flag the port's destroy sets and its create never resets), so
 *                    each check passes alone and fails after another check ran in its process
 *   robust_segv_packed, robust_segv_copy, robust_segv_create
 *                    die with SIGSEGV inside forward_packed, cache_copy, model_create (the crash report
 *                    names the entry point)
 * and a set of read overruns, each a bug that leaves the output all but unchanged (so only the
 * guards can tell; test_robust runs them under each MIXCHECK_GUARD_MODE):
 *   robust_read_x_end       adds x one element past its end into the last output
 *   robust_read_x_before    adds x one element before its start into the first output
 *   robust_read_x_discard   loads x one element past its end and discards it (a vector tail)
 *   robust_read_mask_end    reads the mask one past its end as "is the next token padding"
 *   robust_read_weight_end  model_create folds D one element past its end into D's last element
 *   robust_read_x_64        adds x at 64 bytes past its end into the last output
 *   robust_read_x_4k        adds x at 4 KiB past its end into the last output
 */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixcheck/backend.h"
#include "reference.h"

enum misbehaviour {
    SEGV, ABORT, HANG, OVERRUN, NAN_OUT, SCRIBBLE, EXIT,
    READ_X_END, READ_X_BEFORE, READ_X_DISCARD, READ_MASK_END, READ_WEIGHT_END, READ_X_64, READ_X_4K,
    SEGV_PACKED, SEGV_COPY, SEGV_CREATE, LEFTOVER,
    N_KINDS
};

static struct mc_backend_ops ops[N_KINDS];

static enum mc_backend_status misbehave(enum misbehaviour kind, struct mc_model *m, struct mc_cache *c,
                                        const struct mc_forward_args *a, struct mc_msg *msg)
{
    enum mc_backend_status st = mc_reference_mamba2_ops()->forward(m, c, a, msg);
    size_t n = (size_t)(a->batch * a->len);
    float *y = a->y;
    switch (kind) {
    case SEGV:
        raise(SIGSEGV);
        break;
    case ABORT:
        abort();
    case HANG:
        for (;;)
            pause();
    case OVERRUN: /* fwd_overrun below: it needs the hidden size */
    case NAN_OUT:
        y[n / 2] = 0.0f / 0.0f;
        break;
    case SCRIBBLE:
        ((float *)(uintptr_t)a->x)[0] += 1.0f;
        break;
    case EXIT:
        exit(0);
    default: /* the overruns below: they need the hidden size */
        break;
    }
    return st;
}

#define WRAP(K, fn)                                                                                                  \
    static enum mc_backend_status fn(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,      \
                                     struct mc_msg *msg)                                                           \
    {                                                                                                                \
        return misbehave(K, m, c, a, msg);                                                                         \
    }
WRAP(SEGV, fwd_segv)
WRAP(ABORT, fwd_abort)
WRAP(HANG, fwd_hang)
WRAP(NAN_OUT, fwd_nan)
WRAP(SCRIBBLE, fwd_scribble)
WRAP(EXIT, fwd_exit)

/* The overrun needs the hidden size, which only model_create sees: remember it per model. */
static int64_t overrun_hidden;

static enum mc_backend_status create_overrun(const struct mc_model_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    overrun_hidden = ((const struct mc_mamba2_config *)d->config)->hidden_size;
    return mc_reference_mamba2_ops()->model_create(d, m, msg);
}

static enum mc_backend_status fwd_overrun(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                          struct mc_msg *msg)
{
    enum mc_backend_status st = mc_reference_mamba2_ops()->forward(m, c, a, msg);
    float *y = a->y;
    y[a->batch * a->len * overrun_hidden + 3] = 1.0f; /* 4th element past the end */
    return st;
}

/* The read overruns, f32 only. `past` is the element read counted from the end of x (0: the first
 * element after it), or before its start when negative. */
static enum mc_backend_status read_x(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                     struct mc_msg *msg, int64_t past, int used)
{
    enum mc_backend_status st = mc_reference_mamba2_ops()->forward(m, c, a, msg);
    int64_t n = a->batch * a->len * overrun_hidden;
    const volatile float *x = a->x; /* volatile: the discarded load stays a load */
    float *y = a->y;
    float v = past >= 0 ? x[n + past] : x[past];
    if (used)
        y[past >= 0 ? n - 1 : 0] += v;
    return st;
}

static enum mc_backend_status fwd_read_x_end(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                             struct mc_msg *msg)
{
    return read_x(m, c, a, msg, 0, 1);
}

static enum mc_backend_status fwd_read_x_before(struct mc_model *m, struct mc_cache *c,
                                                const struct mc_forward_args *a, struct mc_msg *msg)
{
    return read_x(m, c, a, msg, -1, 1);
}

static enum mc_backend_status fwd_read_x_discard(struct mc_model *m, struct mc_cache *c,
                                                 const struct mc_forward_args *a, struct mc_msg *msg)
{
    return read_x(m, c, a, msg, 0, 0);
}

static enum mc_backend_status fwd_read_x_64(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                            struct mc_msg *msg)
{
    return read_x(m, c, a, msg, 64 / (int64_t)sizeof(float), 1);
}

static enum mc_backend_status fwd_read_x_4k(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                            struct mc_msg *msg)
{
    return read_x(m, c, a, msg, 4096 / (int64_t)sizeof(float), 1);
}

/* "Is the token after the last one padding?": a mask byte read as a flag, never as a number. */
static enum mc_backend_status fwd_read_mask_end(struct mc_model *m, struct mc_cache *c,
                                                const struct mc_forward_args *a, struct mc_msg *msg)
{
    enum mc_backend_status st = mc_reference_mamba2_ops()->forward(m, c, a, msg);
    int64_t n = a->batch * a->len;
    float *y = a->y;
    if (a->mask != NULL && a->mask[n] == 0)
        y[n * overrun_hidden - 1] = 0.0f;
    return st;
}

/* Copies the weights, folding D[H] (one past D's end) into D[H-1], as a loop with <= would. */
static enum mc_backend_status create_read_weight_end(const struct mc_model_desc *d, struct mc_model **m,
                                                     struct mc_msg *msg)
{
    struct mc_weight w[32];
    float dskip[64];
    if (d->n_weights > 32)
        return mc_reference_mamba2_ops()->model_create(d, m, msg);
    struct mc_model_desc own = *d;
    for (int i = 0; i < d->n_weights; i++) {
        w[i] = d->weights[i];
        if (strcmp(w[i].name, "D") == 0 && w[i].dims[0] <= 64) {
            const float *src = w[i].data;
            int64_t h = w[i].dims[0];
            memcpy(dskip, src, (size_t)h * sizeof *dskip);
            dskip[h - 1] += src[h];
            w[i].data = dskip;
        }
    }
    own.weights = w;
    return mc_reference_mamba2_ops()->model_create(&own, m, msg);
}

/* SIGSEGV in another entry point than forward, each after the reference's own work. */
static enum mc_backend_status packed_segv(struct mc_model *m, struct mc_cache *pool, const struct mc_packed_args *a,
                                          struct mc_msg *msg)
{
    enum mc_backend_status st = mc_reference_mamba2_ops()->forward_packed(m, pool, a, msg);
    raise(SIGSEGV);
    return st;
}

static enum mc_backend_status copy_segv(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                        struct mc_msg *msg)
{
    enum mc_backend_status st = mc_reference_mamba2_ops()->cache_copy(m, dst, src, msg);
    raise(SIGSEGV);
    return st;
}

static enum mc_backend_status create_segv(const struct mc_model_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    enum mc_backend_status st = mc_reference_mamba2_ops()->model_create(d, m, msg);
    raise(SIGSEGV);
    return st;
}

/* robust_leftover's process-wide state: set by a destroy, read by the next create. */
static int leftover_destroyed, leftover_tainted;

static enum mc_backend_status create_leftover(const struct mc_model_desc *d, struct mc_model **m, struct mc_msg *msg)
{
    leftover_tainted = leftover_destroyed;
    return mc_reference_mamba2_ops()->model_create(d, m, msg);
}

static void destroy_leftover(struct mc_model *m)
{
    leftover_destroyed = 1;
    mc_reference_mamba2_ops()->model_destroy(m);
}

static enum mc_backend_status fwd_leftover(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                           struct mc_msg *msg)
{
    enum mc_backend_status st = mc_reference_mamba2_ops()->forward(m, c, a, msg);
    if (leftover_tainted && st == MC_BACKEND_OK)
        ((float *)a->y)[0] += 1.0f;
    return st;
}

__attribute__((visibility("default"))) const struct mc_backend_ops *const *
mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static const struct mc_backend_ops *all[N_KINDS];
    static const char *names[N_KINDS] = {
        "robust_segv",          "robust_abort",         "robust_hang",           "robust_overrun",
        "robust_nan",           "robust_scribble",      "robust_exit",           "robust_read_x_end",
        "robust_read_x_before", "robust_read_x_discard", "robust_read_mask_end", "robust_read_weight_end",
        "robust_read_x_64",     "robust_read_x_4k",     "robust_segv_packed",    "robust_segv_copy",
        "robust_segv_create",   "robust_leftover"};
    enum mc_backend_status (*fwd[N_KINDS])(struct mc_model *, struct mc_cache *, const struct mc_forward_args *,
                                           struct mc_msg *) = {
        fwd_segv,           fwd_abort,          fwd_hang,          fwd_overrun,   fwd_nan,       fwd_scribble,
        fwd_exit,           fwd_read_x_end,     fwd_read_x_before, fwd_read_x_discard, fwd_read_mask_end,
        mc_reference_mamba2_ops()->forward, fwd_read_x_64, fwd_read_x_4k,
        mc_reference_mamba2_ops()->forward, mc_reference_mamba2_ops()->forward, mc_reference_mamba2_ops()->forward,
        fwd_leftover};
    for (int k = 0; k < N_KINDS; k++) {
        ops[k] = *mc_reference_mamba2_ops();
        ops[k].name = names[k];
        ops[k].dtypes = MC_DTYPE_BIT(MC_DTYPE_F32);
        ops[k].forward = fwd[k];
        all[k] = &ops[k];
    }
    ops[OVERRUN].model_create = create_overrun;
    for (int k = READ_X_END; k <= READ_X_4K; k++)
        ops[k].model_create = create_overrun; /* records the hidden size */
    ops[READ_WEIGHT_END].model_create = create_read_weight_end;
    ops[SEGV_PACKED].forward_packed = packed_segv;
    ops[SEGV_COPY].cache_copy = copy_segv;
    ops[SEGV_CREATE].model_create = create_segv;
    ops[LEFTOVER].model_create = create_leftover;
    ops[LEFTOVER].model_destroy = destroy_leftover;
    *count = N_KINDS;
    *abi_version = MIXCHECK_ABI_VERSION;
    return all;
}
