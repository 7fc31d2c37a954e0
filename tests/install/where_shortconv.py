"""where_shortconv.py — the numpy ShortConv example (examples/python/np_shortconv.py) as a Python backend
that first makes sure the mixcheck_backend package came from MC_EXPECT_PYTHON_DIR (test_install.sh: the
installed package of a moved prefix, or MIXCHECK_PYTHON_DIR), and fails to load otherwise."""

import os
import sys

import mixcheck_backend

want = os.path.realpath(os.environ["MC_EXPECT_PYTHON_DIR"])
got = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(mixcheck_backend.__file__))))
if got != want:
    raise ImportError("mixcheck_backend was imported from %s, not from %s" % (got, want))

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python"))
from np_shortconv import NumpyShortConv  # noqa: E402

MIXCHECK_BACKENDS = [NumpyShortConv]
