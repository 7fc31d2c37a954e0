/* array.c — see array.h. */
#include "golden/array.h"

#include <math.h>

int64_t mc_array_elems(const struct mc_array *a)
{
    if (a == NULL || a->ndim <= 0)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++)
        n *= a->dims[i];
    return n;
}

double mc_array_max_abs(const struct mc_array *a)
{
    double m = 0.0;
    int64_t n = mc_array_elems(a);
    for (int64_t i = 0; i < n; i++)
        if (isfinite(a->data[i]) && fabs(a->data[i]) > m)
            m = fabs(a->data[i]);
    return m;
}
