/*
 * reference.h — the plain-C reference mixers, the specification every other implementation is
 * checked against (STYLE.md convention 1). Each is reached only through its ops struct
 * (mixcheck/backend.h): backend name "reference", device "cpu", dtypes f32 and f64, computing in
 * the model dtype with the exact sequential recurrence (docs/semantics.md §11).
 */
#ifndef MC_REFERENCE_H
#define MC_REFERENCE_H

#include "mixcheck/backend.h"

/* Mamba2 mixer (docs/semantics.md §2, HF Mamba2Mixer with mixcheck's semantics of §A). Static storage. */
const struct mc_backend_ops *mc_reference_mamba2_ops(void);

/* Mamba1 mixer (docs/semantics.md §3, HF MambaMixer with mixcheck's semantics of §A, multi-token cached
 * forwards included). Static storage. */
const struct mc_backend_ops *mc_reference_mamba1_ops(void);

/* LFM2 ShortConv mixer (docs/semantics.md §5, HF Lfm2ShortConv with mixcheck's semantics of §A); no
 * recurrent state. Static storage. */
const struct mc_backend_ops *mc_reference_shortconv_ops(void);

/* Gated DeltaNet mixer (docs/semantics.md §4, HF Qwen3NextGatedDeltaNet / Qwen3_5GatedDeltaNet, both weight
 * layouts, recurrent form, with mixcheck's semantics of §A). Static storage. */
const struct mc_backend_ops *mc_reference_gdn_ops(void);

/* Softmax attention with a KV cache (docs/semantics.md §12: HF Qwen3NextAttention / Qwen3_5Attention,
 * Lfm2Attention, BambaAttention; GQA, partial rotary, q/k norms, output gate), with mixcheck's
 * semantics of §A. Static storage. */
const struct mc_backend_ops *mc_reference_attention_ops(void);

/* MiniMax lightning attention (docs/semantics.md §13, HF MiniMaxLightningAttention): linear attention with a
 * constant decay per head, the exact token-by-token recurrence, with mixcheck's semantics of §A. Static
 * storage. */
const struct mc_backend_ops *mc_reference_lightning_ops(void);

/* Kimi Delta Attention (docs/semantics.md §14, HF KimiDeltaAttention): the gated delta rule with a decay per
 * key channel, recurrent form, with mixcheck's semantics of §A. Static storage. */
const struct mc_backend_ops *mc_reference_kda_ops(void);

#endif
