/* modelcase.c — see modelcase.h. */
#include "modelcase.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

void mc_test_model_load(const char *path, struct mc_test_model *m)
{
    struct mc_error err = {0};
    memset(m, 0, sizeof *m);
    if (mc_case_load(path, &m->c, &err) != MC_ERR_NONE || mc_stack_golden_load(m->c.golden_path, &m->g, &err))
        fail_msg("%s: %s", path, err.msg);
}

void mc_test_model_unload(struct mc_test_model *m)
{
    mc_stack_golden_free(&m->g);
    mc_case_free(&m->c);
}
