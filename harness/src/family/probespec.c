/* probespec.c — see probespec.h. */
#include "family/probespec.h"

/* ---- the family tables ------------------------------------------------------------------------ */

static struct mc_probe_spec spec1(const char *name, int64_t d0, const char *n0)
{
    return (struct mc_probe_spec){.name = name, .ndim = 1, .dims = {d0}, .dim_names = {n0}};
}

static struct mc_probe_spec spec2(const char *name, int64_t d0, const char *n0, int64_t d1, const char *n1)
{
    return (struct mc_probe_spec){.name = name, .ndim = 2, .dims = {d0, d1}, .dim_names = {n0, n1}};
}

int mc_probe_specs(const struct mc_family_config *cfg, struct mc_probe_spec out[MC_PROBE_MAX])
{
    int n = 0;
    switch (cfg->family) {
    case MC_FAMILY_STACK: /* a whole model: no mixer of its own */
        break;
    case MC_FAMILY_MAMBA2: {
        const struct mc_mamba2_config *c = &cfg->u.mamba2;
        const int64_t inner = c->num_heads * c->head_dim;
        out[n++] = spec1("conv_out", inner + 2 * c->n_groups * c->state_size, "channel");
        out[n++] = spec1("dt", c->num_heads, "head");
        out[n++] = spec2("B", c->n_groups, "group", c->state_size, "state");
        out[n++] = spec2("C", c->n_groups, "group", c->state_size, "state");
        out[n++] = spec1("scan_out", inner, "channel");
        out[n++] = spec1("norm_in", inner, "channel");
        break;
    }
    case MC_FAMILY_MAMBA1: {
        const struct mc_mamba1_config *c = &cfg->u.mamba1;
        out[n++] = spec1("conv_out", c->intermediate_size, "channel");
        out[n++] = spec1("dt", c->intermediate_size, "channel");
        out[n++] = spec1("B", c->state_size, "state");
        out[n++] = spec1("C", c->state_size, "state");
        out[n++] = spec1("scan_out", c->intermediate_size, "channel");
        out[n++] = spec1("norm_in", c->intermediate_size, "channel");
        break;
    }
    case MC_FAMILY_GDN: {
        const struct mc_gdn_config *c = &cfg->u.gdn;
        out[n++] = spec1("conv_out", 2 * c->num_key_heads * c->key_head_dim + c->num_value_heads * c->value_head_dim,
                         "channel");
        out[n++] = spec1("beta", c->num_value_heads, "head");
        out[n++] = spec1("g", c->num_value_heads, "head");
        out[n++] = spec2("q", c->num_key_heads, "key_head", c->key_head_dim, "key");
        out[n++] = spec2("k", c->num_key_heads, "key_head", c->key_head_dim, "key");
        out[n++] = spec2("core_out", c->num_value_heads, "head", c->value_head_dim, "value");
        break;
    }
    case MC_FAMILY_SHORTCONV: {
        const struct mc_shortconv_config *c = &cfg->u.shortconv;
        out[n++] = spec1("conv_in", c->hidden_size, "channel");
        out[n++] = spec1("conv_out", c->hidden_size, "channel");
        break;
    }
    case MC_FAMILY_ATTENTION: /* no stages defined (docs/scenarios.md §1.3) */
    case MC_FAMILY_LIGHTNING:
    case MC_FAMILY_KDA:
        break;
    }
    return n;
}

int mc_probes_capable(const struct mc_backend_ops *ops)
{
    return ops != NULL && (ops->caps & MC_CAP_PROBES) && ops->probe_enable != NULL && ops->probe_read != NULL;
}
