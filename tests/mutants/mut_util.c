/* mut_util.c — weight lookup, bf16 conversion and small math helpers of the mutant library. */
#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mutants.h"

enum mc_backend_status mut_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
{
    if (msg != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg->text, sizeof msg->text, fmt, ap);
        va_end(ap);
    }
    return st;
}

float mut_bf16_to_f32(uint16_t v)
{
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t mut_f32_to_bf16(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if (isnan(v))
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);           /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float mut_bf16_round(float v)
{
    return mut_bf16_to_f32(mut_f32_to_bf16(v));
}

float *mut_weight(const struct mc_model_desc *d, const char *name, int64_t elems, int *missing, struct mc_msg *msg)
{
    *missing = 0;
    for (int32_t i = 0; i < d->n_weights; i++) {
        const struct mc_weight *w = &d->weights[i];
        if (w->name == NULL || strcmp(w->name, name) != 0)
            continue;
        int64_t n = 1;
        for (int k = 0; k < w->ndim && k < MC_MAX_DIMS; k++)
            n *= w->dims[k];
        if (n != elems || w->data == NULL) {
            mut_fail(msg, MC_BACKEND_INVALID, "mutant: weight '%s' has %lld elements, expected %lld", name,
                     (long long)n, (long long)elems);
            return NULL;
        }
        float *out = malloc((size_t)n * sizeof *out);
        if (out == NULL) {
            mut_fail(msg, MC_BACKEND_NOMEM, "mutant: out of memory for weight '%s'", name);
            return NULL;
        }
        if (d->dtype == MC_DTYPE_BF16) {
            const uint16_t *src = w->data;
            for (int64_t j = 0; j < n; j++)
                out[j] = mut_bf16_to_f32(src[j]);
        } else {
            memcpy(out, w->data, (size_t)n * sizeof *out);
        }
        return out;
    }
    *missing = 1;
    mut_fail(msg, MC_BACKEND_INVALID, "mutant: missing weight '%s'", name);
    return NULL;
}

void mut_linear(const float *x, int64_t M, int64_t in, const float *W, const float *b, int64_t out, float *y)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)out, (int)in, 1.0f, x, (int)in, W, (int)in,
                0.0f, y, (int)out);
    if (b != NULL)
        for (int64_t r = 0; r < M; r++)
            for (int64_t o = 0; o < out; o++)
                y[r * out + o] += b[o];
}

float mut_silu(float v)
{
    return v / (1.0f + expf(-v));
}

float mut_softplus(float v)
{
    return v > 20.0f ? v : log1pf(expf(v));
}

float *mut_probe_slice(const struct mc_model *m, const char *name, int ndim, const int64_t *dims)
{
    struct mut_probes *p = m->probes;
    if (p == NULL || !p->on || p->failed)
        return NULL;
    int64_t inner = 1;
    for (int i = 0; i < ndim; i++)
        inner *= dims[i];
    int k = 0;
    while (k < p->n && strcmp(p->p[k].name, name) != 0)
        k++;
    if (k == p->n) {
        if (k == MUT_MAX_PROBES || ndim > MC_MAX_DIMS - 2) {
            p->failed = 1;
            return NULL;
        }
        const size_t n = (size_t)(p->B * p->L * inner);
        if (p->cap[k] < n) {
            float *nb = realloc(p->buf[k], (n ? n : 1) * sizeof *nb);
            if (nb == NULL) {
                p->failed = 1;
                return NULL;
            }
            p->buf[k] = nb;
            p->cap[k] = n;
        }
        memset(p->buf[k], 0, n * sizeof *p->buf[k]);
        struct mc_probe *q = &p->p[k];
        memset(q, 0, sizeof *q);
        q->name = name;
        q->ndim = 2 + ndim;
        q->dims[0] = p->B;
        q->dims[1] = p->L;
        for (int i = 0; i < ndim; i++)
            q->dims[2 + i] = dims[i];
        q->data = p->buf[k];
        p->n++;
    }
    return p->buf[k] + (p->row * p->L + p->t0) * inner;
}
