/*
 * signatures.c — the bug-class signatures the diagnosis matches (diagnose.h; docs/scenarios.md §6): one
 * entry per class of docs/semantics.md §8 (mixers), §9 (serving path, S2) and §12.7 (attention), each a
 * plain-words title, a hint, the families it exists in, and weighted conditions on the facts of one case's
 * checks on one backend.
 *
 * A static table rather than a YAML file: the conditions name the harness's own scenarios and tensors, so
 * a table compiled with them cannot drift from them unnoticed (a renamed scenario is a compile error), an
 * installed binary needs no data file to find, and there is nothing to parse or fail at start. The CTest
 * diagnose_hit_rate runs every mutant through it and fails when fewer than 90 % are named right;
 * test_diagnose checks the table is well formed.
 *
 * How the weights were chosen: each class's defining observation (the scenario meant to catch it, and
 * the tensors that must pass or fail there; tests/mutants/test_mutants.c) weighs 3-4; observations that
 * separate it from its nearest neighbour 2-3; corroboration 1; "decode output passes" weighs 5 for the
 * continued-forward classes, whose bugs leave the single-token path alone. Conditions on stages
 * (MC_DC_STAGE) are unknown until a backend reports stage probes and then separate conv-side from
 * state-side faults.
 *
 * NMSE thresholds (8.2b vs 8.2a/8.3), measured with the mutants of tests/mutants on the bundled cases: in
 * Mamba2 a continued forward that lost its state history (8.2b) leaves the first_token_causality
 * consistency row at nmse 2.5e-5 .. 6e-4, one whose conv input is wrong (8.2a, 8.3a, 8.3b) at 0.23 .. 1.2:
 * 1e-2 sits between, a factor 16 or more from each side. In Gated DeltaNet the gap is narrower (8.2b
 * 2.7e-7 .. 0.20, 8.2a 0.82 .. 2.3): 0.4, weighted less. S2.9 (state stored in bf16) against 8.3c (the
 * window caching another value): a rounding-size error of the prefill caches (nmse < 1e-3) against an
 * O(1) one. Only stages (conv_out vs scan_out / core_out) separate 8.2b from 8.2a/8.3 without a size.
 */
#include "diagnosis/diagnose.h"

#define P MC_SCENARIO_PREFILL
#define DEC MC_SCENARIO_DECODE
#define CH MC_SCENARIO_CHUNKED
#define FTC MC_SCENARIO_FIRST_TOKEN_CAUSALITY
#define SV MC_SCENARIO_SPECULATIVE_VERIFY
#define LPB MC_SCENARIO_LEFT_PADDED_BATCH
#define RPB MC_SCENARIO_RIGHT_PADDED_BATCH
#define CSI MC_SCENARIO_CHUNK_SIZE_INVARIANCE
#define BI MC_SCENARIO_BATCH_INVARIANCE
#define CR MC_SCENARIO_CACHE_ROUNDTRIP
#define PP MC_SCENARIO_PACKED_PREFILL
#define SP MC_SCENARIO_SLOT_POOL
#define MS MC_SCENARIO_MIXED_STEP
#define PR MC_SCENARIO_PREFIX_RESUME
#define ANY MC_DIAG_ANY
/* scenarios named rather than enumerated: the long runs of cases/long (long_decode, length_sweep) come with
 * the serving-path scenarios; in a build without them these conditions are unknown */
#define FAILS_IN(name, t, w) {.kind = MC_DC_FAILS, .scenario = ANY, .scenario_name = (name), .tensor = (t), .weight = (w)}

#define FAM(f) (1u << (f))
#define M2 FAM(MC_FAMILY_MAMBA2)
#define M1 FAM(MC_FAMILY_MAMBA1)
#define GDN FAM(MC_FAMILY_GDN)
#define ATT FAM(MC_FAMILY_ATTENTION)
#define SSM (M2 | M1)
#define LIN FAM(MC_FAMILY_LIGHTNING)
#define KDA FAM(MC_FAMILY_KDA)
#define STATEFUL (M2 | M1 | GDN | LIN | KDA)
#define CONV (M2 | M1 | GDN | KDA | FAM(MC_FAMILY_SHORTCONV)) /* the families with a conv window (lightning's
                                                              "window" is only its token count) */

#define FAILS(s, t, w) {.kind = MC_DC_FAILS, .scenario = (s), .tensor = (t), .weight = (w)}
#define PASSES(s, t, w) {.kind = MC_DC_PASSES, .scenario = (s), .tensor = (t), .weight = (w)}
/* the same, for some families only (unknown for the others) */
#define FAILS_F(s, t, fams, w) {.kind = MC_DC_FAILS, .scenario = (s), .tensor = (t), .families = (fams), .weight = (w)}
#define PASSES_F(s, t, fams, w) {.kind = MC_DC_PASSES, .scenario = (s), .tensor = (t), .families = (fams), .weight = (w)}
#define AT_SPLIT(s, t, w) {.kind = MC_DC_AT_SPLIT, .scenario = (s), .tensor = (t), .weight = (w)}
#define AFTER_SPLIT(s, t, w) {.kind = MC_DC_AFTER_SPLIT, .scenario = (s), .tensor = (t), .weight = (w)}
#define FROM_START(s, t, w) {.kind = MC_DC_FROM_START, .scenario = (s), .tensor = (t), .weight = (w)}
#define ONLY_REDUCED(s, w) {.kind = MC_DC_ONLY_REDUCED, .scenario = (s), .weight = (w)}
#define NMSE_BELOW(s, t, v, w) {.kind = MC_DC_NMSE_BELOW, .scenario = (s), .tensor = (t), .value = (v), .weight = (w)}
#define NMSE_ABOVE(s, t, v, w) {.kind = MC_DC_NMSE_ABOVE, .scenario = (s), .tensor = (t), .value = (v), .weight = (w)}
#define NMSE_BELOW_F(s, t, v, fams, w)                                                                                 \
    {.kind = MC_DC_NMSE_BELOW, .scenario = (s), .tensor = (t), .value = (v), .families = (fams), .weight = (w)}
#define NMSE_ABOVE_F(s, t, v, fams, w)                                                                                 \
    {.kind = MC_DC_NMSE_ABOVE, .scenario = (s), .tensor = (t), .value = (v), .families = (fams), .weight = (w)}
#define NONFINITE(s, t, w) {.kind = MC_DC_NONFINITE, .scenario = (s), .tensor = (t), .weight = (w)}
#define PADDED_ROW(s, t, w) {.kind = MC_DC_PADDED_ROW, .scenario = (s), .tensor = (t), .weight = (w)}
#define RUN_FIRST(s, v, w, words) {.kind = MC_DC_RUN_FIRST, .scenario = (s), .value = (v), .weight = (w), .say = (words)}
#define RUN_LAST(s, v, w, words) {.kind = MC_DC_RUN_LAST, .scenario = (s), .value = (v), .weight = (w), .say = (words)}
#define RUN_HAS(s, txt, w, words) {.kind = MC_DC_RUN, .scenario = (s), .text = (txt), .weight = (w), .say = (words)}
#define PADDED_GOLDEN(w) {.kind = MC_DC_PADDED_GOLDEN, .scenario = ANY, .weight = (w), .must = 1, .say = ""}
#define STAGE(s, name, fams, w) {.kind = MC_DC_STAGE, .scenario = (s), .text = (name), .families = (fams), .weight = (w)}
/* the stage that sets a class apart from those sharing its other facts: without it (no probes, or another stage
 * first) the class is `possibly` at most */
#define STAGE_FOR_LIKELY(s, name, fams, w)                                                                          \
    {.kind = MC_DC_STAGE, .scenario = (s), .text = (name), .families = (fams), .weight = (w), .for_likely = 1}
/* experiments (experiment/experiment.h): the hypothesis holds (EXP), does not (EXP_NOT, weight counts when it
 * is refuted), or must hold for the class to be named (EXP_REQ) */
#define EXP(k, w) {.kind = MC_DC_EXPERIMENT, .scenario = ANY, .value = (k), .weight = (w)}
#define EXP_NOT(k, w) {.kind = MC_DC_EXP_REFUTED, .scenario = ANY, .value = (k), .weight = (w)}
#define EXP_NOT_REQ(k, w) {.kind = MC_DC_EXP_REFUTED, .scenario = ANY, .value = (k), .weight = (w), .must = 1}
#define EXP_REQ(k, w) {.kind = MC_DC_EXPERIMENT, .scenario = ANY, .value = (k), .weight = (w), .must = 1}
/* the port's own continued forward from the golden cache is right (zero_window's comparison with the golden) */
#define CONTINUED_RIGHT(w) {.kind = MC_DC_EXP_RATIO_BELOW, .scenario = ANY, .value = MC_EXP_ZERO_WINDOW, .text = "1", .weight = (w)}
/* another class's decisive experiment holds: against this class (and nothing when it does not hold) */
#define EXP_OTHER(k, w) {.kind = MC_DC_EXPERIMENT, .scenario = ANY, .value = (k), .weight = -(w), .if_true = 1}
/* a prefill on a cache with zeros imported (primed, all zero) is right: weight w when it is, -w when not */
#define PRIMED_ZERO_RIGHT(w) {.kind = MC_DC_EXP_RATIO_BELOW, .scenario = ANY, .value = MC_EXP_ZEROED_CACHE, .text = "1", .weight = (w)}
#define ON_GRID(s, t, g, w) {.kind = MC_DC_ON_GRID, .scenario = (s), .tensor = (t), .text = (g), .weight = (w)}
#define ON_GRID_REQ(s, t, g, w) {.kind = MC_DC_ON_GRID, .scenario = (s), .tensor = (t), .text = (g), .weight = (w), .must = 1}
/* the premise of a class: it is not named when the facts contradict it (false), whatever else fits; unknown
 * (the scenario did not run) leaves it in */
#define VETO_PASSES(s, t, w) {.kind = MC_DC_PASSES, .scenario = (s), .tensor = (t), .weight = (w), .veto = 1}
#define VETO_FAILS(s, t, w) {.kind = MC_DC_FAILS, .scenario = (s), .tensor = (t), .weight = (w), .veto = 1}
/* a fresh-prefill class whose wrong value enters every token (a head mapping, a norm, a constant) fails from
 * token 0: a prefill right up to a later token (row 0 right, a chunk boundary inside the forward) is something
 * else */
#define VETO_FROM_START(s, t, fams, w) {.kind = MC_DC_FROM_START, .scenario = (s), .tensor = (t), .families = (fams), .weight = (w), .veto = 1}
/* a wrong head, group or norm group is a wrong input to every token: an O(1) error of the prefill's output, never
 * one an epsilon could give (nmse under 1e-6; the l2-norm epsilon placement of the fourth held-out set: 3e-11 ..
 * 1e-10) */
#define VETO_LARGE(s, t) {.kind = MC_DC_NMSE_ABOVE, .scenario = (s), .tensor = (t), .value = 1e-6, .weight = 1, .veto = 1}
#define SHORT_SPLIT(s, w) {.kind = MC_DC_SHORT_SPLIT, .scenario = (s), .weight = (w)}
#define VETO_SHORT_SPLIT(s, w) {.kind = MC_DC_SHORT_SPLIT, .scenario = (s), .weight = (w), .veto = 1}
/* a required condition: the class is named only when it holds */
#define REQ(kind_, s, t, w) {.kind = (kind_), .scenario = (s), .tensor = (t), .weight = (w), .must = 1}

const struct mc_signature mc_signatures[] = {
    /* ---- continued forwards (multi-token forward on a primed cache) --------------------------------- */
    /* the upstream bug itself (HF Mamba2 before #46084): the single-token branch chosen from the cache state
     * alone, so an L-token forward on any primed cache — even an all-zero one, whose math is the fresh
     * prefill's — mixes its tokens as one step: row 0 already sees the later tokens of the call */
    {"8.1", "a multi-token forward on a primed cache takes the single-token path (the branch chosen from the cache "
            "state alone: the first token's dt, one step, no initial state for the scan)",
     "case (b) of the forward: choose the single-step branch only for L == 1, run the chunked scan from the cached "
     "state for L > 1 (docs/semantics.md §2.5)",
     STATEFUL,
     {REQ(MC_DC_AT_SPLIT, FTC, "consistency", 3), AT_SPLIT(FTC, "distractor", 4), VETO_PASSES(P, NULL, 3),
      PASSES(DEC, "output", 5), FAILS(CH, "output", 2), FAILS(CH, "recurrent_state", 2), FAILS(FTC, "output", 2),
      FAILS(SV, NULL, 1), PRIMED_ZERO_RIGHT(-4), EXP(MC_EXP_GOLDEN_STATE_DECODE, 1),
      EXP_OTHER(MC_EXP_ZERO_WINDOW, 6), EXP_OTHER(MC_EXP_ZERO_STATE, 6)}},
    {"8.1a", "a multi-token forward on a primed cache uses the dt of its first token for every row",
     "case (b) of the forward: dt must be computed per token, not taken from token 0 (the single-step branch)",
     SSM,
     {REQ(MC_DC_AFTER_SPLIT, FTC, "output", 4), PASSES(FTC, "consistency", 2), PASSES(FTC, "conv_state", 3),
      FAILS(FTC, "recurrent_state", 1), PASSES(CH, "conv_state", 2), FAILS(CH, "output", 1), VETO_PASSES(P, NULL, 2),
      PASSES(MC_SCENARIO_DECODE, "output", 1), STAGE(FTC, "dt", SSM, 3), CONTINUED_RIGHT(-4)}},
    {"8.1b", "outputs of a multi-token forward are right, but the cache is advanced as if only its first token "
             "was consumed",
     "the window and state written back after a forward of L > 1 tokens: shift by L, scan all L",
     CONV,
     {REQ(MC_DC_PASSES, FTC, "output", 4), FAILS(FTC, "conv_state", 3), FAILS(FTC, "recurrent_state", 1),
      FAILS(CH, "output", 1), VETO_PASSES(P, NULL, 2), PASSES(DEC, "output", 1), PASSES(FTC, "consistency", 1)}},
    {"8.1c", "every row of a multi-token forward is stepped from the same cached window and state (no chaining)",
     "case (b): row t must start from the window and state after row t-1, not from the cache",
     CONV,
     {REQ(MC_DC_AFTER_SPLIT, FTC, "output", 4), PASSES(FTC, "consistency", 2), FAILS(FTC, "conv_state", 3),
      PASSES(FTC, "distractor", 1), VETO_PASSES(P, NULL, 2), PASSES(DEC, "output", 1), FAILS(CH, "output", 1),
      CONTINUED_RIGHT(-4)}},
    {"8.2a", "multi-token forward does not start from the cached conv window",
     "case (b): the conv of a continued forward must run over cat(cached window, new tokens)",
     CONV & ~M1, /* Mamba1: 8.7 */
     {AT_SPLIT(FTC, "consistency", 2), AT_SPLIT(FTC, "output", 1), VETO_PASSES(P, NULL, 3), PASSES(DEC, "output", 5),
      FAILS(CH, "conv_state", 3), PASSES(FTC, "conv_state", 1), REQ(MC_DC_FAILS, CH, "output", 2),
      FAILS(FTC, "consistency", 2),
      NMSE_ABOVE_F(FTC, "consistency", 1e-2, SSM, 1), NMSE_ABOVE_F(FTC, "consistency", 0.4, GDN, 1),
      STAGE(FTC, "conv_out", 0, 3), EXP(MC_EXP_ZERO_WINDOW, 6), FAILS(FTC, "output", 2),
      FAILS_F(CH, "recurrent_state", STATEFUL, 2), CONTINUED_RIGHT(-4), EXP_OTHER(MC_EXP_ZERO_STATE, 6)}},
    {"8.2b", "multi-token forward starts the scan from a zero state (the cached window is kept)",
     "case (b): the chunked scan of a continued forward must take the cached state as its initial state",
     STATEFUL & ~M1, /* Mamba1: 8.7 */
     {AT_SPLIT(FTC, "consistency", 2), VETO_PASSES(P, NULL, 3), PASSES(DEC, "output", 5), PASSES(CH, "conv_state", 2),
      PASSES(FTC, "conv_state", 1), REQ(MC_DC_FAILS, CH, "output", 2), FAILS(CH, "recurrent_state", 1),
      FAILS(FTC, "consistency", 2),
      NMSE_BELOW_F(FTC, "consistency", 1e-2, SSM, 3), NMSE_BELOW_F(FTC, "consistency", 0.4, GDN, 2),
      STAGE(FTC, "scan_out", SSM, 3), STAGE(FTC, "core_out", GDN, 3), EXP(MC_EXP_ZERO_STATE, 6),
      FAILS(FTC, "output", 2), CONTINUED_RIGHT(-4), EXP_OTHER(MC_EXP_ZERO_WINDOW, 6)}},
    {"8.3", "the conv of a multi-token forward on a primed cache is sliced wrong (first L instead of last L "
            "outputs of conv(cat(W, x)), or off by one)",
     "case (b): keep the last L outputs of the conv over cat(window, x), K-1 cached columns, K taps",
     CONV,
     {AT_SPLIT(FTC, "consistency", 2), VETO_PASSES(P, NULL, 3), PASSES(DEC, "output", 5), PASSES(CH, "conv_state", 2),
      PASSES(FTC, "conv_state", 1), REQ(MC_DC_FAILS, CH, "output", 2),
      /* a wrong slice is wrong from the continued forward's first row: the decode-step consistency fails */
      REQ(MC_DC_FAILS, FTC, "consistency", 2),
      NMSE_ABOVE_F(FTC, "consistency", 1e-2, SSM, 3),
      NMSE_ABOVE_F(FTC, "consistency", 0.4, GDN, 2),
      /* every other fact of a wrong slice (the continued forward wrong from the split, the windows right, the
       * state after it wrong, 8.2a / 8.2b's experiments refuted) is also what a scan-side fault of the
       * continued forward gives that is neither alone, e.g. the first token's dt with a zero initial state
       * (the fifth held-out set's motivating bug): only the first failing stage, the conv's output, names it */
      STAGE_FOR_LIKELY(FTC, "conv_out", 0, 3), FAILS(FTC, "output", 2),
      /* the wrong conv output enters the scan: the state after the continued forward is wrong too; no
       * slicing of the past makes an output see a later token (the distractor probe) */
      FAILS_F(CH, "recurrent_state", STATEFUL, 2), CONTINUED_RIGHT(-4), PASSES(FTC, "distractor", 4),
      /* the port is the reference without its window (8.2a) or without its state (8.2b) */
      EXP_OTHER(MC_EXP_ZERO_WINDOW, 6), EXP_OTHER(MC_EXP_ZERO_STATE, 6)}},
    {"8.3c", "the conv window caches the post-conv (or post-activation) value instead of the pre-conv input",
     "the window written by a prefill: the last K pre-conv inputs (CONV-INV)",
     CONV,
     /* the port's own decode reads the window it cached: a decode that passes leaves the fault in the export
      * (8.19) */
     {REQ(MC_DC_FAILS, P, "conv_state", 4), VETO_PASSES(P, "output", 3), VETO_FAILS(DEC, "output", 1),
      AT_SPLIT(DEC, "output", 1), PASSES(P, "recurrent_state", 1), FAILS(CH, "output", 1),
      NMSE_ABOVE(P, "conv_state", 1e-3, 2)}},
    {"8.7", "Mamba1 multi-token forward on a primed cache rebuilds the conv from the new tokens or restarts the "
            "scan (HF MambaMixer's unsupported case b)",
     "mixcheck requires case (b) for every family (docs/semantics.md §A.1)",
     M1,
     {REQ(MC_DC_FAILS, FTC, "consistency", 2), VETO_PASSES(P, NULL, 3), AT_SPLIT(FTC, "consistency", 2),
      FAILS(CH, "output", 1), FAILS(SV, "consistency", 1)}},
    /* Mamba1's 8.7 is 8.2a or 8.2b by mechanism (docs/semantics.md §8: "conv rebuilt from the new tokens, or
     * scan restarted from zero"): the same observations and experiments name it, under its own id */
    {"8.7", "Mamba1 multi-token forward on a primed cache restarts the selective scan from a zero state (the "
            "cached window is kept; HF MambaMixer's unsupported case b)",
     "case (b): the selective scan of a continued forward must take the cached state as its initial state "
     "(docs/semantics.md §A.1)",
     M1,
     {AT_SPLIT(FTC, "consistency", 2), VETO_PASSES(P, NULL, 3), PASSES(DEC, "output", 5), PASSES(CH, "conv_state", 2),
      PASSES(FTC, "conv_state", 1), REQ(MC_DC_FAILS, CH, "output", 2), FAILS(CH, "recurrent_state", 1),
      FAILS(FTC, "consistency", 2), NMSE_BELOW(FTC, "consistency", 1e-2, 3), STAGE(FTC, "scan_out", M1, 3),
      EXP(MC_EXP_ZERO_STATE, 6), FAILS(FTC, "output", 2), CONTINUED_RIGHT(-4), EXP_OTHER(MC_EXP_ZERO_WINDOW, 6)}},
    {"8.7", "Mamba1 multi-token forward on a primed cache rebuilds the conv from the new tokens (the cached "
            "window ignored; HF MambaMixer's unsupported case b)",
     "case (b): the conv of a continued forward must run over cat(cached window, new tokens) (docs/semantics.md "
     "§A.1)",
     M1,
     {AT_SPLIT(FTC, "consistency", 2), AT_SPLIT(FTC, "output", 1), VETO_PASSES(P, NULL, 3), PASSES(DEC, "output", 5),
      FAILS(CH, "conv_state", 3), PASSES(FTC, "conv_state", 1), REQ(MC_DC_FAILS, CH, "output", 2),
      FAILS(FTC, "consistency", 2), NMSE_ABOVE(FTC, "consistency", 1e-2, 1), STAGE(FTC, "conv_out", 0, 3),
      EXP(MC_EXP_ZERO_WINDOW, 6), FAILS(FTC, "output", 2), FAILS(CH, "recurrent_state", 2), CONTINUED_RIGHT(-4),
      EXP_OTHER(MC_EXP_ZERO_STATE, 6)}},
    {"8.8", "Gated DeltaNet continued forward ignores both the cached window and the cached state",
     "Qwen3.5 before #45513: chunk_gated_delta_rule(initial_state=None) and a conv without cached context",
     GDN,
     {REQ(MC_DC_FAILS, FTC, "consistency", 2), VETO_PASSES(P, NULL, 3), AT_SPLIT(FTC, "consistency", 1),
      FAILS(CH, "conv_state", 2), FAILS(FTC, "recurrent_state", 1), NMSE_ABOVE(FTC, "consistency", 1e-2, 1),
      EXP_NOT(MC_EXP_ZERO_WINDOW, 1), EXP_NOT(MC_EXP_ZERO_STATE, 1)}},

    /* ---- single-token decode ------------------------------------------------------------------------ */
    {"8.9", "decode writes the new column at min(position, K-1) instead of K-1 after a short prefill",
     "case (c): roll the window left by one and write at K-1 (CONV-INV)",
     CONV,
     {REQ(MC_DC_FAILS, DEC, "conv_state", 3), FAILS(DEC, "output", 2), VETO_PASSES(P, NULL, 3), AT_SPLIT(DEC, "output", 1),
      FAILS(CH, "conv_state", 1), VETO_SHORT_SPLIT(DEC, 3)}},
    {"8.3d", "the single-token decode writes its conv window wrong (not rolled, the new column at the wrong place, or "
             "K-1 columns kept while K are read)",
     "case (c): roll the window left by one and write the new pre-conv column at K-1 (CONV-INV)",
     CONV,
     {REQ(MC_DC_FAILS, DEC, "conv_state", 4), VETO_PASSES(P, NULL, 3), PASSES(FTC, "output", 2),
      PASSES(FTC, "conv_state", 2), FAILS(DEC, "output", 1), SHORT_SPLIT(DEC, -3)}},
    {"8.10", "the dt clamp (time_step_limit) is not applied in the single-token decode path (or in no path)",
     "clamp dt after softplus in every path (docs/semantics.md §A.3)",
     SSM,
     /* only the experiment separates it from any other decode-only mistake (8.15): with every dt inside
      * the clamp the port's decode agrees with the reference */
     {EXP_REQ(MC_EXP_DT_INSIDE_CLAMP, 6), CONTINUED_RIGHT(2), FAILS(DEC, "output", 2), PASSES(DEC, "conv_state", 2),
      FAILS(DEC, "recurrent_state", 1), AT_SPLIT(DEC, "output", 1), PASSES(CSI, NULL, 1), STAGE(DEC, "dt", SSM, 3)}},
    {"8.15", "the single-token decode path computes a different function from the multi-token path (a parameter "
             "used differently in decode only: a bias, D, softplus, a constant)",
     "compare the decode step with the prefill/continued path term by term: the decode (case c) must be the "
     "one-token case of the same function (docs/semantics.md §11)",
     0,
     {REQ(MC_DC_FAILS, DEC, "output", 3), AT_SPLIT(DEC, "output", 2), VETO_PASSES(P, NULL, 3), PASSES(FTC, "output", 3),
      /* the decode step against the same row of the continued multi-token forward (consistency) */
      AT_SPLIT(FTC, "consistency", 2), CONTINUED_RIGHT(3),
      PASSES(CH, "conv_state", 1), VETO_PASSES(DEC, "conv_state", 1),
      /* decode from the golden cache is still wrong: the decode computation itself, not the cache it read */
      EXP_NOT(MC_EXP_GOLDEN_STATE_DECODE, 6), EXP_NOT(MC_EXP_DT_INSIDE_CLAMP, 6), PASSES(CSI, NULL, 1)}},

    /* ---- padding ------------------------------------------------------------------------------------ */
    {"8.4", "pads of a multi-token forward on a primed cache are not masked",
     "apply the trailing-L slice of the mask to every multi-token forward, primed cache or not",
     0,
     {PADDED_GOLDEN(1), FAILS(LPB, NULL, 4), FAILS(RPB, NULL, 2), PASSES(P, NULL, 3), PASSES(BI, NULL, 2),
      PASSES(FTC, NULL, 1), PADDED_ROW(LPB, "output", 3), PADDED_ROW(CH, "output", 2), RUN_LAST(LPB, 1, -2, NULL),
      PASSES(MC_SCENARIO_DETERMINISM, NULL, 2)}},
    {"8.5", "right-padded prefill: the pads reach the conv window and decay the state",
     "a right-padded row's cache must be the one at its last real token (#48256)",
     0,
     {PADDED_GOLDEN(1), REQ(MC_DC_FAILS, RPB, NULL, 3), FAILS(P, "conv_state", 3), PASSES(P, "output", 2), FAILS(RPB, "conv_state", 1),
      PADDED_ROW(P, "conv_state", 3), PADDED_ROW(P, "recurrent_state", 2), PASSES(FTC, NULL, 1),
      PASSES(CH, "output", 2)}},
    {"8.6", "the padding mask is skipped for a batch of one row",
     "apply the mask whatever the batch size (#46773)",
     0,
     {PADDED_GOLDEN(1), REQ(MC_DC_FAILS, BI, "consistency", 4), RUN_LAST(LPB, 1, 2, "left_padded_batch fails first on a padded batch of one"),
      RUN_HAS(RPB, "row alone", 1, "right_padded_batch fails first on a row alone"), PASSES(P, NULL, 2),
      PASSES(BI, "output", 1)}},

    /* ---- fresh prefill ------------------------------------------------------------------------------ */
    {"8.11", "the gated RMSNorm normalises over the wrong group size (or gates on the wrong side of the norm)",
     "norm group size = intermediate / n_groups from the configuration (docs/semantics.md §A.5)",
     STATEFUL,
     {REQ(MC_DC_FAILS, P, "output", 3), PASSES(P, "recurrent_state", 4), PASSES(P, "conv_state", 1),
      VETO_FROM_START(P, "output", 0, 1), PASSES(BI, "consistency", 1), PASSES(FTC, "distractor", 3),
      STAGE(P, "norm_in", M2, -3), EXP_OTHER(MC_EXP_DT_INSIDE_CLAMP, 6), VETO_LARGE(P, "output")}},
    {"8.12", "chunk padding is not neutral: the final state decays or accumulates over the pad rows of the last "
             "chunk",
     "pad the last chunk with dt = 0 (log-decay 0) and x = B = 0, or do not pad",
     STATEFUL & ~LIN, /* lightning attention: lightning-block-boundary-decay */
     {FAILS(P, "recurrent_state", 3), FAILS(CSI, "recurrent_state", 4), PASSES(P, "output", 3),
      PASSES(CSI, "output", 2), PASSES(P, "conv_state", 1), FAILS(DEC, "recurrent_state", 1), EXP_OTHER(MC_EXP_DT_INSIDE_CLAMP, 6)}},
    {"8.13", "heads read the wrong group / key head (h mod G instead of h / (H/G)), or the projection layout is "
             "misread",
     "head-to-group mapping floor(h / (H/G)) and key head floor(h / r) (docs/semantics.md §A.10)",
     (STATEFUL & ~LIN) | ATT, /* lightning attention has no groups or key heads */
     {REQ(MC_DC_FAILS, P, "output", 3), FAILS_F(P, "recurrent_state", STATEFUL, 3),
      /* attention: the K/V cache itself is right, the queries read the wrong kv head */
      /* not a veto: a decay parameter read from the wrong head (A_log by key head, a per-channel dt_bias
       * from head 0) leaves row 0 right, since nothing decays before the first token */
      PASSES_F(P, "recurrent_state", ATT, 3), PASSES(P, "conv_state", 1), FROM_START(P, "output", 1),
      PASSES(BI, "consistency", 1), PASSES(FTC, "distractor", 3), EXP_OTHER(MC_EXP_DT_INSIDE_CLAMP, 6),
      VETO_LARGE(P, "output")}},
    /* ---- lightning attention and KDA (docs/semantics.md §13, §14) ---------------------------------- */
    /* the block recurrence's carry on a partial last block: lightning attention's 8.12 */
    {"lightning-block-boundary-decay", "the decay carried across a block boundary counts the full block length "
                                       "on a partial block (the state decays over rows the block does not have)",
     "the carry of a block of b rows decays by exp(-s·b), not exp(-s·Q) (docs/semantics.md §13)",
     LIN,
     {FAILS(P, "recurrent_state", 3), FAILS(CSI, "recurrent_state", 4), PASSES(P, "output", 3),
      PASSES(CSI, "output", 2), FAILS(DEC, "recurrent_state", 1),
      /* a partial block's carry is wrong in unpadded rows too: a state that fails first on a padded row is
       * the pads' (8.5) */
      PADDED_ROW(P, "recurrent_state", -3)}},
    /* a decay read from the wrong head or the wrong channel: nothing decays before the first token, so row 0
     * is right in every path and every later row is wrong */
    {"lightning-slope-order", "the per-head decay slopes are read in the wrong order (head h takes another "
                              "head's slope)",
     "slope of head h from the ALiBi-style sequence in head order (docs/semantics.md §13)",
     LIN,
     {REQ(MC_DC_FAILS, P, "output", 3), FAILS(P, "recurrent_state", 3), FROM_START(P, "output", -3),
      PASSES(BI, "consistency", 1), PASSES(FTC, "distractor", 3)}},
    {"kda-gate-per-head", "the per-channel decay gate of KDA is broadcast per head (one channel's gate for the "
                          "whole head)",
     "the decay of KDA is [H][dk], one gate per key channel (docs/semantics.md §14)",
     KDA,
     {REQ(MC_DC_FAILS, P, "output", 3), FAILS(P, "recurrent_state", 3), PASSES(P, "conv_state", 1),
      FROM_START(P, "output", -3), PASSES(BI, "consistency", 1), PASSES(FTC, "distractor", 3)}},
    /* ---- attention (docs/semantics.md §12.7) -------------------------------------------------------- */
    {"rope-pad-positions", "RoPE positions counted with the pads: keys of a left-padded row cached at shifted "
                           "angles",
     "position_ids from the real tokens before each one (the mask's cumulative sum), not the padded index",
     ATT,
     {PADDED_GOLDEN(1), REQ(MC_DC_FAILS, P, "recurrent_state", 3), PASSES(P, "output", 3), PASSES(P, "conv_state", 1),
      PADDED_ROW(P, "recurrent_state", 2), FAILS(LPB, "recurrent_state", 1), PASSES(LPB, "output", 1)}},
    {"8.2", "multi-token forward on a primed KV cache does not attend to the cached keys and values",
     "case (b): append the new keys and values to the cache and attend over all of them",
     ATT,
     {AT_SPLIT(FTC, "consistency", 3), VETO_PASSES(P, NULL, 3), PASSES(DEC, "output", 5), REQ(MC_DC_FAILS, CH, "output", 2),
      VETO_FAILS(FTC, "consistency", 2), FAILS(MC_SCENARIO_DETERMINISM, "output", 1)}},
    {"rotary-all-dims", "partial rotary applied to every head dim (partial_rotary_factor dropped)",
     "rotate only the first R = head_dim * partial_rotary_factor dims, frequencies over R",
     ATT,
     {REQ(MC_DC_FAILS, P, "output", 3), FROM_START(P, "output", -3), FAILS(P, "recurrent_state", 3),
      PASSES(P, "conv_state", 1), PASSES(BI, "consistency", 1),
      /* rotating the wrong dims is an O(1) error of the scores, not an epsilon's (8.16) */
      {.kind = MC_DC_NMSE_ABOVE, .scenario = P, .tensor = "output", .value = 1e-6, .weight = 1, .veto = 1}}},
    {"future-leak", "an output sees later tokens (the causal conv padded on the right, or attention without its "
                    "causal mask)",
     "pad the conv on the left by K-1, mask attention to s <= t: output t may read tokens up to t only",
     0,
     {REQ(MC_DC_FAILS, FTC, "distractor", 10), FAILS(P, "output", 1), FROM_START(P, "output", 1)}},

    /* ---- precision ---------------------------------------------------------------------------------- */
    {"8.14", "the cached state is kept in the model dtype (bf16/f16) and drifts over decode steps",
     "keep and export the state in f32 or wider (docs/semantics.md §A.6)",
     STATEFUL,
     {REQ(MC_DC_ONLY_REDUCED, ANY, NULL, 3), FAILS(DEC, "recurrent_state", 2), FAILS(DEC, "ref_recurrent_state", 2),
      PASSES(P, NULL, 1)}},
    /* a cache tensor or the output rounded to a 16-bit float inside an f32/f64 forward: every value the
     * harness read back is a bf16 (f16) value, which no f32 computation gives by chance */
    {"8.17", "the output is rounded to bf16/f16 (a half-precision buffer) inside an f32/f64 forward",
     "write the output in the model dtype; keep intermediates in f32 or wider",
     0,
     {ON_GRID_REQ(ANY, "output", "half", 12)}},

    /* ---- the cache interface: export, import, alloc, copy ------------------------------------------- */
    {"8.19", "cache_export is wrong: every output is right, the exported cache is not",
     "the export's layout and offsets (docs/semantics.md §1.1: conv [C][K] oldest first; the state in its "
     "documented order)",
     0,
     /* every output of a scenario that never imports passes; the caches read back fail from the prefill on */
     {REQ(MC_DC_FAILS, CR, NULL, 2), {.kind = MC_DC_FAILS, .scenario = P, .tensor = "conv_state", .weight = 3},
      {.kind = MC_DC_FAILS, .scenario = P, .tensor = "recurrent_state", .weight = 3}, REQ(MC_DC_PASSES, P, "output", 3),
      REQ(MC_DC_PASSES, DEC, "output", 3), REQ(MC_DC_PASSES, CH, "output", 3), PASSES(FTC, "output", 2),
      PASSES(PP, "output", 2), PASSES(SP, "output", 2), PASSES(MS, "output", 1), EXP(MC_EXP_GOLDEN_STATE_DECODE, 2),
      /* an export does not care about padding: a cache that fails first on a padded row is something else */
      PADDED_ROW(P, "recurrent_state", -3), PADDED_ROW(P, "conv_state", -3)}},
    {"8.20", "cache_import is wrong: the port continues right from its own cache, not from an imported one",
     "the import's layout, offsets and the primed flag it sets (the inverse of cache_export)",
     0,
     /* the port's own caches export right: only what it imports is wrong */
     {REQ(MC_DC_FAILS, CR, NULL, 3), EXP_NOT_REQ(MC_EXP_GOLDEN_STATE_DECODE, 4), REQ(MC_DC_PASSES, DEC, "output", 3),
      PASSES(CH, "output", 2), PASSES(P, "output", 1), PASSES(P, "conv_state", 2), PASSES(P, "recurrent_state", 3),
      PASSES(DEC, "recurrent_state", 2)}},
    /* the [B, L] interface's S2.4 */
    {"8.22", "a cache fresh from cache_alloc is not zeroed: the first forward continues from leftover memory",
     "zero the window and state at allocation (or keep a fresh flag and start from zeros)",
     0,
     {EXP_REQ(MC_EXP_ZEROED_CACHE, 10), FAILS(P, "output", 1), FROM_START(P, "output", 1)}},
    {"8.21", "cache_copy does not copy the whole cache (rows, the window or the state left behind)",
     "copy every row's window and state (batch × row size bytes) and the primed flag",
     0,
     {EXP_REQ(MC_EXP_CACHE_COPY, 10), FAILS(MC_SCENARIO_DETERMINISM, NULL, 1), FAILS(FTC, NULL, 1)}},
    /* ---- small structural differences ---------------------------------------------------------------- */
    {"8.16", "a small constant differs in every path (an epsilon's value or placement: the norm's eps, or the "
             "l2-norm's 1/max(‖x‖, eps) against rsqrt(Σx² + eps))",
     "the eps of each norm from the configuration, added where the definition adds it (docs/semantics.md §4, §A.12)",
     0,
     {REQ(MC_DC_FAILS, P, "output", 2), VETO_FROM_START(P, "output", STATEFUL | FAM(MC_FAMILY_SHORTCONV), 1),
      {.kind = MC_DC_NMSE_BELOW, .scenario = P, .tensor = "output", .value = 1e-8, .weight = 3, .veto = 1},
      EXP_NOT(MC_EXP_F32_REFERENCE, 3), PASSES(BI, "consistency", 1), PASSES(FTC, "distractor", 1), EXP_OTHER(MC_EXP_DT_INSIDE_CLAMP, 6)}},

    /* ---- the serving path (S2) ---------------------------------------------------------------------- */
    {"S2.1", "the packed call assumes every sequence starts a chunk (per-sequence chunk grid): states read at the "
             "wrong grid point",
     "one chunk grid for the whole packed axis: restart decay and state passing at every sequence boundary",
     STATEFUL,
     {REQ(MC_DC_FAILS, PP, "recurrent_state", 3), PASSES(PP, "conv_state", 2), PASSES(PP, "output", 1),
      FAILS(SP, "recurrent_state", 1), PASSES(SP, "untouched", 2), PASSES(CH, NULL, 2), PASSES(FTC, NULL, 1)}},
    {"S2.2", "the decay of a sequence that begins mid-chunk is taken from the chunk start, not the sequence start",
     "cumulative decay and the initial state's decay from the sequence start (has_initial_state = 1)",
     STATEFUL,
     {REQ(MC_DC_FAILS, PP, "output", 3), RUN_LAST(PP, 1, 3, "packed_prefill fails first on a resuming sequence"),
      PASSES(CH, NULL, 2), RUN_FIRST(PP, 0, -2, NULL), PASSES(SP, "untouched", 3)}},
    {"S2.3", "state or conv window leaks across a packed boundary into the next sequence",
     "reset the recurrence and the conv context where a new sequence begins (seq_idx)",
     0,
     {REQ(MC_DC_FAILS, PP, "output", 3), RUN_LAST(PP, 0, 2, "packed_prefill fails first on a fresh sequence after another"),
      RUN_FIRST(PP, 0, -3, NULL), FAILS(PR, NULL, 1), PASSES(SP, "untouched", 3), PASSES(CH, NULL, 2),
      FAILS(MS, "output", 1)}},
    {"S2.4", "has_initial_state is ignored: a fresh sequence starts from whatever its slot holds",
     "start from zeros when has_initial_state = 0; zero a reallocated slot",
     0,
     {REQ(MC_DC_FAILS, SP, "output", 3), RUN_FIRST(PP, 0, 2, "packed_prefill fails on its first sequence"),
      RUN_LAST(SP, 0, 2, "slot_pool fails first on a fresh sequence"), NONFINITE(SP, "output", 1),
      PASSES(SP, "untouched", 1), PASSES(PR, NULL, 1), PASSES(CH, NULL, 1)}},
    {"S2.5", "a sequence reads or writes the wrong pool slot (or writes slots it does not own)",
     "slot indexing: slots[i] in the pool's row stride, 64-bit offsets",
     0,
     {REQ(MC_DC_FAILS, SP, "untouched", 8), FAILS(SP, "recurrent_state", 1), FAILS(SP, "conv_state", 1),
      PASSES(CH, NULL, 1)}},
    {"S2.6", "steps of a mixed batch are misrouted (a one-token prefill run as a decode, a (k+1)-token prefill "
             "sent to the verify path, gates not gathered per row)",
     "route each sequence by its own length and has_initial_state, not by the batch's",
     0,
     {REQ(MC_DC_FAILS, MS, NULL, 3), PASSES(PP, NULL, 2), PASSES(SP, NULL, 2), PASSES(PR, NULL, 1),
      PASSES(CH, NULL, 1)}},
    {"S2.7", "speculative decoding commits the wrong checkpoint (a stale column after an accept, or the accepted "
             "count clamped)",
     "the state after accepting j drafts is the one at token P+j; a zero-draft step starts from it",
     0,
     {REQ(MC_DC_FAILS, SV, NULL, 3), RUN_HAS(SV, "accept", 4, "speculative_verify fails first after accepting drafts"),
      PASSES(FTC, NULL, 3), PASSES(P, NULL, 2), PASSES(DEC, "output", 1), PASSES(PP, NULL, 1)}},
    {"S2.8", "a prefix state cached off the block grid (before it is complete) does not resume correctly",
     "the state written back for a sequence is the one at its last token, whatever the block grid",
     0,
     {REQ(MC_DC_FAILS, PR, NULL, 3), FAILS(PP, "conv_state", 3), PASSES(PP, "output", 2), PASSES(PR, "output", 2),
      PASSES(CH, NULL, 2), PASSES(SP, "untouched", 1), PASSES(P, NULL, 1)}},
    /* a cache tensor rounded to a 16-bit float: at f32/f64 every value the harness reads back is a bf16 (f16)
     * value, which no f32 computation gives by chance; at bf16/f16 the drift of long decodes */
    {"S2.9", "the cache (state, conv window or KV) is stored in bf16/f16 between calls, whatever the model dtype, "
             "and drifts over long generations",
     "keep the cache in the model dtype or wider (an f32 state cache, vllm#39032; docs/semantics.md §A.6); compare "
     "per step against the f64 reference",
     0,
     {ON_GRID(ANY, NULL, "half", 8), FAILS_IN("long_decode", "output", 3), NMSE_BELOW(P, "recurrent_state", 1e-3, 3),
      NMSE_BELOW(P, "conv_state", 1e-3, 2), PASSES(P, "output", 2), ONLY_REDUCED(DEC, 2),
      FAILS(DEC, "ref_recurrent_state", 1)}},
    {"S2.10", "a size threshold: the tail chunk is skipped above a length, or its zero padding updates the state",
     "handle a partial last chunk at every length (see 8.12)",
     0,
     {FAILS_IN("length_sweep", "output", 4), PASSES(P, NULL, 2), PASSES(CH, NULL, 1), FAILS(CSI, "output", 2)}},
    {"S2.11", "groups are repeated instead of interleaved (repeat for repeat_interleave), or the norm group size "
              "comes from the unsharded n_groups",
     "head h uses group floor(h / (H/G)); the norm group is intermediate / n_groups of the shard",
     M2,
     {REQ(MC_DC_FAILS, P, "output", 2), FAILS(P, "recurrent_state", 1), PASSES(P, "conv_state", 1),
      VETO_FROM_START(P, "output", 0, 1), VETO_LARGE(P, "output")}},
};

const int mc_n_signatures = (int)(sizeof mc_signatures / sizeof mc_signatures[0]);
