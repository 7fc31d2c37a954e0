/* goldenmodel — see goldenmodel.h. */
#include "goldenmodel.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "case/case.h" /* mc_dtype_name */
#include "golden/weightset.h"

struct mc_model *mc_test_golden_model(const struct mc_backend_ops *ops, const struct mc_golden *g,
                                      enum mc_dtype dtype)
{
    struct mc_error err = {0};
    struct mc_weightset ws = {0};
    if (mc_weightset_build(g, dtype, &ws, &err) != MC_ERR_NONE)
        fail_msg("%s: the weights in %s: %s", g->path, mc_dtype_name(dtype), err.msg);
    struct mc_weight *w = calloc((size_t)g->n_weights + 1, sizeof *w);
    assert_non_null(w);
    for (int i = 0; i < g->n_weights; i++) {
        w[i].name = g->weights[i].name;
        w[i].ndim = g->weights[i].value.ndim;
        memcpy(w[i].dims, g->weights[i].value.dims, sizeof w[i].dims);
        w[i].data = ws.data[i];
    }
    struct mc_model_desc desc = {
        .family = g->config.family, .dtype = dtype, .config = &g->config.u, .weights = w, .n_weights = g->n_weights};
    struct mc_model *model = NULL;
    struct mc_msg msg = {{0}};
    const enum mc_backend_status st = ops->model_create(&desc, &model, &msg);
    free(w);
    mc_weightset_free(&ws);
    if (st != MC_BACKEND_OK)
        fail_msg("%s: model_create: %s", g->path, msg.text);
    return model;
}
