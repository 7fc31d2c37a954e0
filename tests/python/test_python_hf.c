/*
 * test_python_hf.c — the Hugging Face adapter (python/mixcheck_backend/hf.py) through the mixcheck
 * command: transformers' Lfm2ShortConv and Qwen3.5 Gated DeltaNet pass every unpadded scenario of a
 * small case in f32, the scenarios without a packed call are unsupported (never passed), and a
 * known upstream deviation is found (HF Mamba1 restarts the scan from a zero state in a multi-token
 * forward on a primed cache, docs/semantics.md §A.1, bug class 8.7); hf-attention (Qwen3NextAttention,
 * Lfm2Attention, BambaAttention with its KV cache mapped onto mixcheck's export layout) passes every
 * unpacked scenario of every attention case in f32, and in f64 its eager path's float32 softmax turns
 * a fully masked left-pad query into NaN (docs/semantics.md §12.6 asks a finite pad output); hf-lightning
 * (MiniMaxLightningAttention, MiniMaxCache) and hf-kda (KimiLinearDeltaAttention) pass every unpacked scenario
 * of the unpadded lightning / KDA cases in f32 and let a right pad decay the state. The interpreter is
 * $MIXCHECK_HF_PYTHON, else /work/venv/bin/python; skipped (77) where it cannot import torch and
 * transformers (CI does not install them).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hfpython.h"

#include "capture.h"

#define MIXCHECK MC_BINARY_DIR "/mixcheck"

static char out[1 << 18];
static const char *python;

static int run(const char *args)
{
    char full[4096];
    snprintf(full, sizeof full, "%s run %s --python '%s' --python-backend mixcheck_backend.hf", MIXCHECK, args, python);
    return mc_capture(full, out, sizeof out);
}

static void expect(const char *text)
{
    if (strstr(out, text) == NULL)
        fail_msg("expected '%s' in:\n%.6000s", text, out);
}

static void test_shortconv_and_gdn_pass_unpadded_cases_in_f32(void **state)
{
    (void)state;
    int rc = run("cases/shortconv/k4.yaml cases/gdn/tiny.yaml -k '*/hf-*/f32' -q");
    if (rc != 0)
        fail_msg("exit %d:\n%.6000s", rc, out);
    expect(" 0 failed, 0 errored,");
    expect("UNSUP shortconv-k4             packed_prefill         hf-shortconv f32");
}

static void test_mamba1_continued_forward_restarts_the_state(void **state)
{
    (void)state;
    assert_int_equal(run("cases/mamba1/tiny.yaml -k '/chunked/hf-mamba/f32'"), 1);
    expect("FAIL  mamba1-tiny              chunked                hf-mamba   f32");
    expect("recurrent_state");
}

static void test_attention_passes_every_case_in_f32(void **state)
{
    (void)state;
    int rc = run("cases/attention -k '*/hf-attention/f32' -q");
    if (rc != 0)
        fail_msg("exit %d:\n%.6000s", rc, out);
    expect(" 0 failed, 0 errored,");
    expect("UNSUP attention-tiny           packed_prefill         hf-attention f32");
    const char *p = strstr(out, "check(s): ");
    assert_non_null(p);
    assert_true(atoi(p + 10) >= 30); /* 34 passed with transformers 5.24: every scenario but the packed ones */
}

static void test_attention_f64_left_pad_output_is_nan(void **state)
{
    (void)state;
    assert_int_equal(run("cases/attention/leftpad.yaml -k '/prefill/hf-attention/f64'"), 1);
    expect("FAIL  attention-leftpad        prefill                hf-attention f64");
    expect("non-finite value(s)");
}

static void test_lightning_and_kda_pass_unpadded_cases_in_f32(void **state)
{
    (void)state;
    int rc = run("cases/lightning/tiny.yaml cases/lightning/odd.yaml cases/kda/tiny.yaml cases/kda/odd.yaml "
                 "-k '*/hf-*/f32' -q");
    if (rc != 0)
        fail_msg("exit %d:\n%.6000s", rc, out);
    expect(" 0 failed, 0 errored,");
    expect("UNSUP lightning-tiny           packed_prefill         hf-lightning f32");
    expect("UNSUP kda-tiny                 packed_prefill         hf-kda     f32");
    const char *p = strstr(out, "check(s): ");
    assert_non_null(p);
    assert_true(atoi(p + 10) >= 30); /* 34 passed with transformers 5.24: every unpacked scenario */
}

static void test_linear_right_pads_decay_the_state(void **state)
{
    (void)state;
    /* HF masks a pad's projections but still decays the state by it (docs/semantics.md §13.5, §14.5);
     * in KDA the zeroed pads also shift into the conv window */
    assert_int_equal(run("cases/lightning/rightpad.yaml cases/kda/rightpad.yaml -k '*/right_padded_batch/hf-*/f32'"),
                     1);
    expect("FAIL  lightning-rightpad       right_padded_batch     hf-lightning f32");
    expect("FAIL  kda-rightpad             right_padded_batch     hf-kda     f32");
    expect("recurrent_state (all runs)");
    expect("conv_state (all runs)");
    expect(" 0 passed, 2 failed, 0 errored,");
}

int main(void)
{
    if ((python = mc_test_hf_python("test_python_hf")) == NULL)
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shortconv_and_gdn_pass_unpadded_cases_in_f32),
        cmocka_unit_test(test_mamba1_continued_forward_restarts_the_state),
        cmocka_unit_test(test_attention_passes_every_case_in_f32),
        cmocka_unit_test(test_attention_f64_left_pad_output_is_nan),
        cmocka_unit_test(test_lightning_and_kda_pass_unpadded_cases_in_f32),
        cmocka_unit_test(test_linear_right_pads_decay_the_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
