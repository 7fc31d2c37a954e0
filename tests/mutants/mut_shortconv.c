/*
 * mut_shortconv.c — a plain f32 LFM2 ShortConv mixer (docs/semantics.md §5, mixcheck's semantics of §A) for
 * the mutant library, with the old HF cache's decode (8.9): the single-token path rolls the window
 * by one and writes the new column at min(cache_position, K-1) instead of K-1, which is wrong after a
 * prefill shorter than K-1. With MUT_NONE it computes what reference/shortconv.c computes; a masked
 * token is skipped and its output row is out_proj.bias.
 *
 * Dimension letters: L tokens, D hidden (= conv channels), K conv width, 3D in_proj rows (B | C | x).
 */
#include <stdlib.h>
#include <string.h>

#include "mutants.h"

struct sc {
    int64_t D, K;
    float *w_in, *b_in;     /* [3D][D], [3D] or NULL */
    float *w_conv, *b_conv; /* [D][K], [D] or NULL */
    float *w_out, *b_out;   /* [D][D], [D] or NULL */
};

static void sc_destroy(void *impl)
{
    struct sc *m = impl;
    if (m == NULL)
        return;
    free(m->w_in);
    free(m->b_in);
    free(m->w_conv);
    free(m->b_conv);
    free(m->w_out);
    free(m->b_out);
    free(m);
}

static enum mc_backend_status sc_create(const struct mc_model_desc *d, struct mc_model *model, struct mc_msg *msg)
{
    const struct mc_shortconv_config *c = d->config;
    if (c->hidden_size < 1 || c->conv_kernel < 1)
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant shortconv: inconsistent configuration");
    struct sc *m = calloc(1, sizeof *m);
    if (m == NULL)
        return mut_fail(msg, MC_BACKEND_NOMEM, "mutant shortconv: out of memory");
    model->impl = m;
    m->D = c->hidden_size;
    m->K = c->conv_kernel;
    const int64_t D = m->D;
    int miss;
    m->w_in = mut_weight(d, "in_proj.weight", 3 * D * D, &miss, msg);
    m->w_conv = mut_weight(d, "conv.weight", D * m->K, &miss, msg);
    m->w_out = mut_weight(d, "out_proj.weight", D * D, &miss, msg);
    int ok = m->w_in && m->w_conv && m->w_out;
    if (ok && c->conv_bias) {
        m->b_in = mut_weight(d, "in_proj.bias", 3 * D, &miss, msg);
        m->b_conv = mut_weight(d, "conv.bias", D, &miss, msg);
        m->b_out = mut_weight(d, "out_proj.bias", D, &miss, msg);
        ok = m->b_in && m->b_conv && m->b_out;
    }
    if (!ok)
        return MC_BACKEND_INVALID;
    model->D = D;
    model->win_elems = D * m->K;
    model->state_elems = 0;
    model->chunk = 0;
    return MC_BACKEND_OK;
}

static enum mc_backend_status sc_segment(const struct mc_model *model, float *win, float *st, const float *x,
                                         const uint8_t *mask, int64_t L, float *y, const struct mut_seg *seg,
                                         struct mc_msg *msg)
{
    (void)st;
    const struct sc *m = model->impl;
    const int64_t D = m->D, K = m->K;
    /* 8.9: the old cache's single-token update (roll, then write at the clamped cache_position) */
    const int old_decode = model->fault == MUT_SHORT_PREFILL_ROLL && seg->primed && L == 1;
    float *bcx = malloc((size_t)(L * 3 * D) * sizeof *bcx); /* [L][3D]: B | C | x */
    float *yc = malloc((size_t)(L * D) * sizeof *yc);       /* [L][D]: C * conv(Bx) */
    if (bcx == NULL || yc == NULL) {
        free(bcx);
        free(yc);
        return mut_fail(msg, MC_BACKEND_NOMEM, "mutant shortconv: out of memory for L=%lld", (long long)L);
    }
    mut_linear(x, L, D, m->w_in, m->b_in, 3 * D, bcx);
    for (int64_t t = 0; t < L; t++) {
        const float *r = bcx + t * 3 * D;
        for (int64_t c = 0; c < D; c++) {
            float *w = win + c * K;
            if (mask != NULL && !mask[t]) {
                yc[t * D + c] = 0.0f;
                continue;
            }
            const float bx = r[c] * r[2 * D + c];
            if (old_decode) {
                const float first = w[0];
                memmove(w, w + 1, (size_t)(K - 1) * sizeof *w);
                w[K - 1] = first; /* roll(-1) wraps the oldest column around */
                w[seg->pos < K - 1 ? seg->pos : K - 1] = bx;
            } else {
                memmove(w, w + 1, (size_t)(K - 1) * sizeof *w);
                w[K - 1] = bx;
            }
            float acc = m->b_conv ? m->b_conv[c] : 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc += m->w_conv[c * K + k] * w[k];
            yc[t * D + c] = r[D + c] * acc;
        }
    }
    mut_linear(yc, L, D, m->w_out, m->b_out, D, y);
    free(bcx);
    free(yc);
    return MC_BACKEND_OK;
}

const struct mut_family mut_shortconv_family = {
    .family = MC_FAMILY_SHORTCONV,
    .create = sc_create,
    .destroy = sc_destroy,
    .segment = sc_segment,
};
