/*
 * conv.c — reference depthwise causal conv1d over a segment (conv.h): plain loops, one body
 * (conv_impl.inc) instantiated for float and double.
 */
#include "conv.h"

#include <math.h>

#define REAL float
#define CONV_FN mc_conv_segment_f32
#define R_EXP expf
#include "conv_impl.inc"
#undef REAL
#undef CONV_FN
#undef R_EXP

#define REAL double
#define CONV_FN mc_conv_segment_f64
#define R_EXP exp
#include "conv_impl.inc"
#undef REAL
#undef CONV_FN
#undef R_EXP
