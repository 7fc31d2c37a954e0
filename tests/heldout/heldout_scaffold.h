/*
 * heldout_scaffold.h — the wrapper scaffolding the third and fourth held-out sets share (set3/heldout3_plugin.c,
 * set4/heldout4_plugin.c): a backend status with its message, element access and rounding to bf16 / f16, and
 * a model descriptor copied so that a port's reading of its configuration and weights can be edited (a weight
 * rescaled, two exchanged, a configuration field changed) before the reference model is created from it. The
 * bugs stay in each set's own plugin; only this plumbing is shared. Include after mixcheck/backend.h,
 * ref_common.h and reference.h, and after the plugin's `union hb_config` (the configurations its families
 * read).
 */
#ifndef MC_HELDOUT_SCAFFOLD_H
#define MC_HELDOUT_SCAFFOLD_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixcheck/backend.h"

static inline enum mc_backend_status hb_fail(struct mc_msg *msg, enum mc_backend_status st, const char *text)
{
    if (msg != NULL)
        snprintf(msg->text, sizeof msg->text, "%s", text);
    return st;
}

/* ---- element access and rounding ------------------------------------------------------------------ */

static inline double hb_get(const void *p, enum mc_dtype dt, int64_t i)
{
    return dt == MC_DTYPE_F64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static inline void hb_set(void *p, enum mc_dtype dt, int64_t i, double v)
{
    if (dt == MC_DTYPE_F64)
        ((double *)p)[i] = v;
    else
        ((float *)p)[i] = (float)v;
}

/* v rounded to bfloat16 (round to nearest even), as a double. */
static inline double hb_round_bf16(double v)
{
    float f = (float)v;
    if (!isfinite(f))
        return f;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    bits += 0x7FFFu + ((bits >> 16) & 1u);
    bits &= 0xFFFF0000u;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* v rounded to IEEE binary16 (round to nearest even, subnormals, overflow to infinity). */
static inline double hb_round_f16(double v)
{
    if (v == 0.0 || !isfinite(v))
        return v;
    int e;
    (void)frexp(v, &e); /* |v| in [2^(e-1), 2^e) */
    const int q = e - 1 < -14 ? -24 : e - 11; /* the quantum's exponent */
    const double r = ldexp(nearbyint(ldexp(v, -q)), q);
    return fabs(r) > 65504.0 ? copysign(INFINITY, v) : r;
}

static inline void hb_round_all(void *p, enum mc_dtype dt, int64_t n, double (*rnd)(double))
{
    for (int64_t i = 0; i < n; i++)
        hb_set(p, dt, i, rnd(hb_get(p, dt, i)));
}

/* ---- model creation: an edited copy of the descriptor ------------------------------------------ */

union hb_config {
    struct mc_mamba2_config m2;
    struct mc_mamba1_config m1;
    struct mc_gdn_config gdn;
    struct mc_shortconv_config sc;
    struct mc_attention_config at;
    struct mc_lightning_config la;
    struct mc_kda_config kda;
};

#define HB_MAX_EDITS 8

/* A descriptor whose configuration and weight table are copies; edited weights get their own data. */
struct hb_desc {
    struct mc_model_desc d;
    union hb_config cfg;
    struct mc_weight *w;
    void *owned[HB_MAX_EDITS];
    int n_owned;
};

static inline void hb_desc_free(struct hb_desc *h)
{
    for (int i = 0; i < h->n_owned; i++)
        free(h->owned[i]);
    free(h->w);
    h->w = NULL;
    h->n_owned = 0;
}

static inline size_t hb_config_size(enum mc_family f)
{
    switch (f) {
    case MC_FAMILY_MAMBA2:
        return sizeof(struct mc_mamba2_config);
    case MC_FAMILY_MAMBA1:
        return sizeof(struct mc_mamba1_config);
    case MC_FAMILY_GDN:
        return sizeof(struct mc_gdn_config);
    case MC_FAMILY_SHORTCONV:
        return sizeof(struct mc_shortconv_config);
    case MC_FAMILY_LIGHTNING:
        return sizeof(struct mc_lightning_config);
    case MC_FAMILY_KDA:
        return sizeof(struct mc_kda_config);
    default:
        return sizeof(struct mc_attention_config);
    }
}

static inline int hb_desc_init(struct hb_desc *h, const struct mc_model_desc *src)
{
    memset(h, 0, sizeof *h);
    h->d = *src;
    memcpy(&h->cfg, src->config, hb_config_size(src->family));
    h->d.config = &h->cfg;
    if (src->n_weights > 0) {
        h->w = malloc((size_t)src->n_weights * sizeof *h->w);
        if (h->w == NULL)
            return -1;
        memcpy(h->w, src->weights, (size_t)src->n_weights * sizeof *h->w);
    }
    h->d.weights = h->w;
    return 0;
}

static inline int64_t hb_elems(const struct mc_weight *w)
{
    int64_t n = 1;
    for (int i = 0; i < w->ndim; i++)
        n *= w->dims[i];
    return n;
}

/* The weight `name`, its data replaced by an owned, writable copy; NULL when absent. */
static inline struct mc_weight *hb_edit(struct hb_desc *h, const char *name, size_t eb)
{
    for (int i = 0; i < h->d.n_weights; i++) {
        struct mc_weight *w = &h->w[i];
        if (strcmp(w->name, name) != 0)
            continue;
        if (h->n_owned == HB_MAX_EDITS)
            return NULL;
        const size_t bytes = (size_t)hb_elems(w) * eb;
        void *copy = malloc(bytes > 0 ? bytes : 1);
        if (copy == NULL)
            return NULL;
        memcpy(copy, w->data, bytes);
        h->owned[h->n_owned++] = copy;
        w->data = copy;
        return w;
    }
    return NULL;
}

static inline const struct mc_weight *hb_find(const struct mc_model_desc *d, const char *name)
{
    for (int i = 0; i < d->n_weights; i++)
        if (d->weights[i].name != NULL && strcmp(d->weights[i].name, name) == 0)
            return &d->weights[i];
    return NULL;
}

/* every element of weight `name` becomes a*v + b */
static inline void hb_affine(struct hb_desc *h, const char *name, enum mc_dtype dt, double a, double b)
{
    struct mc_weight *w = hb_edit(h, name, dt == MC_DTYPE_F64 ? 8 : 4);
    if (w == NULL)
        return;
    for (int64_t i = 0; i < hb_elems(w); i++)
        hb_set((void *)w->data, dt, i, a * hb_get(w->data, dt, i) + b);
}



/* The index of weight `name` in the descriptor copy's table, or -1. */
static inline int hb_index(const struct hb_desc *h, const char *name)
{
    for (int i = 0; i < h->d.n_weights; i++)
        if (h->w[i].name != NULL && strcmp(h->w[i].name, name) == 0)
            return i;
    return -1;
}

/* The data of weights a and b exchanged (same shapes: the port reads each for the other). */
static inline void hb_swap_data(struct hb_desc *h, const char *a, const char *b)
{
    const int i = hb_index(h, a), j = hb_index(h, b);
    if (i < 0 || j < 0)
        return;
    const void *t = h->w[i].data;
    h->w[i].data = h->w[j].data;
    h->w[j].data = t;
}

#endif
