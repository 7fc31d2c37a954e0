/*
 * test_stacks.c — model-level checks (docs/models.md §3).
 *
 * In process: the model cases (cases/models) pass on the reference at f64/f32 and on cpu at f32/bf16/f16;
 * the stack engine with one planted glue bug (stack.h, enum mc_stack_glue_fault) fails its logits and the
 * diagnosis names the glue and the layer where it sits. Through the CLI with the mutant library: a broken
 * Mamba2 mixer placed in layer 0 or layer 2 of the 4-layer stack (the case's `layers:`) is reported at that
 * layer, as a mixer. Prints the kill table of the glue mutants.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "modelcase.h"
#include "tmpdir.h"

#include "case/case.h"
#include "cpu.h"
#include "base/jsonread.h"
#include "reference.h"
#include "stack/stack.h"
#include "stack/stackcheck.h"
#include "golden/stackgolden.h"


static const struct mc_backend_ops *ops_for(enum mc_family f, int cpu)
{
    if (f == MC_STACK_NO_MIXER) /* a feed-forward block runs on no backend */
        return NULL;
    if (f == MC_FAMILY_GDN)
        return cpu ? mc_cpu_gdn_ops() : mc_reference_gdn_ops();
    if (f == MC_FAMILY_SHORTCONV)
        return cpu ? mc_cpu_shortconv_ops() : mc_reference_shortconv_ops();
    if (f == MC_FAMILY_ATTENTION)
        return cpu ? mc_cpu_attention_ops() : mc_reference_attention_ops();
    if (f == MC_FAMILY_MAMBA1)
        return cpu ? mc_cpu_mamba1_ops() : mc_reference_mamba1_ops();
    if (f == MC_FAMILY_KDA) /* Kimi-Linear's linear attention layers */
        return cpu ? mc_cpu_kda_ops() : mc_reference_kda_ops();
    if (f == MC_FAMILY_LIGHTNING)
        return cpu ? mc_cpu_lightning_ops() : mc_reference_lightning_ops();
    return cpu ? mc_cpu_mamba2_ops() : mc_reference_mamba2_ops();
}

/* One check of scenario `kind` of the case with every layer on reference (cpu = 0) or cpu, at dtype,
 * with a planted glue fault. */
static void check(struct mc_test_model *m, enum mc_scenario_kind kind, int cpu, enum mc_dtype dtype, int fault, int64_t layer,
                  struct mc_check_result *res)
{
    const struct mc_scenario_spec *sp = NULL;
    for (int i = 0; i < m->c.n_scenarios; i++)
        if (m->c.scenarios[i].kind == kind)
            sp = &m->c.scenarios[i];
    assert_non_null(sp);
    const struct mc_backend_ops *ops[MC_STACK_MAX_LAYERS], *ref[MC_STACK_MAX_LAYERS];
    uint8_t under[MC_STACK_MAX_LAYERS];
    for (int64_t l = 0; l < m->g.config.n_layers; l++) {
        ops[l] = ops_for(m->g.config.layers[l].family, cpu);
        ref[l] = ops_for(m->g.config.layers[l].family, 0);
        under[l] = 1;
    }
    struct mc_stack_ctx ctx = {.c = &m->c, .spec = sp, .g = &m->g, .layer_ops = ops, .under_test = under,
                               .ops = ops[0], .dtype = dtype, .ref_layer_ops = ref, .glue_fault = fault,
                               .glue_fault_layer = layer};
    struct mc_error err = {0};
    if (mc_stack_check_run(&ctx, res, &err) != MC_ERR_NONE)
        fail_msg("%s %s: %s", m->c.id, mc_scenario_name(kind), err.msg);
}

static const char *tensor_status(const struct mc_check_result *r, const char *name)
{
    for (int i = 0; i < r->n_tensors; i++)
        if (strcmp(r->tensors[i].name, name) == 0)
            return mc_compare_passed(&r->tensors[i].stats) ? "pass" : "fail";
    return "absent";
}

static void test_models_pass(void **state)
{
    (void)state;
    static const char *const paths[] = {"cases/models/mamba2.yaml", "cases/models/mamba.yaml", "cases/models/lfm2.yaml",
                                        "cases/models/bamba.yaml", "cases/models/qwen3_5.yaml",
                                        "cases/models/granitemoehybrid.yaml", "cases/models/falcon_mamba.yaml",
                                        "cases/models/jamba.yaml", "cases/models/nemotron_h.yaml",
                                        "cases/models/zamba2.yaml",
                                        "cases/models/qwen3_next.yaml", "cases/models/qwen3_5_moe.yaml",
                                        "cases/models/falcon_h1.yaml", "cases/models/zamba.yaml",
                                        "cases/models/lfm2_moe.yaml", "cases/models/olmo_hybrid.yaml",
                                        "cases/models/kimi_linear.yaml", "cases/models/minimax.yaml",
                                        "cases/models/inkling.yaml"};
    static const struct {
        int cpu;
        enum mc_dtype dtype;
    } runs[] = {{0, MC_DTYPE_F64}, {0, MC_DTYPE_F32}, {1, MC_DTYPE_F32}, {1, MC_DTYPE_BF16}, {1, MC_DTYPE_F16}};
    struct mc_check_result *res = malloc(sizeof *res);
    assert_non_null(res);
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        struct mc_test_model m;
        mc_test_model_load(paths[p], &m);
        for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++)
            for (int s = 0; s < m.c.n_scenarios; s++) {
                check(&m, m.c.scenarios[s].kind, runs[r].cpu, runs[r].dtype, MC_STACK_GLUE_NONE, 0, res);
                if (res->status != MC_CHECK_PASS)
                    fail_msg("%s %s %s %s: %s %s (%s)", m.c.id, mc_scenario_name(res->scenario), res->backend,
                             mc_dtype_name(res->dtype), mc_check_status_name(res->status), res->message,
                             res->diagnosis);
                assert_string_equal(tensor_status(res, m.c.scenarios[s].kind == MC_SCENARIO_GREEDY ? "greedy_tokens"
                                                                                                   : "logits"),
                                    "pass");
            }
        mc_test_model_unload(&m);
    }
    free(res);
}

struct glue {
    const char *path, *name;
    int fault;
    int64_t layer;
    int cpu;
    enum mc_dtype dtype;
    const char *expect[3]; /* substrings of the prefill diagnosis; NULL: the mutant is a known survivor */
};

static const struct glue GLUE[] = {
    {"cases/models/mamba2.yaml", "glue.final-norm-skipped", MC_STACK_GLUE_FINAL_NORM_SKIPPED, 0, 0, MC_DTYPE_F32,
     {"glue after the last layer", "final norm"}},
    {"cases/models/mamba.yaml", "glue.head-untied-when-tied", MC_STACK_GLUE_HEAD_UNTIED, 0, 0, MC_DTYPE_F32,
     {"glue after the last layer", "tied to the embedding"}},
    {"cases/models/mamba2.yaml", "glue.block-norm-skipped@2", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 2, 0, MC_DTYPE_F32,
     {"first diverging layer 2 of 4", "glue around the mixer"}},
    {"cases/models/mamba.yaml", "glue.block-norm-skipped@1", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 1, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 4", "glue around the mixer"}},
    {"cases/models/lfm2.yaml", "glue.block-norm-skipped@1", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 1, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 4 (attention mixer on 'cpu')", "glue around the mixer (norm / residual / feed-forward)"}},
    {"cases/models/bamba.yaml", "glue.block-norm-skipped@3", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 3, 1, MC_DTYPE_F32,
     {"first diverging layer 3 of 4 (mamba2 mixer on 'cpu')", "glue around the mixer (norm / residual / feed-forward)"}},
    {"cases/models/qwen3_5.yaml", "glue.block-norm-skipped@3", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 3, 1, MC_DTYPE_F32,
     {"first diverging layer 3 of 4 (attention mixer on 'cpu')", "glue around the mixer"}},
    {"cases/models/qwen3_5.yaml", "glue.final-norm-skipped", MC_STACK_GLUE_FINAL_NORM_SKIPPED, 0, 0, MC_DTYPE_F32,
     {"glue after the last layer"}},
    {"cases/models/lfm2.yaml", "glue.final-norm-skipped", MC_STACK_GLUE_FINAL_NORM_SKIPPED, 0, 1, MC_DTYPE_BF16,
     {"glue after the last layer"}},
    /* the residual rounded to the model dtype after every add: its error (~1.3 u of the residual's magnitude
     * at bf16) lies inside the spread of legitimate rounding differences measured on other weights
     * (docs/models.md §4), so no tolerance tells it; every hidden state after the embedding being exact in
     * the model dtype does (stackcheck.c residual_precision), at bf16 and at f16 */
    {"cases/models/mamba2.yaml", "glue.residual-not-fp32", MC_STACK_GLUE_RESIDUAL_NOT_FP32, 0, 1, MC_DTYPE_BF16,
     {"the residual stream is rounded to bf16", "residual_in_fp32 keeps the residual in float32"}},
    {"cases/models/mamba.yaml", "glue.residual-not-fp32", MC_STACK_GLUE_RESIDUAL_NOT_FP32, 0, 1, MC_DTYPE_F16,
     {"the residual stream is rounded to f16"}},
    /* GraniteMoeHybrid's glue: the MoE (layer 0 is a Mamba2 layer whose feed-forward is the MoE + shared MLP) and
     * the three multipliers of the glue (attention_multiplier is the attention family's softmax_scale, whose
     * mutant is the mixer-level mutant.scale-default) */
    {"cases/models/granitemoehybrid.yaml", "glue.block-norm-skipped@1", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 1, 1,
     MC_DTYPE_F32, {"first diverging layer 1 of 4 (attention mixer on 'cpu')", "glue around the mixer"}},
    {"cases/models/granitemoehybrid.yaml", "glue.moe-not-renormalised", MC_STACK_GLUE_MOE_NOT_RENORMALISED, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 0 of 4", "glue: the feed-forward (MoE + shared MLP)"}},
    /* a known survivor: the float64 golden has no two equal router logits at the k-th place, and at bf16 the
     * rounded logits of the bundled prompt meet none either; torch.topk's CPU order among equal values is no
     * fixed rule (docs/models.md §1), so a golden with a planted tie could not be checked against upstream */
    {"cases/models/granitemoehybrid.yaml", "glue.router-tie-high", MC_STACK_GLUE_ROUTER_TIE_HIGH, 0, 1, MC_DTYPE_BF16,
     {NULL}},
    {"cases/models/granitemoehybrid.yaml", "glue.residual-multiplier-dropped",
     MC_STACK_GLUE_RESIDUAL_MULTIPLIER_DROPPED, 0, 1, MC_DTYPE_F32, {"first diverging layer 0 of 4", "residual add"}},
    {"cases/models/granitemoehybrid.yaml", "glue.embedding-multiplier-twice", MC_STACK_GLUE_EMBEDDING_MULTIPLIER_TWICE,
     0, 1, MC_DTYPE_F32, {"glue: the embedding"}},
    {"cases/models/granitemoehybrid.yaml", "glue.logits-scaling-dropped", MC_STACK_GLUE_LOGITS_SCALING_DROPPED, 0, 1,
     MC_DTYPE_F32, {"glue after the last layer"}},
    /* Jamba: its router is not renormalised, so the fault renormalises the k weights; layer 0 is Mamba1 + MoE */
    {"cases/models/jamba.yaml", "glue.moe-renormalisation-flipped", MC_STACK_GLUE_MOE_NOT_RENORMALISED, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 0 of 4 (mamba1 mixer on 'cpu')", "glue: the feed-forward (MoE)"}},
    {"cases/models/jamba.yaml", "glue.block-norm-skipped@1", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 1, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 4 (attention mixer on 'cpu')", "glue around the mixer"}},
    /* Nemotron-H (blocks M - M * E - * E): the relu² MLP / experts, the grouped sigmoid router, the pattern; block 1
     * is the first MLP block, block 4 the first MoE block, both without a sequence mixer */
    {"cases/models/nemotron_h.yaml", "glue.relu2-as-relu", MC_STACK_GLUE_RELU2_AS_RELU, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 8 (MLP block without a mixer, on 'the stack engine')", "glue: the feed-forward (MLP)"}},
    {"cases/models/nemotron_h.yaml", "glue.moe-not-renormalised", MC_STACK_GLUE_MOE_NOT_RENORMALISED, 0, 1,
     MC_DTYPE_F32,
     {"first diverging layer 4 of 8 (MoE block without a mixer, on 'the stack engine')",
      "glue: the feed-forward (MoE + shared MLP)"}},
    {"cases/models/nemotron_h.yaml", "glue.correction-bias-in-weights", MC_STACK_GLUE_CORRECTION_BIAS_IN_WEIGHTS, 0, 1,
     MC_DTYPE_F32,
     {"first diverging layer 4 of 8 (MoE block without a mixer, on 'the stack engine')",
      "glue: the feed-forward (MoE + shared MLP)"}},
    {"cases/models/nemotron_h.yaml", "glue.pattern-shifted", MC_STACK_GLUE_PATTERN_SHIFTED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 0 of 8 (mamba2 mixer on 'cpu')", "glue around the mixer"}},
    {"cases/models/nemotron_h.yaml", "glue.block-norm-skipped@3", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 3, 1, MC_DTYPE_F32,
     {"first diverging layer 3 of 8 (attention mixer on 'cpu')", "glue around the mixer"}},
    /* at bf16 the golden's MoE-wide tolerance (docs/models.md §4) lets it through; the reference stack in bf16
     * catches it and names the block */
    {"cases/models/nemotron_h.yaml", "glue.relu2-as-relu", MC_STACK_GLUE_RELU2_AS_RELU, 0, 1, MC_DTYPE_BF16,
     {"first layer off the reference stack in bf16: layer 1 of 8 (MLP block without a mixer",
      "glue: the feed-forward (MLP)"}},
    /* Zamba2 (layers M H M H H M, 9 entries: 0 mamba2, 1 application 0 of block 0 at layer 1, 2 its Mamba2, 3 mamba2,
     * 4 application 1 of block 1 at layer 3, 5, 6 application 2 of block 0 at layer 4, 7, 8): the shared blocks */
    {"cases/models/zamba2.yaml", "glue.shared-wrong-adapter@1", MC_STACK_GLUE_SHARED_WRONG_ADAPTER, 1, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 9 (shared block 0, application 0 at layer 1: attention on 'cpu')",
      "the shared block's attention with application 0's q/k/v adapters", "the adapters"}},
    {"cases/models/zamba2.yaml", "glue.shared-wrong-block", MC_STACK_GLUE_SHARED_WRONG_BLOCK, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 9 (shared block 0, application 0 at layer 1: attention on 'cpu')",
      "the shared block's attention (block 0's", "the block's weights"}},
    {"cases/models/zamba2.yaml", "glue.concat-swapped", MC_STACK_GLUE_CONCAT_SWAPPED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 9 (shared block 0, application 0 at layer 1: attention on 'cpu')",
      "glue around the shared block (the concat with the original embeddings"}},
    {"cases/models/zamba2.yaml", "glue.concat-dropped", MC_STACK_GLUE_CONCAT_DROPPED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 9 (shared block 0, application 0 at layer 1: attention on 'cpu')",
      "glue around the shared block (the concat with the original embeddings"}},
    {"cases/models/zamba2.yaml", "glue.pattern-shifted", MC_STACK_GLUE_PATTERN_SHIFTED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 0 of 9 (layer 0's mamba2 mixer on 'cpu')", "glue around the mixer"}},
    /* at bf16 the application's KV cache shows it first (outputs within the calibrated tolerance) */
    {"cases/models/zamba2.yaml", "glue.concat-swapped", MC_STACK_GLUE_CONCAT_SWAPPED, 0, 1, MC_DTYPE_BF16,
     {"layer 1's cache (attention mixer on 'cpu')"}},
    /* Qwen3-Next (GDN 0, 1, 3, gated attention 2, 4; the MoE + gated shared expert at 0, 2, 3, the dense MLP at the
     * mlp_only_layers 1, 4): the shared expert's sigmoid gate, norm_topk_prob, the router's ties, a block norm */
    {"cases/models/qwen3_next.yaml", "glue.shared-gate-skipped", MC_STACK_GLUE_SHARED_GATE_SKIPPED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 0 of 5 (gdn mixer on 'cpu')", "glue: the feed-forward (MoE + shared MLP)"}},
    {"cases/models/qwen3_next.yaml", "glue.moe-not-renormalised", MC_STACK_GLUE_MOE_NOT_RENORMALISED, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 0 of 5 (gdn mixer on 'cpu')", "glue: the feed-forward (MoE + shared MLP)"}},
    /* at bf16 the golden's MoE-wide tolerance (docs/models.md §4) lets it through; the reference stack in bf16
     * catches it and names the layer and its glue */
    {"cases/models/qwen3_next.yaml", "glue.shared-gate-skipped", MC_STACK_GLUE_SHARED_GATE_SKIPPED, 0, 1, MC_DTYPE_BF16,
     {"first layer off the reference stack in bf16: layer 0 of 5 (gdn mixer on 'cpu')",
      "glue around the mixer (norm / residual / feed-forward)"}},
    /* a known survivor, as GraniteMoeHybrid's: no tie at the k-th place in the golden, nor in its bf16 rounding */
    {"cases/models/qwen3_next.yaml", "glue.router-tie-high", MC_STACK_GLUE_ROUTER_TIE_HIGH, 0, 1, MC_DTYPE_BF16,
     {NULL}},
    {"cases/models/qwen3_next.yaml", "glue.block-norm-skipped@2", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 2, 1, MC_DTYPE_F32,
     {"first diverging layer 2 of 5 (attention mixer on 'cpu')", "glue around the mixer"}},
    /* Qwen3.5-MoE (GDN 0, 2, gated attention 1, 3; the sparse block on every layer, its router always renormalised) */
    {"cases/models/qwen3_5_moe.yaml", "glue.shared-gate-skipped", MC_STACK_GLUE_SHARED_GATE_SKIPPED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 0 of 4 (gdn mixer on 'cpu')", "glue: the feed-forward (MoE + shared MLP)"}},
    {"cases/models/qwen3_5_moe.yaml", "glue.moe-not-renormalised", MC_STACK_GLUE_MOE_NOT_RENORMALISED, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 0 of 4 (gdn mixer on 'cpu')", "glue: the feed-forward (MoE + shared MLP)"}},
    {"cases/models/qwen3_5_moe.yaml", "glue.block-norm-skipped@1", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 1, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 4 (attention mixer on 'cpu')", "glue around the mixer"}},
    /* FalconH1 (3 decoder layers = 6 slots: 2j the Mamba2 branch, 2j + 1 the attention branch and the layer's sum,
     * residual and MLP): its multipliers applied twice or not at all, the branches made sequential (the first
     * added to the residual before the second's norm), a branch dropped, the pattern shifted (each slot running
     * the next slot's mixer: the branches swapped) */
    {"cases/models/falcon_h1.yaml", "glue.in-multiplier-twice", MC_STACK_GLUE_IN_MULTIPLIER_TWICE, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 6 (attention branch of decoder layer 0 on 'cpu')", "glue around the parallel mixers"}},
    {"cases/models/falcon_h1.yaml", "glue.out-multiplier-dropped", MC_STACK_GLUE_OUT_MULTIPLIER_DROPPED, 0, 1,
     MC_DTYPE_F32,
     {"first diverging layer 1 of 6 (attention branch of decoder layer 0 on 'cpu')", "glue around the parallel mixers"}},
    {"cases/models/falcon_h1.yaml", "glue.mlp-multipliers-dropped", MC_STACK_GLUE_MLP_MULTIPLIERS_DROPPED, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 1 of 6", "glue: the feed-forward (MLP)"}},
    {"cases/models/falcon_h1.yaml", "glue.lm-head-multiplier-dropped", MC_STACK_GLUE_LM_HEAD_MULTIPLIER_DROPPED, 0, 1,
     MC_DTYPE_F32, {"glue after the last layer"}},
    {"cases/models/falcon_h1.yaml", "glue.embedding-multiplier-twice", MC_STACK_GLUE_EMBEDDING_MULTIPLIER_TWICE, 0, 1,
     MC_DTYPE_F32, {"glue: the embedding"}},
    {"cases/models/falcon_h1.yaml", "glue.branches-sequential@3", MC_STACK_GLUE_BRANCHES_SUMMED_BEFORE_NORM, 3, 1,
     MC_DTYPE_F32,
     {"first diverging layer 3 of 6 (attention branch of decoder layer 1 on 'cpu')", "glue around the parallel mixers"}},
    {"cases/models/falcon_h1.yaml", "glue.branch-dropped@2", MC_STACK_GLUE_BRANCH_DROPPED, 2, 1, MC_DTYPE_F32,
     {"first diverging layer 3 of 6 (attention branch of decoder layer 1 on 'cpu')", "glue around the parallel mixers"}},
    {"cases/models/falcon_h1.yaml", "glue.branch-dropped@5", MC_STACK_GLUE_BRANCH_DROPPED, 5, 1, MC_DTYPE_F32,
     {"first diverging layer 5 of 6 (attention branch of decoder layer 2 on 'cpu')", "glue around the parallel mixers"}},
    {"cases/models/falcon_h1.yaml", "glue.pattern-shifted", MC_STACK_GLUE_PATTERN_SHIFTED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 0 of 6 (mamba2 branch of decoder layer 0 on 'cpu')"}},
    {"cases/models/falcon_h1.yaml", "glue.branch-multipliers-swapped", MC_STACK_GLUE_BRANCH_MULTIPLIERS_SWAPPED, 0, 1,
     MC_DTYPE_F32,
     {"first diverging layer 1 of 6 (attention branch of decoder layer 0 on 'cpu')", "glue around the parallel mixers"}},
    {"cases/models/falcon_h1.yaml", "glue.block-norm-skipped@4", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 4, 1, MC_DTYPE_F32,
     {"first diverging layer 5 of 6", "glue around the parallel mixers"}},
    {"cases/models/falcon_h1.yaml", "glue.out-multiplier-dropped", MC_STACK_GLUE_OUT_MULTIPLIER_DROPPED, 0, 1,
     MC_DTYPE_BF16, {"decoder layer 0", "glue around the parallel mixers"}},
    /* Zamba (layers M H M H M, 7 entries: 0 mamba1, 1 application 0 at layer 1, 2 its Mamba1, 3 mamba1, 4 application
     * 1 at layer 3, 5, 6): the concat with the original embeddings dropped; the shared block applied a layer early
     * (every entry runs the next one's block: the application of layer 1 at layer 0) */
    {"cases/models/zamba.yaml", "glue.concat-dropped", MC_STACK_GLUE_CONCAT_DROPPED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 7 (shared block 0, application 0 at layer 1: attention on 'cpu')",
      "glue around the shared block (the concat with the original embeddings"}},
    {"cases/models/zamba.yaml", "glue.pattern-shifted", MC_STACK_GLUE_PATTERN_SHIFTED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 0 of 7 (layer 0's mamba1 mixer on 'cpu')", "glue around the mixer"}},
    /* LFM2-MoE (conv 0, 2, attention 1, 3; the dense MLP at 0, 1 (num_dense_layers 2), the sigmoid-routed MoE with
     * expert_bias at 2, 3): the dense-first boundary one layer early, the expert bias dropped from the choice or
     * taken into the weights, norm_topk_prob ignored */
    {"cases/models/lfm2_moe.yaml", "glue.lfm2moe-dense-shifted", MC_STACK_GLUE_LFM2MOE_DENSE_SHIFTED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 4 (attention mixer on 'cpu')", "glue: the feed-forward (MLP)"}},
    {"cases/models/lfm2_moe.yaml", "glue.lfm2moe-expert-bias-dropped", MC_STACK_GLUE_LFM2MOE_EXPERT_BIAS_DROPPED, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 2 of 4 (shortconv mixer on 'cpu')", "glue: the feed-forward (MoE)"}},
    {"cases/models/lfm2_moe.yaml", "glue.correction-bias-in-weights", MC_STACK_GLUE_CORRECTION_BIAS_IN_WEIGHTS, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 2 of 4 (shortconv mixer on 'cpu')", "glue: the feed-forward (MoE)"}},
    {"cases/models/lfm2_moe.yaml", "glue.moe-not-renormalised", MC_STACK_GLUE_MOE_NOT_RENORMALISED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 2 of 4 (shortconv mixer on 'cpu')", "glue: the feed-forward (MoE)"}},
    {"cases/models/lfm2_moe.yaml", "glue.final-norm-skipped", MC_STACK_GLUE_FINAL_NORM_SKIPPED, 0, 1, MC_DTYPE_F32,
     {"glue after the last layer", "final norm"}},
    /* at bf16 the golden's MoE-wide tolerance (docs/models.md §4) may let a feed-forward fault through; the reference
     * stack in bf16 catches it and names the layer */
    {"cases/models/lfm2_moe.yaml", "glue.lfm2moe-dense-shifted", MC_STACK_GLUE_LFM2MOE_DENSE_SHIFTED, 0, 1,
     MC_DTYPE_BF16, {"layer 1 of 4 (attention mixer on 'cpu')"}},
    /* OLMo-Hybrid (GDN 0, 2 pre-norm; attention 1, 3 post-norm): the attention layers run in Llama's pre-norm order,
     * an attention layer's post norm dropped, the MLP's post norm dropped, the layer kinds' pattern shifted */
    {"cases/models/olmo_hybrid.yaml", "glue.post-norm-as-pre", MC_STACK_GLUE_POST_NORM_AS_PRE, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 4 (attention mixer on 'cpu')", "the mixer alone is within tolerance"}},
    {"cases/models/olmo_hybrid.yaml", "glue.block-norm-skipped@3", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 3, 1, MC_DTYPE_F32,
     {"first diverging layer 3 of 4 (attention mixer on 'cpu')", "glue around the mixer"}},
    {"cases/models/olmo_hybrid.yaml", "glue.ffn-post-norm-skipped", MC_STACK_GLUE_FFN_POST_NORM_SKIPPED, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 1 of 4 (attention mixer on 'cpu')", "feed-forward"}},
    {"cases/models/olmo_hybrid.yaml", "glue.pattern-shifted", MC_STACK_GLUE_PATTERN_SHIFTED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 0 of 4"}},
    {"cases/models/olmo_hybrid.yaml", "glue.post-norm-as-pre", MC_STACK_GLUE_POST_NORM_AS_PRE, 0, 1, MC_DTYPE_BF16,
     {"layer 1 of 4", "glue"}},
    /* Kimi-Linear (KDA 0, 2, 4, MLA 1, 3; the dense MLP at 0, 1, the MoE + shared experts at 2, 3, 4): its MoE's
     * shared experts, group ranking and routed scaling, the order its expert outputs are summed in, a block norm */
    {"cases/models/kimi_linear.yaml", "glue.kimi-shared-dropped", MC_STACK_GLUE_KIMI_SHARED_DROPPED, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 2 of 5 (kda mixer on 'cpu')", "glue: the feed-forward (MoE + shared MLP)"}},
    {"cases/models/kimi_linear.yaml", "glue.kimi-group-max-only", MC_STACK_GLUE_KIMI_GROUP_MAX_ONLY, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 2 of 5 (kda mixer on 'cpu')", "glue: the feed-forward (MoE + shared MLP)"}},
    {"cases/models/kimi_linear.yaml", "glue.kimi-scaling-dropped", MC_STACK_GLUE_KIMI_SCALING_DROPPED, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 2 of 5 (kda mixer on 'cpu')", "glue: the feed-forward (MoE + shared MLP)"}},
    {"cases/models/kimi_linear.yaml", "glue.kimi-experts-summed-fp32", MC_STACK_GLUE_KIMI_EXPERTS_SUMMED_FP32, 0, 1,
     MC_DTYPE_BF16, {NULL}},
    {"cases/models/kimi_linear.yaml", "glue.block-norm-skipped@1", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 1, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 5 (attention mixer on 'cpu')", "glue around the mixer"}},
    /* MiniMax (lightning 0, 2; attention 1, 3; the MoE on every layer; each residual the norm's output times alpha):
     * layer 2's attn_beta_factor dropped, alpha and beta swapped in every scaled add, the residual taken before the
     * norm (Llama's), the layer kinds' pattern shifted */
    {"cases/models/minimax.yaml", "glue.minimax-beta-dropped@2", MC_STACK_GLUE_MINIMAX_BETA_DROPPED, 2, 1, MC_DTYPE_F32,
     {"first diverging layer 2 of 4 (lightning mixer on 'cpu')", "glue around the mixer"}},
    {"cases/models/minimax.yaml", "glue.minimax-alpha-beta-swapped", MC_STACK_GLUE_MINIMAX_ALPHA_BETA_SWAPPED, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 0 of 4 (lightning mixer on 'cpu')", "or its residual add"}},
    {"cases/models/minimax.yaml", "glue.minimax-residual-pre-norm", MC_STACK_GLUE_MINIMAX_RESIDUAL_PRE_NORM, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 0 of 4 (lightning mixer on 'cpu')", "or its residual add"}},
    {"cases/models/minimax.yaml", "glue.pattern-shifted", MC_STACK_GLUE_PATTERN_SHIFTED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 0 of 4"}},
    /* Inkling (sliding attention 0, 2, full 1, 3; the dense MLP at 0, 2, the sink-routed MoE at 1, 3): the embedding's
     * norm skipped, the head's divisor dropped, layer 1's mlp_sconv skipped, the shared experts out of the router's
     * softmax, the global scales read as 1, the layer kinds' pattern shifted */
    {"cases/models/inkling.yaml", "glue.inkling-embed-norm-skipped", MC_STACK_GLUE_INKLING_EMBED_NORM_SKIPPED, 0, 1,
     MC_DTYPE_F32, {"glue: the embedding (hidden state 0)"}},
    {"cases/models/inkling.yaml", "glue.inkling-head-divisor-dropped", MC_STACK_GLUE_INKLING_HEAD_DIVISOR_DROPPED, 0, 1,
     MC_DTYPE_F32, {"glue after the last layer", "final norm / LM head"}},
    {"cases/models/inkling.yaml", "glue.inkling-mlp-sconv-skipped@1", MC_STACK_GLUE_INKLING_MLP_SCONV_SKIPPED, 1, 1,
     MC_DTYPE_F32, {"first diverging layer 1 of 4 (attention mixer on 'cpu')", "glue: the feed-forward (MoE)"}},
    {"cases/models/inkling.yaml", "glue.inkling-sink-dropped", MC_STACK_GLUE_INKLING_SINK_DROPPED, 0, 1, MC_DTYPE_F32,
     {"first diverging layer 1 of 4 (attention mixer on 'cpu')", "glue: the feed-forward (MoE)"}},
    {"cases/models/inkling.yaml", "glue.inkling-global-scale-dropped", MC_STACK_GLUE_INKLING_GLOBAL_SCALE_DROPPED, 0, 1,
     MC_DTYPE_F32, {"first diverging layer 0 of 4 (attention mixer on 'cpu')", "glue: the feed-forward (MLP)"}},
    {"cases/models/inkling.yaml", "glue.block-norm-skipped@2", MC_STACK_GLUE_BLOCK_NORM_SKIPPED, 2, 1, MC_DTYPE_F32,
     {"first diverging layer 2 of 4 (attention mixer on 'cpu')", "glue around the mixer"}},
    {"cases/models/inkling.yaml", "glue.pattern-shifted", MC_STACK_GLUE_PATTERN_SHIFTED, 0, 1, MC_DTYPE_F32, {"first diverging layer 0 of 4 (attention mixer on 'cpu')"}},
    {"cases/models/inkling.yaml", "glue.inkling-sink-dropped", MC_STACK_GLUE_INKLING_SINK_DROPPED, 0, 1, MC_DTYPE_BF16,
     {"layer 1 of 4 (attention mixer on 'cpu')", "glue"}},
};

static void test_glue_mutants(void **state)
{
    (void)state;
    struct mc_check_result *res = malloc(sizeof *res);
    assert_non_null(res);
    printf("  %-28s %-5s %-6s %-8s %s\n", "glue mutant", "dtype", "logits", "caught", "diagnosis (prefill)");
    for (size_t i = 0; i < sizeof GLUE / sizeof GLUE[0]; i++) {
        const struct glue *gm = &GLUE[i];
        struct mc_test_model m;
        mc_test_model_load(gm->path, &m);
        int caught = 0;
        char diag[512] = "";
        for (int s = 0; s < m.c.n_scenarios; s++) {
            check(&m, m.c.scenarios[s].kind, gm->cpu, gm->dtype, gm->fault, gm->layer, res);
            caught |= res->status == MC_CHECK_FAIL;
            if (res->scenario == MC_SCENARIO_PREFILL)
                snprintf(diag, sizeof diag, "%s", res->diagnosis);
        }
        printf("  %-28s %-5s %-6s %-8s %s\n", gm->name, mc_dtype_name(gm->dtype), caught ? "fail" : "pass",
               caught ? "yes" : "SURVIVES", diag);
        if (gm->expect[0] == NULL) {
            mc_test_model_unload(&m);
            continue;
        }
        if (!caught)
            fail_msg("%s survived", gm->name);
        for (int k = 0; k < 3 && gm->expect[k]; k++)
            if (strstr(diag, gm->expect[k]) == NULL)
                fail_msg("%s: diagnosis \"%s\" lacks \"%s\"", gm->name, diag, gm->expect[k]);
        mc_test_model_unload(&m);
    }
    free(res);
}

/* ---- broken mixer layers, through the CLI ----------------------------------------------------------- */

static char dir[] = "/tmp/mixcheck-stacks-XXXXXX";

/* The diagnosis of (scenario) in the JSON report of `case` run on the mutant; "" when it passed. */
static void cli_diagnosis(const char *case_path, const char *mutant, const char *scenario, char *out, size_t len)
{
    char cmd[4096], json[600];
    snprintf(json, sizeof json, "%s/r.json", dir);
    snprintf(cmd, sizeof cmd,
             MC_BINARY_DIR "/mixcheck run %s --plugin " MC_MUTANTS_PLUGIN " --backend %s --scenario %s -q "
                           "--color never --json %s >/dev/null 2>&1",
             case_path, mutant, scenario, json);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 1));
    struct mc_json_value *root = NULL;
    struct mc_json_error je;
    if (mc_json_parse_file(json, NULL, &root, &je) != 0)
        fail_msg("%s: %s", json, je.msg);
    out[0] = '\0';
    const struct mc_json_value *r = mc_json_get(root, "results");
    assert_non_null(r);
    for (size_t i = 0; i < r->len; i++) {
        const struct mc_json_value *d = mc_json_get(&r->items[i], "diagnosis");
        const struct mc_json_value *mt = mc_json_get(&r->items[i], "model_type");
        assert_non_null(mt);
        assert_true(strcmp(mt->string, "mamba2") == 0 || strcmp(mt->string, "lfm2") == 0);
        if (d != NULL && d->type == MC_JSON_STRING)
            snprintf(out, len, "%s", d->string);
    }
    mc_json_free(root);
}

static void test_mixer_layer_mutants(void **state)
{
    (void)state;
    static const struct {
        const char *path, *mutant, *scenario, *expect[3];
    } cases[] = {
        {"tests/stacks/cases/mamba2_layer2.yaml", "mutant.future-leak", "prefill",
         {"first diverging layer 2 of 4", "mamba2 mixer on 'mutant.future-leak'", ": mixer"}},
        {"tests/stacks/cases/mamba2_layer0.yaml", "mutant.future-leak", "prefill",
         {"first diverging layer 0 of 4", ": mixer"}},
        {"tests/stacks/cases/mamba2_layer2.yaml", "mutant.8.3b-conv-off-by-one", "chunked",
         {"first diverging layer 2 of 4", "cached path"}},
        {"tests/stacks/cases/mamba2_layer0.yaml", "mutant.8.2b-state-reset", "chunked",
         {"first diverging layer 0 of 4", "cached path"}},
        {"tests/stacks/cases/mamba2_layer2.yaml", "mutant.8.2a-zero-conv-context", "first_token_causality",
         {"first diverging layer 2 of 4"}},
        {"tests/stacks/cases/lfm2_layer1.yaml", "mutant.8.13-kv-head-mod", "prefill",
         {"first diverging layer 1 of 4", "attention mixer on 'mutant.8.13-kv-head-mod'", ": mixer"}},
        /* RoPE is relative: positions counted with the padding leave this prompt's outputs right and put
         * the cached keys at the wrong positions */
        {"tests/stacks/cases/lfm2_layer1.yaml", "mutant.rope-pad-positions", "left_padded_batch",
         {"layer 1's cache (attention mixer", "recurrent_state leaves tolerance"}},
    };
    char diag[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_diagnosis(cases[i].path, cases[i].mutant, cases[i].scenario, diag, sizeof diag);
        printf("  %-32s %-22s %s\n", cases[i].mutant, cases[i].scenario, diag);
        for (int k = 0; k < 3 && cases[i].expect[k]; k++)
            if (strstr(diag, cases[i].expect[k]) == NULL)
                fail_msg("%s on %s %s: diagnosis \"%s\" lacks \"%s\"", cases[i].mutant, cases[i].path,
                         cases[i].scenario, diag, cases[i].expect[k]);
    }
    /* the correct control in the same place passes with no diagnosis */
    cli_diagnosis("tests/stacks/cases/mamba2_layer2.yaml", "control.correct", "chunked", diag, sizeof diag);
    assert_string_equal(diag, "");
}

/* Nemotron-H's config.json as the C reader takes it: the block pattern in its three spellings and the older mamba_*
 * names read alike (an older name winning over the plain one, as NemotronHConfig), the blocks without a mixer, the
 * MoE's router; every key the engine does not compute refused with its name. */
static void test_nemotron_config(void **state)
{
    (void)state;
    static const char *const base = "\"vocab_size\": 64, \"hidden_size\": 32, \"mamba_num_heads\": 4, "
                                    "\"mamba_head_dim\": 16, \"ssm_state_size\": 8, \"num_attention_heads\": 4, "
                                    "\"num_key_value_heads\": 2, \"head_dim\": 8, \"intermediate_size\": 16, "
                                    "\"n_routed_experts\": 8, \"n_group\": 2, \"topk_group\": 1, "
                                    "\"moe_intermediate_size\": 8, \"moe_shared_expert_intermediate_size\": 12";
    static const char *const same[] = {
        "\"layers_block_type\": [\"linear_attention\", \"mlp\", \"full_attention\", \"moe\"], \"n_groups\": 2",
        "\"hybrid_override_pattern\": \"M-*E\", \"n_groups\": 2",
        "\"layer_types\": [\"mamba\", \"mlp\", \"attention\", \"moe\"], \"n_groups\": 2",
        "\"hybrid_override_pattern\": \"M-*E\", \"n_groups\": 1, \"mamba_n_groups\": 2, \"num_hidden_layers\": 9",
    };
    char json[2048];
    struct mc_stack_config first;
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, %s}", base, same[i]);
        if (mc_stack_config_parse("nemotron_h", json, "cfg", &cfg, &err) != MC_ERR_NONE)
            fail_msg("%s: %s", same[i], err.msg);
        assert_int_equal(cfg.n_layers, 4);
        assert_int_equal(cfg.layers[0].family, MC_FAMILY_MAMBA2);
        assert_int_equal(cfg.layers[0].mixer.u.mamba2.n_groups, 2);
        assert_int_equal(cfg.layers[0].mixer.u.mamba2.norm_group_size, 32); /* per group: 64 / 2 */
        assert_true(cfg.layers[0].mixer.u.mamba2.time_step_limit[0] == 0.001);
        assert_false(mc_stack_layer_has_mixer(&cfg, 1) || mc_stack_layer_has_mixer(&cfg, 3));
        assert_true(cfg.layers[1].dense && !cfg.layers[1].moe && cfg.layers[1].dense_size == 16);
        assert_true(cfg.layers[3].dense && cfg.layers[3].moe && cfg.layers[3].dense_size == 12);
        assert_true(!cfg.layers[0].dense && !cfg.layers[2].dense && cfg.layers[2].mixer.u.attention.no_rope);
        assert_int_equal(cfg.moe.router, MC_ROUTER_SIGMOID_GROUPED);
        assert_true(cfg.moe.renormalise && cfg.norm_weight_fp32 && !cfg.tied && !cfg.residual_in_fp32);
        if (i == 0)
            first = cfg;
        else
            assert_memory_equal(&first.layers, &cfg.layers, sizeof cfg.layers);
    }
    { /* neither spelling: NemotronHConfig's default blocks, linear_attention, moe, full_attention, mlp */
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, \"n_groups\": 2}", base);
        assert_int_equal(mc_stack_config_parse("nemotron_h", json, "cfg", &cfg, &err), MC_ERR_NONE);
        assert_int_equal(cfg.n_layers, 4);
        assert_true(cfg.layers[0].family == MC_FAMILY_MAMBA2 && cfg.layers[1].moe &&
                    cfg.layers[2].family == MC_FAMILY_ATTENTION && cfg.layers[3].dense && !cfg.layers[3].moe);
    }
    static const struct {
        const char *extra, *needle;
    } bad[] = {
        {"\"hybrid_override_pattern\": \"M-*E\", \"moe_latent_size\": 16", "'moe_latent_size'"},
        {"\"hybrid_override_pattern\": \"M-*E\", \"num_nextn_predict_layers\": 1", "'num_nextn_predict_layers' 1"},
        {"\"hybrid_override_pattern\": \"M-*E\", \"mlp_hidden_act\": \"silu\"", "'mlp_hidden_act' silu"},
        {"\"hybrid_override_pattern\": \"M-*E\", \"mamba_hidden_act\": \"gelu\"", "'mamba_hidden_act' gelu"},
        {"\"hybrid_override_pattern\": \"M-*E\", \"mlp_bias\": true", "'mlp_bias' true"},
        {"\"hybrid_override_pattern\": \"M-*E\", \"tie_word_embeddings\": true", "'tie_word_embeddings' true"},
        {"\"hybrid_override_pattern\": \"M-*X\"", "'hybrid_override_pattern'"},
        {"\"layers_block_type\": [\"linear_attention\", \"dense\"]", "'layers_block_type[1]'"},
        {"\"hybrid_override_pattern\": \"ME\", \"num_experts_per_tok\": 9", "n_routed_experts (8)"},
        {"\"hybrid_override_pattern\": 3", "'hybrid_override_pattern' must be a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, \"n_groups\": 2, %s}", base, bad[i].extra);
        assert_int_equal(mc_stack_config_parse("nemotron_h", json, "cfg", &cfg, &err), MC_ERR_INPUT);
        if (strstr(err.msg, bad[i].needle) == NULL)
            fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].extra, err.msg, bad[i].needle);
        printf("  refused: %s\n", err.msg);
    }
}

/* Kimi-Linear's config.json as the C reader takes it: the names KimiLinearConfig 5.24 writes (its attribute_map's)
 * and the field names read alike; linear_attn_config's 1-indexed full_attn_layers / kda_layers and its KDA sizes as
 * layer_types and linear_*; first_k_dense_replace as mlp_layer_types; without either, KimiLinearConfig's defaults
 * (full attention where i > 0 and i % 4 == 0, one dense layer); MLA's latent norms at 1e-6 whatever rms_norm_eps
 * says; every key the engine does not compute refused with its name. */
static void test_kimi_config(void **state)
{
    (void)state;
    static const char *const base = "\"vocab_size\": 64, \"hidden_size\": 32, \"num_hidden_layers\": 5, "
                                    "\"intermediate_size\": 48, \"moe_intermediate_size\": 16, "
                                    "\"num_attention_heads\": 4, \"kv_lora_rank\": 16, \"q_lora_rank\": null, "
                                    "\"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 4, \"v_head_dim\": 8, "
                                    "\"topk_group\": 1, \"routed_scaling_factor\": 2.0";
    static const char *const spellings[2] = {
        "\"max_position_embeddings\": 32, \"num_local_experts\": 8, \"num_experts_per_tok\": 2, \"n_group\": 2, "
        "\"n_shared_experts\": 2, \"norm_topk_prob\": false, \"linear_num_heads\": 2, \"linear_head_dim\": 8, "
        "\"linear_conv_kernel_dim\": 3, \"layer_types\": [\"linear_attention\", \"full_attention\", "
        "\"linear_attention\", \"full_attention\", \"linear_attention\"], "
        "\"mlp_layer_types\": [\"dense\", \"dense\", \"sparse\", \"sparse\", \"sparse\"]",
        "\"model_max_length\": 32, \"num_experts\": 8, \"num_experts_per_token\": 2, \"num_expert_group\": 2, "
        "\"num_shared_experts\": 2, \"moe_renormalize\": false, \"linear_attn_config\": {\"full_attn_layers\": [2, 4], "
        "\"kda_layers\": [1, 3, 5], \"head_dim\": 8, \"num_heads\": 2, \"short_conv_kernel_size\": 3}, "
        "\"first_k_dense_replace\": 2"};
    char json[2048];
    for (int sp = 0; sp < 2; sp++) {
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, %s}", base, spellings[sp]);
        if (mc_stack_config_parse("kimi_linear", json, "cfg", &cfg, &err) != MC_ERR_NONE)
            fail_msg("spelling %d: %s", sp, err.msg);
        for (int i = 0; i < 5; i++) {
            assert_int_equal(cfg.layers[i].family, i % 2 ? MC_FAMILY_ATTENTION : MC_FAMILY_KDA);
            assert_int_equal(cfg.layers[i].moe, i >= 2);
            assert_true(cfg.layers[i].dense && cfg.layers[i].dense_size == (i >= 2 ? 32 : 48));
        }
        const struct mc_kda_config *kd = &cfg.layers[0].mixer.u.kda;
        assert_true(kd->num_heads == 2 && kd->head_dim == 8 && kd->conv_kernel == 3 && kd->rms_norm_eps == 1e-5);
        const struct mc_attention_config *at = &cfg.layers[1].mixer.u.attention;
        assert_true(at->kv_lora_rank == 16 && at->q_lora_rank == 0 && at->head_dim == 12 && at->qk_rope_head_dim == 4 &&
                    at->v_head_dim == 8 && at->no_rope == 1 && at->rms_norm_eps == 1e-6 && at->cache_length == 32 &&
                    at->num_key_value_heads == 4);
        assert_true(cfg.moe.router == MC_ROUTER_SIGMOID_GROUPED && cfg.moe.act == MC_FFN_SWIGLU &&
                    cfg.moe.sum_in_dtype && !cfg.moe.renormalise && cfg.moe.n_experts == 8 && cfg.moe.top_k == 2 &&
                    cfg.moe.n_group == 2 && cfg.moe.topk_group == 1 && cfg.moe.routed_scaling == 2.0);
        assert_true(!cfg.tied && !cfg.residual_in_fp32 && !cfg.zero_centred && cfg.norm_eps == 1e-5);
    }
    { /* neither layer list: KimiLinearConfig's defaults (MLA where i > 0 and i % 4 == 0; one dense layer) */
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, \"max_position_embeddings\": 32, \"num_local_experts\": 8, "
                                    "\"num_experts_per_tok\": 2, \"linear_num_heads\": 2, \"linear_head_dim\": 8}", base);
        if (mc_stack_config_parse("kimi_linear", json, "cfg", &cfg, &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
        for (int i = 0; i < 5; i++) {
            assert_int_equal(cfg.layers[i].family, i == 4 ? MC_FAMILY_ATTENTION : MC_FAMILY_KDA);
            assert_int_equal(cfg.layers[i].moe, i >= 1);
        }
        assert_true(cfg.moe.renormalise && cfg.moe.n_group == 1);
    }
    static const struct {
        const char *extra, *needle;
    } bad[] = {
        {"\"hidden_act\": \"gelu\"", "'hidden_act' gelu"},
        {"\"num_key_value_heads\": 2", "'num_key_value_heads' (2)"},
        {"\"layer_types\": [\"linear_attention\", \"conv\", \"linear_attention\", \"full_attention\", "
         "\"linear_attention\"]", "'layer_types[1]'"},
        {"\"mlp_layer_types\": [\"dense\", \"moe\", \"sparse\", \"sparse\", \"sparse\"]", "'mlp_layer_types[1]'"},
        {"\"linear_attn_config\": {\"full_attn_layers\": [2], \"kda_layers\": [1, 3, 4]}", "layer 5 is in neither"},
        {"\"linear_attn_config\": {\"full_attn_layers\": [0], \"kda_layers\": [1, 2, 3, 4, 5]}",
         "'linear_attn_config.full_attn_layers[0]'"},
        {"\"num_local_experts\": 7, \"n_group\": 2", "multiple of n_group"},
        {"\"num_experts_per_tok\": 9", "num_experts_per_tok (9)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, \"max_position_embeddings\": 32, \"linear_num_heads\": 2, "
                                    "\"linear_head_dim\": 8, %s%s%s}", base, bad[i].extra,
                 strstr(bad[i].extra, "num_local_experts") ? "" : ", \"num_local_experts\": 8",
                 strstr(bad[i].extra, "num_experts_per_tok") ? "" : ", \"num_experts_per_tok\": 2");
        assert_int_equal(mc_stack_config_parse("kimi_linear", json, "cfg", &cfg, &err), MC_ERR_INPUT);
        if (strstr(err.msg, bad[i].needle) == NULL)
            fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].extra, err.msg, bad[i].needle);
        printf("  refused: %s\n", err.msg);
    }
}

/* Qwen3-Next's config.json as the C reader takes it: layer_types, or full attention every full_attention_interval-th
 * layer without it; the MoE at (i + 1) % decoder_sparse_step == 0 outside mlp_only_layers (an index past the last
 * layer is inert, as upstream's `not in`), its shared expert's size, the dense MLP elsewhere; the router; every key
 * the engine does not compute refused with its name. */
static void test_qwen3_next_config(void **state)
{
    (void)state;
    static const char *const base = "\"vocab_size\": 64, \"hidden_size\": 32, \"num_hidden_layers\": 6, "
                                    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8, "
                                    "\"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, "
                                    "\"linear_key_head_dim\": 8, \"linear_value_head_dim\": 8, "
                                    "\"intermediate_size\": 48, \"num_experts\": 8, "
                                    "\"moe_intermediate_size\": 16, \"shared_expert_intermediate_size\": 24";
    char json[2048];
    {
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, \"num_experts_per_tok\": 2, \"full_attention_interval\": 3, "
                                    "\"decoder_sparse_step\": 2, "
                                    "\"mlp_only_layers\": [3, 17], \"norm_topk_prob\": false}", base);
        if (mc_stack_config_parse("qwen3_next", json, "cfg", &cfg, &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
        static const int attn[6] = {0, 0, 1, 0, 0, 1}, moe[6] = {0, 1, 0, 0, 0, 1};
        for (int i = 0; i < 6; i++) {
            assert_int_equal(cfg.layers[i].family, attn[i] ? MC_FAMILY_ATTENTION : MC_FAMILY_GDN);
            assert_int_equal(cfg.layers[i].moe, moe[i]);
            assert_true(cfg.layers[i].dense && cfg.layers[i].dense_size == (moe[i] ? 24 : 48));
        }
        assert_int_equal(cfg.layers[0].mixer.u.gdn.layout, MC_GDN_LAYOUT_QWEN3_NEXT);
        assert_true(cfg.layers[2].mixer.u.attention.attn_output_gate &&
                    cfg.layers[2].mixer.u.attention.qk_norm == MC_QK_NORM_ZERO_CENTRED &&
                    cfg.layers[2].mixer.u.attention.partial_rotary_factor == 0.25);
        assert_true(cfg.moe.router == MC_ROUTER_SOFTMAX_TOPK && cfg.moe.shared_gate && !cfg.moe.renormalise);
        assert_true(cfg.zero_centred && !cfg.tied && !cfg.residual_in_fp32 && cfg.norm_eps == 1e-6);
    }
    { /* no layer_types: Qwen3NextConfig's interval of 4; no decoder_sparse_step: every layer a MoE layer */
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, \"num_experts_per_tok\": 2}", base);
        assert_int_equal(mc_stack_config_parse("qwen3_next", json, "cfg", &cfg, &err), MC_ERR_NONE);
        for (int i = 0; i < 6; i++)
            assert_true(cfg.layers[i].moe && cfg.layers[i].family == (i == 3 ? MC_FAMILY_ATTENTION : MC_FAMILY_GDN));
        assert_true(cfg.moe.renormalise);
    }
    static const struct {
        const char *extra, *needle;
    } bad[] = {
        {"\"hidden_act\": \"gelu\"", "'hidden_act' gelu"},
        {"\"decoder_sparse_step\": 0", "'decoder_sparse_step'"},
        {"\"mlp_only_layers\": 2", "'mlp_only_layers' must be a list"},
        {"\"mlp_only_layers\": [1.5]", "'mlp_only_layers[0]'"},
        {"\"num_experts_per_tok\": 9", "num_experts (8)"},
        {"\"layer_types\": [\"linear_attention\", \"conv\", \"linear_attention\", \"full_attention\", "
         "\"linear_attention\", \"full_attention\"]", "'layer_types[1]'"},
        {"\"full_attention_interval\": 0", "'full_attention_interval'"},
        {"\"rope_parameters\": {\"rope_type\": \"yarn\"}", "rope_type' yarn"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, %s%s}", base, bad[i].extra,
                 strstr(bad[i].extra, "num_experts_per_tok") ? "" : ", \"num_experts_per_tok\": 2");
        assert_int_equal(mc_stack_config_parse("qwen3_next", json, "cfg", &cfg, &err), MC_ERR_INPUT);
        if (strstr(err.msg, bad[i].needle) == NULL)
            fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].extra, err.msg, bad[i].needle);
        printf("  refused: %s\n", err.msg);
    }
}

/* Qwen3.5-MoE's text config: Qwen3.5's GDN projections, the sparse block on every layer (no dense MLP, no sparse step,
 * a router that always renormalises), Qwen3_5MoeTextConfig's defaults; no expert refused. */
static void test_qwen3_5_moe_config(void **state)
{
    (void)state;
    static const char *const base = "\"vocab_size\": 64, \"hidden_size\": 32, \"num_hidden_layers\": 4, "
                                    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8, "
                                    "\"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, "
                                    "\"linear_key_head_dim\": 8, \"linear_value_head_dim\": 8, "
                                    "\"moe_intermediate_size\": 16, \"shared_expert_intermediate_size\": 24";
    char json[2048];
    struct mc_stack_config cfg;
    struct mc_error err = {0};
    /* decoder_sparse_step, mlp_only_layers and norm_topk_prob are no keys of this model: not read */
    snprintf(json, sizeof json, "{%s, \"num_experts\": 8, \"num_experts_per_tok\": 2, \"decoder_sparse_step\": 2, "
                                "\"mlp_only_layers\": [0], \"norm_topk_prob\": false}", base);
    if (mc_stack_config_parse("qwen3_5_moe_text", json, "cfg", &cfg, &err) != MC_ERR_NONE)
        fail_msg("%s", err.msg);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(cfg.layers[i].family, i == 3 ? MC_FAMILY_ATTENTION : MC_FAMILY_GDN);
        assert_true(cfg.layers[i].moe && cfg.layers[i].dense && cfg.layers[i].dense_size == 24);
    }
    assert_int_equal(cfg.layers[0].mixer.u.gdn.layout, MC_GDN_LAYOUT_QWEN3_5);
    assert_true(cfg.moe.router == MC_ROUTER_SOFTMAX_TOPK && cfg.moe.shared_gate && cfg.moe.renormalise &&
                cfg.zero_centred && !cfg.tied && cfg.ffn_size == 24);
    snprintf(json, sizeof json, "{%s}", base); /* Qwen3_5MoeTextConfig's 256 experts, 8 per token */
    assert_int_equal(mc_stack_config_parse("qwen3_5_moe_text", json, "cfg", &cfg, &err), MC_ERR_NONE);
    assert_true(cfg.moe.n_experts == 256 && cfg.moe.top_k == 8);
    snprintf(json, sizeof json, "{%s, \"num_experts\": 0}", base);
    assert_int_equal(mc_stack_config_parse("qwen3_5_moe_text", json, "cfg", &cfg, &err),
                     MC_ERR_INPUT);
    assert_non_null(strstr(err.msg, "'num_experts'"));
    printf("  refused: %s\n", err.msg);
}

/* FalconH1's config as the C reader takes it: two mixer slots a decoder layer with their multipliers, the
 * multipliers of the glue, mamba_d_ssm null as mamba_expand x hidden_size and mamba_d_head "auto"; every refusal
 * names its key. */
static void test_falcon_config(void **state)
{
    (void)state;
    static const char *const base = "\"vocab_size\": 64, \"hidden_size\": 32, \"num_hidden_layers\": 2, "
                                    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 40, "
                                    "\"mamba_n_heads\": 4, \"mamba_d_state\": 8, \"mamba_n_groups\": 2";
    char json[2048];
    struct mc_stack_config cfg;
    struct mc_error err = {0};
    snprintf(json, sizeof json,
             "{%s, \"mamba_d_ssm\": 48, \"mamba_d_head\": 12, \"mamba_rms_norm\": true, "
             "\"mamba_norm_before_gate\": false, \"embedding_multiplier\": 2.0, \"lm_head_multiplier\": 0.4, "
             "\"mlp_multipliers\": [0.9, 0.6], \"key_multiplier\": 0.7, \"attention_in_multiplier\": 1.1, "
             "\"attention_out_multiplier\": 0.8, \"ssm_multipliers\": [0.5, 0.9, 1.2, 0.7, 0.6], "
             "\"ssm_in_multiplier\": 1.3, \"ssm_out_multiplier\": 0.5}",
             base);
    if (mc_stack_config_parse("falcon_h1", json, "cfg", &cfg, &err) != MC_ERR_NONE)
        fail_msg("%s", err.msg);
    assert_int_equal(cfg.n_layers, 4);
    assert_int_equal(cfg.decoder_layers, 2);
    for (int64_t j = 0; j < 2; j++) {
        const struct mc_stack_layer *a = &cfg.layers[2 * j], *b = &cfg.layers[2 * j + 1];
        assert_true(a->family == MC_FAMILY_MAMBA2 && a->parallel == 1 && !a->dense);
        assert_true(b->family == MC_FAMILY_ATTENTION && b->parallel == 2 && b->dense && b->dense_size == 40);
        assert_true(a->in_multiplier == 1.3 && a->out_multiplier == 0.5);
        assert_true(b->in_multiplier == 1.1 && b->out_multiplier == 0.8);
        assert_int_equal(a->mixer.u.mamba2.num_heads * a->mixer.u.mamba2.head_dim, 48);
        assert_int_equal(a->mixer.u.mamba2.norm_group_size, 24); /* per group: 48 / 2 */
        assert_true(!a->mixer.u.mamba2.no_gated_norm && !a->mixer.u.mamba2.norm_before_gate);
        assert_int_equal(b->mixer.u.attention.head_dim, 8);
        assert_false(b->mixer.u.attention.no_rope);
        assert_int_equal(mc_stack_decoder_layer(&cfg, 2 * j + 1), j);
    }
    assert_true(cfg.embedding_multiplier == 2.0 && cfg.lm_head_multiplier == 0.4 && cfg.key_multiplier == 0.7);
    assert_true(cfg.mlp_gate_multiplier == 0.9 && cfg.mlp_down_multiplier == 0.6 && cfg.ssm_multipliers[4] == 0.6);
    assert_true(!cfg.tied && !cfg.residual_in_fp32 && cfg.residual_multiplier == 1.0);
    char name[MC_STACK_NAME_LEN + 32];
    mc_stack_name_layer_norm(&cfg, 3, name);
    assert_string_equal(name, "model.layers.1.input_layernorm.weight");
    mc_stack_name_mixer_param(&cfg, 2, "in_proj.weight", name);
    assert_string_equal(name, "model.layers.1.mamba.in_proj.weight");
    mc_stack_name_mixer_param(&cfg, 3, "k_proj.weight", name);
    assert_string_equal(name, "model.layers.1.self_attn.k_proj.weight");
    mc_stack_name_ffn(&cfg, 3, 3, name);
    assert_string_equal(name, "model.layers.1.feed_forward.down_proj.weight");
    /* mamba_d_ssm null: mamba_expand x hidden_size; mamba_d_head "auto": the channels / heads */
    snprintf(json, sizeof json,
             "{%s, \"mamba_d_ssm\": null, \"mamba_d_head\": \"auto\", \"mamba_rms_norm\": true, "
             "\"mamba_norm_before_gate\": false}",
             base);
    assert_int_equal(mc_stack_config_parse("falcon_h1", json, "cfg", &cfg, &err), MC_ERR_NONE);
    assert_int_equal(cfg.layers[0].mixer.u.mamba2.head_dim, 16);
    /* the norm switches of FalconH1Mixer as the Mamba2 family's options: FalconH1Config's defaults (mamba_rms_norm
     * false: no norm, whatever mamba_norm_before_gate says), the norm with the gate after it, the gate first */
    static const struct {
        const char *extra;
        int no_norm, before_gate;
    } norms[] = {
        {"\"mamba_d_ssm\": 48", 1, 0},
        {"\"mamba_d_ssm\": 48, \"mamba_norm_before_gate\": false", 1, 0},
        {"\"mamba_d_ssm\": 48, \"mamba_rms_norm\": true", 0, 1},
        {"\"mamba_d_ssm\": 48, \"mamba_rms_norm\": true, \"mamba_norm_before_gate\": true", 0, 1},
        {"\"mamba_d_ssm\": 48, \"mamba_rms_norm\": true, \"mamba_norm_before_gate\": false", 0, 0},
    };
    for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++) {
        snprintf(json, sizeof json, "{%s, %s}", base, norms[i].extra);
        if (mc_stack_config_parse("falcon_h1", json, "cfg", &cfg, &err) != MC_ERR_NONE)
            fail_msg("%s: %s", norms[i].extra, err.msg);
        for (int64_t j = 0; j < cfg.decoder_layers; j++) {
            assert_int_equal(cfg.layers[2 * j].mixer.u.mamba2.no_gated_norm, norms[i].no_norm);
            assert_int_equal(cfg.layers[2 * j].mixer.u.mamba2.norm_before_gate, norms[i].before_gate);
        }
    }
    static const struct {
        const char *extra, *needle;
    } bad[] = {
        {"\"mamba_d_ssm\": 48, \"mamba_rms_norm\": true, \"mamba_norm_before_gate\": false, \"projectors_bias\": true",
         "'projectors_bias'"},
        {"\"mamba_d_ssm\": 48, \"mamba_rms_norm\": true, \"mamba_norm_before_gate\": false, \"mlp_bias\": true",
         "'mlp_bias'"},
        {"\"mamba_d_ssm\": 48, \"mamba_rms_norm\": true, \"mamba_norm_before_gate\": false, \"hidden_act\": \"gelu\"",
         "'hidden_act' gelu"},
        {"\"mamba_d_ssm\": 48, \"mamba_rms_norm\": true, \"mamba_norm_before_gate\": false, \"ssm_multipliers\": [1, 2]",
         "'ssm_multipliers'"},
        {"\"mamba_d_ssm\": 48, \"mamba_rms_norm\": true, \"mamba_norm_before_gate\": false, \"mlp_multipliers\": 2",
         "'mlp_multipliers'"},
        {"\"mamba_d_ssm\": 50, \"mamba_rms_norm\": true, \"mamba_norm_before_gate\": false, \"mamba_d_head\": 12",
         "mamba_d_ssm (50)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = (struct mc_error){0};
        snprintf(json, sizeof json, "{%s, %s}", base, bad[i].extra);
        assert_int_equal(mc_stack_config_parse("falcon_h1", json, "cfg", &cfg, &err), MC_ERR_INPUT);
        if (strstr(err.msg, bad[i].needle) == NULL)
            fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].extra, err.msg, bad[i].needle);
        printf("  refused: %s\n", err.msg);
    }
    snprintf(json, sizeof json,
             "{%s, \"num_hidden_layers\": 33, \"mamba_d_ssm\": 48, \"mamba_rms_norm\": true, "
             "\"mamba_norm_before_gate\": false}",
             "\"vocab_size\": 64, \"hidden_size\": 32, \"num_attention_heads\": 4, \"mamba_n_heads\": 4");
    err = (struct mc_error){0};
    assert_int_equal(mc_stack_config_parse("falcon_h1", json, "cfg", &cfg, &err), MC_ERR_INPUT);
    assert_non_null(strstr(err.msg, "'num_hidden_layers'"));
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) == NULL ? -1 : 0;
}

/* LFM2-MoE's config: LFM2's layer_types, the dense MLP below num_dense_layers (intermediate_size as given), the
 * sigmoid router's keys and Lfm2MoeConfig's defaults; what the engine does not compute refused with its key. */
static void test_lfm2_moe_config(void **state)
{
    (void)state;
    static const char *const base = "\"vocab_size\": 64, \"hidden_size\": 32, \"num_hidden_layers\": 4, "
                                    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 48, "
                                    "\"moe_intermediate_size\": 16, \"num_experts\": 8, \"num_experts_per_tok\": 2, "
                                    "\"layer_types\": [\"conv\", \"full_attention\", \"conv\", \"conv\"], "
                                    "\"max_position_embeddings\": 64";
    char json[2048];
    {
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, \"num_dense_layers\": 1, \"use_expert_bias\": false, "
                                    "\"norm_topk_prob\": false, \"routed_scaling_factor\": 2.5, \"tie_word_embeddings\": false}",
                 base);
        if (mc_stack_config_parse("lfm2_moe", json, "cfg", &cfg, &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(cfg.layers[i].family, i == 1 ? MC_FAMILY_ATTENTION : MC_FAMILY_SHORTCONV);
            assert_int_equal(cfg.layers[i].dense, i < 1);
            assert_int_equal(cfg.layers[i].moe, i >= 1);
            assert_int_equal(cfg.layers[i].dense_size, i < 1 ? 48 : 0);
        }
        assert_true(cfg.moe.router == MC_ROUTER_SIGMOID_BIAS && !cfg.moe.expert_bias && !cfg.moe.renormalise &&
                    cfg.moe.routed_scaling == 2.5 && cfg.moe.n_experts == 8 && cfg.moe.top_k == 2 &&
                    cfg.moe.expert_size == 16);
        assert_true(!cfg.tied && !cfg.residual_in_fp32 && cfg.norm_eps == 1e-5 && !cfg.zero_centred);
        const struct mc_attention_config *at = &cfg.layers[1].mixer.u.attention;
        assert_true(at->head_dim == 8 && at->qk_norm == MC_QK_NORM_RMS && at->rope_theta == 1000000.0 &&
                    at->cache_length == 64 && at->partial_rotary_factor == 1.0);
        char name[MC_STACK_NAME_LEN];
        mc_stack_name_moe(&cfg, 2, 3, name);
        assert_string_equal(name, "model.layers.2.feed_forward.expert_bias");
        mc_stack_name_moe(&cfg, 2, 0, name);
        assert_string_equal(name, "model.layers.2.feed_forward.gate.weight");
    }
    { /* the defaults: num_dense_layers 2, the expert bias, norm_topk_prob, routed scaling 1, a tied head */
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s}", base);
        assert_int_equal(mc_stack_config_parse("lfm2_moe", json, "cfg", &cfg, &err), MC_ERR_NONE);
        assert_true(cfg.layers[1].dense && !cfg.layers[1].moe && cfg.layers[2].moe && !cfg.layers[2].dense);
        assert_true(cfg.moe.expert_bias && cfg.moe.renormalise && cfg.moe.routed_scaling == 1.0 && cfg.tied);
    }
    static const struct {
        const char *extra, *needle;
    } bad[] = {
        {"\"num_dense_layers\": 5", "'num_dense_layers' must be in [0, num_hidden_layers (4)]"},
        {"\"num_dense_layers\": -1", "'num_dense_layers'"},
        {"\"head_dim\": 16", "head_dim 16"},
        {"\"partial_rotary_factor\": 0.5", "partial_rotary_factor 0.5"},
        {"\"rope_parameters\": {\"rope_type\": \"yarn\"}", "rope_type' yarn"},
        {"\"routed_scaling_factor\": \"1.0\"", "'routed_scaling_factor' must be a number"},
        {"\"conv_L_cache\": 0", "layer 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, %s}", base, bad[i].extra);
        assert_int_equal(mc_stack_config_parse("lfm2_moe", json, "cfg", &cfg, &err), MC_ERR_INPUT);
        if (strstr(err.msg, bad[i].needle) == NULL)
            fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].extra, err.msg, bad[i].needle);
        printf("  refused: %s\n", err.msg);
    }
    {
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        assert_int_equal(mc_stack_config_parse("lfm2_moe", "{\"vocab_size\": 64, \"hidden_size\": 32, "
                                               "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                                               "\"num_key_value_heads\": 2, \"max_position_embeddings\": 64}", "cfg", &cfg, &err),
                         MC_ERR_INPUT);
        assert_non_null(strstr(err.msg, "'layer_types' must list num_hidden_layers (2) layers"));
        printf("  refused: %s\n", err.msg);
    }
}

static void test_minimax_config(void **state)
{
    (void)state;
    static const char *const base = "\"vocab_size\": 64, \"hidden_size\": 32, \"num_hidden_layers\": 4, "
                                    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 16, "
                                    "\"num_local_experts\": 4, \"num_experts_per_tok\": 2, \"max_position_embeddings\": 64";
    char json[2048];
    { /* layer_types, head_dim, block_size and the six factors as given */
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, \"layer_types\": [\"linear_attention\", \"linear_attention\", "
                                    "\"full_attention\", \"linear_attention\"], \"head_dim\": 16, \"block_size\": 8, "
                                    "\"linear_attn_alpha_factor\": 3.5, \"linear_attn_beta_factor\": 0.5, "
                                    "\"full_attn_alpha_factor\": 2.5, \"full_attn_beta_factor\": 0.75, "
                                    "\"mlp_alpha_factor\": 1.5, \"mlp_beta_factor\": 1.25, \"rms_norm_eps\": 1e-6}",
                 base);
        if (mc_stack_config_parse("minimax", json, "cfg", &cfg, &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
        for (int i = 0; i < 4; i++) {
            const struct mc_stack_layer *Z = &cfg.layers[i];
            assert_int_equal(Z->family, i == 2 ? MC_FAMILY_ATTENTION : MC_FAMILY_LIGHTNING);
            assert_true(Z->scaled && Z->moe && !Z->dense && Z->dense_size == 0);
            assert_true(Z->alpha == (i == 2 ? 2.5 : 3.5) && Z->beta == (i == 2 ? 0.75 : 0.5));
            if (i != 2) {
                const struct mc_lightning_config *li = &Z->mixer.u.lightning;
                assert_true(li->layer_idx == i && li->num_hidden_layers == 4 && li->block_size == 8 &&
                            li->head_dim == 16 && li->num_attention_heads == 4 && li->norm_eps == 1e-6);
            }
        }
        assert_true(cfg.mlp_alpha == 1.5 && cfg.mlp_beta == 1.25 && cfg.norm_eps == 1e-6 && !cfg.tied &&
                    !cfg.residual_in_fp32);
        assert_true(cfg.moe.router == MC_ROUTER_SOFTMAX_TOPK && cfg.moe.renormalise && cfg.moe.weights_fp32 &&
                    cfg.moe.n_experts == 4 && cfg.moe.top_k == 2 && cfg.moe.expert_size == 16);
        const struct mc_attention_config *at = &cfg.layers[2].mixer.u.attention;
        assert_true(at->head_dim == 16 && at->qk_norm == MC_QK_NORM_NONE && at->rope_theta == 1000000.0 &&
                    at->num_key_value_heads == 2 && at->cache_length == 64);
        char name[MC_STACK_NAME_LEN], full[MC_STACK_NAME_LEN + 32];
        mc_stack_name_moe(&cfg, 1, 1, name);
        assert_string_equal(name, "model.layers.1.mlp.experts.gate_up_proj");
        mc_stack_name_ffn(&cfg, 1, 0, name);
        assert_string_equal(name, "model.layers.1.post_attention_layernorm.weight");
        mc_stack_name_mixer_param(&cfg, 1, "qkv_proj.weight", full);
        assert_string_equal(full, "model.layers.1.self_attn.qkv_proj.weight");
        mc_stack_name_layer_norm(&cfg, 3, name);
        assert_string_equal(name, "model.layers.3.input_layernorm.weight");
    }
    { /* the defaults: full attention at even i, head_dim D / H, block_size 256, every factor 1, rms_norm_eps 1e-5,
         num_experts read as num_local_experts */
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        if (mc_stack_config_parse("minimax", "{\"vocab_size\": 64, \"hidden_size\": 32, \"num_hidden_layers\": 3, "
                                  "\"num_attention_heads\": 4, \"num_key_value_heads\": 4, \"num_experts\": 6, "
                                  "\"max_position_embeddings\": 64}", "cfg",
                                  &cfg, &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(cfg.layers[i].family, i % 2 == 0 ? MC_FAMILY_ATTENTION : MC_FAMILY_LIGHTNING);
            assert_true(cfg.layers[i].alpha == 1.0 && cfg.layers[i].beta == 1.0);
        }
        assert_true(cfg.layers[1].mixer.u.lightning.block_size == 256 && cfg.layers[1].mixer.u.lightning.head_dim == 8);
        assert_true(cfg.norm_eps == 1e-5 && cfg.moe.n_experts == 6 && cfg.moe.top_k == 2 && cfg.mlp_alpha == 1.0);
    }
    static const struct {
        const char *extra, *needle;
    } bad[] = {
        {"\"sliding_window\": 16", "'sliding_window'"},
        {"\"attn_type_list\": [0, 1, 0, 1]", "'attn_type_list' without 'layer_types'"},
        {"\"hidden_act\": \"gelu\"", "'hidden_act' gelu"},
        {"\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e4, \"partial_rotary_factor\": 0.5}",
         "partial_rotary_factor 0.5"},
        {"\"num_experts\": 1", "num_experts_per_tok (2)"},
        {"\"mlp_beta_factor\": \"1\"", "'mlp_beta_factor' must be a number"},
        {"\"layer_types\": [\"linear_attention\", \"mamba\", \"full_attention\", \"full_attention\"]",
         "'layer_types[1]'"},
        {"\"block_size\": 0", "'block_size'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, %s}", bad[i].extra, base);
        assert_int_equal(mc_stack_config_parse("minimax", json, "cfg", &cfg, &err), MC_ERR_INPUT);
        if (strstr(err.msg, bad[i].needle) == NULL)
            fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].extra, err.msg, bad[i].needle);
        printf("  refused: %s\n", err.msg);
    }
}

static int teardown(void **state)
{
    (void)state;
    return mc_test_tmpdir_remove(dir);
}

static void test_inkling_config(void **state)
{
    (void)state;
    static const char *const base = "\"vocab_size\": 64, \"hidden_size\": 32, \"num_hidden_layers\": 4, "
                                    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8, "
                                    "\"swa_num_attention_heads\": 2, \"swa_num_key_value_heads\": 1, "
                                    "\"swa_head_dim\": 16, \"intermediate_size\": 24, \"moe_intermediate_size\": 8, "
                                    "\"n_routed_experts\": 4, \"num_experts_per_tok\": 2, \"n_shared_experts\": 2, "
                                    "\"max_position_embeddings\": 64";
    static const char *const base_ctx = "\"vocab_size\": 64, \"hidden_size\": 32, \"num_hidden_layers\": 4, "
                                        "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8, "
                                        "\"intermediate_size\": 24, \"moe_intermediate_size\": 8, "
                                        "\"num_experts_per_tok\": 2";
    char json[2048];
    { /* layer_types and mlp_layer_types as save_pretrained writes them */
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, \"layer_types\": [\"hybrid_sliding\", \"hybrid\", \"hybrid_sliding\", "
                                    "\"hybrid\"], \"mlp_layer_types\": [\"dense\", \"sparse\", \"dense\", \"sparse\"], "
                                    "\"sliding_window_size\": 3, \"rel_extent\": 5, \"d_rel\": 4, "
                                    "\"conv_kernel_size\": 3, \"route_scale\": 2.5, "
                                    "\"logits_mup_width_multiplier\": 3.0}",
                 base);
        if (mc_stack_config_parse("inkling_text", json, "cfg", &cfg, &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
        for (int i = 0; i < 4; i++) {
            const struct mc_stack_layer *Z = &cfg.layers[i];
            const struct mc_attention_config *at = &Z->mixer.u.attention;
            assert_int_equal(Z->family, MC_FAMILY_ATTENTION);
            assert_true(Z->moe == (i % 2) && Z->dense == !(i % 2) && Z->dense_size == (i % 2 ? 0 : 24));
            assert_true(at->no_rope && at->qk_norm == MC_QK_NORM_RMS && at->sconv_kernel == 3 && at->rel_dim == 4 &&
                        at->cache_length == 64 && at->rms_norm_eps == 1e-6);
            if (i % 2 == 0) /* sliding: the swa heads, the window its relative extent */
                assert_true(at->num_attention_heads == 2 && at->num_key_value_heads == 1 && at->head_dim == 16 &&
                            at->sliding_window == 3 && at->rel_extent == 3 && at->softmax_scale == 1.0 / 16.0);
            else
                assert_true(at->num_attention_heads == 4 && at->num_key_value_heads == 2 && at->head_dim == 8 &&
                            at->sliding_window == 0 && at->rel_extent == 5 && at->softmax_scale == 1.0 / 8.0);
        }
        assert_true(cfg.embed_norm && cfg.head_divisor == 3.0 && cfg.ffn_sconv == 3 && cfg.ffn_global_scale &&
                    !cfg.tied && !cfg.residual_in_fp32 && cfg.norm_eps == 1e-6);
        assert_true(cfg.moe.router == MC_ROUTER_SIGMOID_SINK && cfg.moe.n_experts == 4 && cfg.moe.top_k == 2 &&
                    cfg.moe.n_shared == 2 && cfg.moe.expert_size == 8 && cfg.moe.routed_scaling == 2.5);
        struct mc_family_shape sh;
        mc_stack_layer_shape(&cfg, 1, &sh); /* the count, k, v and out windows, then mlp_sconv's */
        assert_true(sh.conv_channels == 1 + 2 * 16 + 32 + 32 && sh.conv_kernel == 3);
        char name[MC_STACK_NAME_LEN], full[MC_STACK_NAME_LEN + 32];
        mc_stack_name_mixer_param(&cfg, 2, "out_sconv.conv1d.weight", full);
        assert_string_equal(full, "model.layers.2.attn_sconv.conv1d.weight");
        mc_stack_name_mixer_param(&cfg, 2, "rel_logits_proj.proj", full);
        assert_string_equal(full, "model.layers.2.self_attn.rel_logits_proj.proj");
        mc_stack_name_inkling(&cfg, 0, 0, name);
        assert_string_equal(name, "model.embed_tokens.embed_norm.weight");
        mc_stack_name_inkling(&cfg, 3, 1, name);
        assert_string_equal(name, "model.layers.3.mlp_sconv.conv1d.weight");
        mc_stack_name_inkling(&cfg, 1, 6, name);
        assert_string_equal(name, "model.layers.1.mlp.shared_experts.down_proj");
        mc_stack_name_moe(&cfg, 1, 3, name);
        assert_string_equal(name, "model.layers.1.mlp.gate.e_score_correction_bias");
    }
    { /* the defaults: every i with (i + 1) % 6 != 0 sliding (local_layer_ids when given), dense below dense_mlp_idx,
         the checkpoints' aliases read as their fields, dense_intermediate_size the dense width */
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, \"local_layer_ids\": [1, 2], \"dense_mlp_idx\": 1, \"sliding_window\": 6, "
                                    "\"sconv_kernel_size\": 2, \"num_local_experts\": 4, \"embedding_multiplier\": 12, "
                                    "\"model_max_length\": 48, \"dense_intermediate_size\": 40}",
                 base_ctx);
        if (mc_stack_config_parse("inkling_text", json, "cfg", &cfg, &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
        for (int i = 0; i < 4; i++) {
            const struct mc_attention_config *at = &cfg.layers[i].mixer.u.attention;
            assert_true((at->sliding_window == 6) == (i == 1 || i == 2) && at->sconv_kernel == 2 &&
                        at->cache_length == 48 && at->rel_dim == 16);
            assert_true(cfg.layers[i].moe == (i >= 1) && cfg.layers[i].dense_size == (i >= 1 ? 0 : 40));
        }
        assert_true(cfg.head_divisor == 12.0 && cfg.moe.expert_size == 24 && cfg.moe.routed_scaling == 8.0);
        if (mc_stack_config_parse("inkling_text", "{\"vocab_size\": 64, \"hidden_size\": 32, \"num_hidden_layers\": 7, "
                                  "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8, "
                                  "\"max_position_embeddings\": 64}",
                                  "cfg", &cfg, &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
        for (int i = 0; i < 7; i++)
            assert_true((cfg.layers[i].mixer.u.attention.sliding_window == 512) == ((i + 1) % 6 != 0));
    }
    static const struct {
        const char *extra, *needle;
    } bad[] = {
        {"\"log_scaling_n_floor\": 128", "'log_scaling_n_floor'"},
        {"\"shared_expert_sink\": false", "'shared_expert_sink'"},
        {"\"unpadded_vocab_size\": 60", "'unpadded_vocab_size' 60"},
        {"\"hidden_act\": \"gelu\"", "'hidden_act' gelu"},
        {"\"layer_types\": [\"hybrid\", \"sliding_attention\", \"hybrid\", \"hybrid\"]", "'layer_types[1]'"},
        {"\"mlp_layer_types\": [\"dense\", \"moe\", \"dense\", \"dense\"]", "'mlp_layer_types[1]'"},
        {"\"sliding_window\": 6, \"sliding_window_size\": 7", "'sliding_window' and 'sliding_window_size' disagree"},
        {"\"conv_kernel_size\": 0", "'conv_kernel_size'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct mc_stack_config cfg;
        struct mc_error err = {0};
        snprintf(json, sizeof json, "{%s, %s}", bad[i].extra, base);
        assert_int_equal(mc_stack_config_parse("inkling_text", json, "cfg", &cfg, &err), MC_ERR_INPUT);
        if (strstr(err.msg, bad[i].needle) == NULL)
            fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].extra, err.msg, bad[i].needle);
        printf("  refused: %s\n", err.msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_pass),
        cmocka_unit_test(test_nemotron_config),
        cmocka_unit_test(test_falcon_config),
        cmocka_unit_test(test_glue_mutants),
        cmocka_unit_test(test_mixer_layer_mutants),
        cmocka_unit_test(test_qwen3_next_config),
        cmocka_unit_test(test_kimi_config),
        cmocka_unit_test(test_qwen3_5_moe_config),
        cmocka_unit_test(test_lfm2_moe_config),
        cmocka_unit_test(test_minimax_config),
        cmocka_unit_test(test_inkling_config),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
