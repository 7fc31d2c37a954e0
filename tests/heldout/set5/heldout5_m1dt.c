/*
 * heldout5_m1dt.c — the reference mamba1 mixer compiled a second time with the switch MC_REF_M1_DT_FIRST of
 * reference/mamba1_impl.inc, bound to the flag hb5_dt_first of heldout5_plugin.c: while the flag is set,
 * every token of a forward takes the dt (dt_proj of its x_proj slice) of its row's first real token. Its
 * ops are hb5_dtfirst_mamba1_ops(); everything else is the reference's own code.
 */
extern int hb5_dt_first;
#define MC_REF_M1_DT_FIRST hb5_dt_first
#define mc_reference_mamba1_ops hb5_dtfirst_mamba1_ops
#include "mamba1.c"
