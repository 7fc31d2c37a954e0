/* hfpython.c — see hfpython.h. */
#include "hfpython.h"

#include <stdio.h>
#include <stdlib.h>

const char *mc_test_hf_python(const char *test)
{
    const char *python = getenv("MIXCHECK_HF_PYTHON");
    if (python == NULL || python[0] == '\0')
        python = "/work/venv/bin/python";
    char probe[1024];
    snprintf(probe, sizeof probe, "'%s' -c 'import torch, transformers' >/dev/null 2>&1", python);
    if (system(probe) != 0) {
        fprintf(stderr, "%s: %s cannot import torch and transformers: skipped\n", test, python);
        return NULL;
    }
    return python;
}
