/*
 * conv.h — the reference depthwise causal conv1d over one segment of tokens (docs/semantics.md §0.4, §11
 * `conv_segment`), shared by every family: Mamba2 and Mamba1 (with SiLU), GDN (SiLU), LFM2
 * ShortConv (no activation).
 *
 * Upstream semantics: PyTorch `nn.Conv1d(C, C, K, groups=C, padding=K-1)` keeping the first L
 * outputs (cross-correlation, w[c][K-1] multiplies the current token), seeded with a K-column
 * window of left context exactly as HF's cached path `cat(conv_state, x)` and
 * causal-conv1d's `causal_conv1d_update` do. A zero window gives the fresh-prefill conv; L == 1
 * gives the single-token update.
 *
 * Mask (mixcheck's semantics, docs/semantics.md §A.4): a token with mask[t] == 0 is skipped — it does not
 * enter the window, so the window after it equals the window before it — and its output row is 0.
 *
 * Dimension letters: L tokens in the segment, C channels, K kernel width.
 */
#ifndef MC_REFERENCE_CONV_H
#define MC_REFERENCE_CONV_H

#include <stdint.h>

/*
 * One batch row. For every real token t, in order: the window shifts left by one, x[t] enters at
 * column K-1, and
 *   out[t][c] = act( bias[c] + Σ_{k<K} weight[c][k] · window[c][k] ),   act = SiLU or identity.
 *
 *   len        L >= 0
 *   channels   C >= 1
 *   kernel     K >= 1
 *   x          [L][x_stride]   pre-conv input; channel c of token t is x[t*x_stride + c]
 *   x_stride   >= C, in elements (lets a caller read channels out of a wider projection row)
 *   mask       [L] or NULL     0 = padding (skipped, output row 0); NULL = all real
 *   window     [C][K]          in/out: the last K pre-conv inputs, oldest first (CONV-INV)
 *   weight     [C][K]          conv1d.weight [C][1][K]
 *   bias       [C] or NULL
 *   silu       nonzero: SiLU after the bias
 *   out        [L][out_stride] out[t*out_stride + c]; must not overlap x or window
 *   out_stride >= C, in elements
 */
void mc_conv_segment_f32(int64_t len, int64_t channels, int64_t kernel, const float *x, int64_t x_stride,
                         const uint8_t *mask, float *window, const float *weight, const float *bias, int silu,
                         float *out, int64_t out_stride);

/* The same in double precision. */
void mc_conv_segment_f64(int64_t len, int64_t channels, int64_t kernel, const double *x, int64_t x_stride,
                         const uint8_t *mask, double *window, const double *weight, const double *bias, int silu,
                         double *out, int64_t out_stride);

#endif
