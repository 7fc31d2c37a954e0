/* consumer.c — compiled against the installed <mixcheck/backend.h>, found by its mixcheck.pc. */
#include <mixcheck/backend.h>

_Static_assert(MIXCHECK_ABI_VERSION >= 1u, "mixcheck/backend.h defines the plugin ABI version");

size_t consumer_ops_size(void);
size_t consumer_ops_size(void)
{
    return sizeof(struct mc_backend_ops);
}
