"""broken_shortconv.py — broken variants of examples/python/np_shortconv.py, each of which mixcheck must
report as its own failure or error (tests/python/test_python.c)."""

import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python"))
from np_shortconv import NumpyShortConv  # noqa: E402


class MathMutant(NumpyShortConv):
    """Applies the conv taps in reverse order (newest input on the oldest tap): wrong numbers."""
    name = "np-mutant"

    def __init__(self, *args):
        super().__init__(*args)
        self.conv_w = self.conv_w[:, ::-1].copy()


class Raises(NumpyShortConv):
    """A Python exception in forward: the check's error, with the exception and where it was raised."""
    name = "np-raise"

    def forward(self, cache, x, mask):
        return self.helper(x)

    def helper(self, x):
        raise ValueError("deliberate failure on a %s input" % (x.shape,))


class Hangs(NumpyShortConv):
    """Never returns: the check's time limit ends it."""
    name = "np-hang"

    def forward(self, cache, x, mask):
        while True:
            time.sleep(1)


class Segfaults(NumpyShortConv):
    """Crashes the interpreter (a write to address 16 through ctypes): the check's error, with the signal."""
    name = "np-segv"

    def forward(self, cache, x, mask):
        ctypes.memset(16, 0, 1)
        return x


class WrongShape(NumpyShortConv):
    """Returns one token too few: refused by the worker's shape check."""
    name = "np-shape"

    def forward(self, cache, x, mask):
        return super().forward(cache, x, mask)[:, 1:]


class LeaksCache(NumpyShortConv):
    """Lets padding tokens into the window: the masked scenarios fail, the unmasked ones pass."""
    name = "np-padleak"

    def forward(self, cache, x, mask):
        return super().forward(cache, x, None)


class WritesInput(NumpyShortConv):
    """Writes into its input x through its address (ctypes), after computing y: x is the harness's own
    buffer in shared memory, so the harness sees its input modified."""
    name = "np-writex"

    def forward(self, cache, x, mask):
        y = super().forward(cache, x, mask)
        ctypes.memset(x.ctypes.data, 0x7f, 4)
        return y

    def forward_packed(self, pool, cu_seqlens, slots, has_initial_state, x):
        y = super().forward_packed(pool, cu_seqlens, slots, has_initial_state, x)
        ctypes.memset(x.ctypes.data, 0x7f, 4)
        return y


class WritesBeforeInput(NumpyShortConv):
    """Writes one byte before the start of x (ctypes): the guard in front of x, in the same shared pages,
    records it."""
    name = "np-underrun"

    def forward(self, cache, x, mask):
        y = super().forward(cache, x, mask)
        ctypes.memset(x.ctypes.data - 1, 0, 1)
        return y


class BadChunked(NumpyShortConv):
    """Declares its internal chunk length with a string: refused when the spec loads (not in
    MIXCHECK_BACKENDS: named as broken_shortconv.py:BadChunked)."""
    name = "np-badchunked"
    chunked = "yes"


MIXCHECK_BACKENDS = [MathMutant, Raises, Hangs, Segfaults, WrongShape, LeaksCache, WritesInput, WritesBeforeInput]
