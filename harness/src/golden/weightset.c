/* weightset.c — see weightset.h. */
#include "golden/weightset.h"

#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"

enum mc_err_code mc_weightset_build(const struct mc_golden *g, enum mc_dtype dtype, struct mc_weightset *ws,
                                    struct mc_error *err)
{
    memset(ws, 0, sizeof *ws);
    ws->dtype = dtype;
    ws->data = calloc((size_t)g->n_weights + 1, sizeof *ws->data);
    if (ws->data == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    ws->n = g->n_weights;
    for (int i = 0; i < g->n_weights; i++) {
        size_t n = (size_t)mc_array_elems(&g->weights[i].value);
        ws->data[i] = malloc((n ? n : 1) * mc_dtype_size(dtype));
        if (ws->data[i] == NULL) {
            mc_weightset_free(ws);
            return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
        }
        mc_dtype_from_f64(dtype, g->weights[i].value.data, ws->data[i], n);
    }
    return MC_ERR_NONE;
}

void mc_weightset_free(struct mc_weightset *ws)
{
    if (ws->data != NULL)
        for (int i = 0; i < ws->n; i++)
            free(ws->data[i]);
    free(ws->data);
    memset(ws, 0, sizeof *ws);
}
