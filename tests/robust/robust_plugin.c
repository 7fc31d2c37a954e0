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
 */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mixcheck/backend.h"
#include "reference.h"

enum misbehaviour { SEGV, ABORT, HANG, OVERRUN, NAN_OUT, SCRIBBLE, EXIT, N_KINDS };

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
    case N_KINDS:
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

__attribute__((visibility("default"))) const struct mc_backend_ops *const *
mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static const struct mc_backend_ops *all[N_KINDS];
    static const char *names[N_KINDS] = {"robust_segv",     "robust_abort", "robust_hang",    "robust_overrun",
                                         "robust_nan",      "robust_scribble", "robust_exit"};
    enum mc_backend_status (*fwd[N_KINDS])(struct mc_model *, struct mc_cache *, const struct mc_forward_args *,
                                           struct mc_msg *) = {fwd_segv, fwd_abort, fwd_hang, fwd_overrun,
                                                               fwd_nan,  fwd_scribble, fwd_exit};
    for (int k = 0; k < N_KINDS; k++) {
        ops[k] = *mc_reference_mamba2_ops();
        ops[k].name = names[k];
        ops[k].dtypes = MC_DTYPE_BIT(MC_DTYPE_F32);
        ops[k].forward = fwd[k];
        all[k] = &ops[k];
    }
    ops[OVERRUN].model_create = create_overrun;
    *count = N_KINDS;
    *abi_version = MIXCHECK_ABI_VERSION;
    return all;
}
