"""bench.py — a Python backend that does no math, for `mixcheck bench --python-overhead`: its forward
returns x as y, so what the bench measures is the adapter itself (the request, the worker's dispatch,
the numpy views, the copies through the shared-memory arena)."""

from . import Backend


class CopyShortConv(Backend):
    name = "py-copy"
    family = "shortconv"
    dtypes = ("f64", "f32", "f16", "bf16")

    def cache_alloc(self, batch):
        return None

    def forward(self, cache, x, mask):
        return x  # the worker copies it into y


MIXCHECK_BACKENDS = [CopyShortConv]
