/* array.c — see array.h. */
#include "golden/array.h"

int64_t mc_array_elems(const struct mc_array *a)
{
    if (a == NULL || a->ndim <= 0)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++)
        n *= a->dims[i];
    return n;
}
