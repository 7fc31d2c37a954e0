/*
 * conv.c — reference depthwise causal conv1d over a segment (conv.h): plain loops, one body
 * (conv_impl.inc) instantiated for float and double.
 */
#include "conv.h"

#include <math.h>

#define REF_IMPL "conv_impl.inc"
#include "ref_instantiate.inc"
#undef REF_IMPL
