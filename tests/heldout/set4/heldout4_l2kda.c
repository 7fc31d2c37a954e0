/*
 * heldout4_l2kda.c — the reference kda mixer compiled a second time with the switch MC_REF_L2NORM_MAX of
 * reference/kda_impl.inc: the q/k l2 norm written as a ggml-style port writes it, x / max(||x||, eps) (eps
 * outside the root) instead of x / sqrt(sum x^2 + eps). Its ops are hb4_l2max_kda_ops(), which
 * heldout4_plugin.c serves for the l2-norm bugs of this set; everything else is the reference's own code.
 */
#define MC_REF_L2NORM_MAX 1
#define mc_reference_kda_ops hb4_l2max_kda_ops
#include "kda.c"
