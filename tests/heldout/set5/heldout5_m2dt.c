/*
 * heldout5_m2dt.c — the reference mamba2 mixer compiled a second time with the switch MC_REF_M2_DT_FIRST of
 * reference/mamba2_impl.inc, bound to the flag hb5_dt_first of heldout5_plugin.c: while the flag is set,
 * every token of a forward takes the dt of its row's first real token (what a port computes when it takes
 * the single-step branch's dt for a multi-token forward on a primed cache). Its ops are
 * hb5_dtfirst_mamba2_ops(); everything else is the reference's own code.
 */
extern int hb5_dt_first;
#define MC_REF_M2_DT_FIRST hb5_dt_first
#define mc_reference_mamba2_ops hb5_dtfirst_mamba2_ops
#include "mamba2.c"
