/*
 * fuzz_case_yaml.c — libFuzzer target for the YAML loaders (harness/src/case/yamldoc.c, yamlread.c,
 * case.c, tolerance.c): each input is loaded from memory as a case file that sits in cases/mamba2/
 * (so `tolerance: ../tolerances/mamba2.yaml` resolves and the whole schema is reachable) and as a
 * tolerance profile. Beyond the sanitizers, it traps when a load fails without an error message or
 * with a message that does not start with the file's name, and when a load succeeds without an id,
 * a scenario or a profile entry.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "case/case.h"

#define CASE_NAME MC_SOURCE_DIR "/cases/mamba2/fuzz-input.yaml"
#define TOL_NAME MC_SOURCE_DIR "/cases/tolerances/fuzz-input.yaml"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(enum mc_err_code rc, const struct mc_error *err, const char *name)
{
    if (rc == MC_ERR_NONE)
        return;
    if (err->code != rc || err->msg[0] == '\0' || memchr(err->msg, '\0', sizeof err->msg) == NULL)
        __builtin_trap();
    /* the message names the input, or (for a profile it names) the key in the input */
    if (rc == MC_ERR_INPUT && strncmp(err->msg, name, strlen(name)) != 0 &&
        strstr(err->msg, MC_SOURCE_DIR "/cases/") == NULL)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mc_case c;
    struct mc_error err = {0};
    enum mc_err_code rc = mc_case_load_buffer(CASE_NAME, data, size, &c, &err);
    check_error(rc, &err, CASE_NAME);
    if (rc == MC_ERR_NONE && (c.id == NULL || c.n_scenarios < 1 || c.n_backends < 1 || c.n_dtypes < 1 ||
                              c.golden_path == NULL || c.tolerance.n_entries < 1))
        __builtin_trap();
    mc_case_free(&c);

    struct mc_tolerance_profile p;
    struct mc_error terr = {0};
    rc = mc_tolerance_load_buffer(TOL_NAME, data, size, &p, &terr);
    check_error(rc, &terr, TOL_NAME);
    if (rc == MC_ERR_NONE) {
        if (p.n_entries < 1)
            __builtin_trap();
        for (int i = 0; i < p.n_entries; i++) {
            struct mc_tolerance t;
            struct mc_error lerr = {0};
            if (mc_tolerance_lookup(&p, p.entries[i].device, p.entries[i].dtype, MC_TENSOR_OUTPUT, &t, &lerr) ==
                    MC_ERR_NONE &&
                !(t.atol >= 0 && t.rtol >= 0))
                __builtin_trap();
        }
    }
    mc_tolerance_free(&p);
    return 0;
}
