/*
 * probe_plugin.c — two broken variants of the example plugin (examples/plugin/shortconv_port.c, compiled
 * in here unchanged) for the stage-probe tests:
 *   probe-zero-context  every forward on a cache starts from a zero conv window (a port that ignores
 *                       the cached window of a continued forward, docs/semantics.md §8.2a); its probes
 *                       are the example's, so the diagnosis must name conv_out at the first token of
 *                       the first continued forward;
 *   probe-bad-shape     the example, but probe_read reports conv_out with one channel too many: the
 *                       harness must report that as the backend's error, not read past the buffer.
 */
#define mixcheck_plugin_backends mc_example_backends_unused
#include "../../examples/plugin/shortconv_port.c"
#undef mixcheck_plugin_backends

static enum mc_backend_status zero_context_forward(struct mc_model *m, struct mc_cache *cache,
                                                   const struct mc_forward_args *a, struct mc_msg *msg)
{
    if (cache != NULL)
        memset(cache->window, 0, (size_t)(cache->batch * m->D * m->K) * sizeof *cache->window);
    return forward(m, cache, a, msg);
}

static enum mc_backend_status bad_shape_probe_read(struct mc_model *m, const struct mc_probe **probes, int32_t *count,
                                                   struct mc_msg *msg)
{
    static struct mc_probe copy[2];
    enum mc_backend_status st = probe_read(m, probes, count, msg);
    if (st != MC_BACKEND_OK || *count != 2)
        return st;
    copy[0] = (*probes)[0];
    copy[1] = (*probes)[1];
    copy[1].dims[2] += 1;
    *probes = copy;
    return MC_BACKEND_OK;
}

static struct mc_backend_ops zero_context_ops, bad_shape_ops;

EXPORT const struct mc_backend_ops *const *mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static const struct mc_backend_ops *const all[] = {&zero_context_ops, &bad_shape_ops};
    zero_context_ops = example_ops;
    zero_context_ops.name = "probe-zero-context";
    zero_context_ops.forward = zero_context_forward;
    bad_shape_ops = example_ops;
    bad_shape_ops.name = "probe-bad-shape";
    bad_shape_ops.probe_read = bad_shape_probe_read;
    *count = 2;
    *abi_version = MIXCHECK_ABI_VERSION;
    return all;
}
