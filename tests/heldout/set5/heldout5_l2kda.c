/*
 * heldout5_l2kda.c — the reference kda mixer compiled a second time with the switch MC_REF_L2NORM_ADD of
 * reference/kda_impl.inc: the q/k l2 norm written x / (||x|| + eps) (eps added to the norm, outside the
 * root) instead of FLA's x / sqrt(sum x^2 + eps). Its ops are hb5_l2add_kda_ops(); everything else is the
 * reference's own code.
 */
#define MC_REF_L2NORM_ADD 1
#define mc_reference_kda_ops hb5_l2add_kda_ops
#include "kda.c"
