#!/usr/bin/python3
"""make_bad_goldens.py SRC_ROOT OUT_DIR — the HDF5 half of the bad-inputs corpus (tests/bad-inputs).

Writes OUT_DIR/h5/: a copy of every committed case file tests/bad-inputs/h5/*.yaml, the Mamba2
tolerance profile they name (tolerance.yaml), and one malformed golden per case, each made from
golden/mamba2/tiny.h5 with a single defect. Run by test_bad_inputs at test time (Debian's
/usr/bin/python3 with python3-h5py), so no malformed binary is committed. The golden's name is the
case's name with .h5 (truncated.yaml -> truncated.h5).
"""
import glob
import os
import shutil
import sys

import h5py
import numpy as np


def replace(f, path, data, **kw):
    del f[path]
    f.create_dataset(path, data=data, **kw)


def edit(fn):
    def make(src, dst):
        shutil.copyfile(src, dst)
        with h5py.File(dst, "r+") as f:
            fn(f)
    return make


def raw(fn):
    def make(src, dst):
        with open(src, "rb") as fh:
            data = fh.read()
        with open(dst, "wb") as fh:
            fh.write(fn(data))
    return make


def poke(path, index, value):
    def fn(f):
        v = f[path][()]
        v[index] = value
        f[path][...] = v
    return fn


def set_attr(obj, name, value):
    def fn(f):
        f[obj].attrs[name] = value
    return fn


def del_attr(obj, name):
    def fn(f):
        del f[obj].attrs[name]
    return fn


def add_mask(f):
    mask = np.ones((2, 24), np.int8)
    mask[1, 5] = 2
    f.create_dataset("inputs/attention_mask", data=mask)


def absurd_shape(f):
    del f["inputs/hidden_states"]   # declared [4096, 10^6, 32], nothing stored
    f.create_dataset("inputs/hidden_states", shape=(4096, 1000000, 32), dtype="f4", chunks=(1, 1, 32))


def positions(f):
    p = f["expected/state_positions"][()]
    p[-1] = 99
    f["expected/state_positions"][...] = p


MAKERS = {
    "truncated": raw(lambda d: d[: len(d) // 2]),
    "truncated_superblock": raw(lambda d: d[:40]),
    "not_hdf5": raw(lambda d: b"id: this is YAML text, not an HDF5 golden\n"),
    "empty": raw(lambda d: b""),
    "missing_dataset": edit(lambda f: f.__delitem__("expected/conv_state")),
    "missing_weight": edit(lambda f: f.__delitem__("weights/A_log")),
    "wrong_rank": edit(lambda f: replace(f, "weights/conv1d.weight", f["weights/conv1d.weight"][()][:, 0, :])),
    "wrong_shape": edit(lambda f: replace(f, "expected/output", f["expected/output"][()][:, :, :31])),
    "int_weight": edit(lambda f: replace(f, "weights/A_log", np.arange(4, dtype=np.int32))),
    "int_expected": edit(lambda f: replace(f, "expected/output", f["expected/output"][()].astype(np.int64))),
    "f32_expected": edit(lambda f: replace(f, "expected/output", f["expected/output"][()].astype(np.float32))),
    "nan_expected": edit(poke("expected/output", (1, 3, 5), np.nan)),
    "inf_expected": edit(poke("expected/recurrent_state", (7, 1, 2, 3, 4), np.inf)),
    "nan_input": edit(poke("inputs/hidden_states", (0, 10, 2), np.nan)),
    "config_contradicts_weights": edit(set_attr("config", "state_size", np.int64(16))),
    "config_invalid": edit(set_attr("config", "n_groups", np.int64(3))),
    "config_float_for_int": edit(set_attr("config", "hidden_size", np.float64(32.0))),
    "format_version": edit(set_attr("/", "format_version", np.int64(2))),
    "not_a_golden": edit(set_attr("/", "format", "some-other-format")),
    "unknown_family": edit(set_attr("/", "family", "mamba3")),
    "checksum_mismatch": edit(poke("expected/output", (0, 7, 3), 0.25)),
    "checksum_missing": edit(del_attr("/", "content_sha256")),
    "checksum_malformed": edit(set_attr("/", "content_sha256", "not-a-checksum")),
    "extra_dataset": edit(lambda f: f.create_dataset("expected/extra", data=np.zeros(3))),
    "mask_value": edit(add_mask),
    "position_past_len": edit(positions),
    "absurd_shape": edit(absurd_shape),
}


def main():
    src, out = sys.argv[1], sys.argv[2]
    h5dir = os.path.join(out, "h5")
    os.makedirs(h5dir, exist_ok=True)
    shutil.copyfile(os.path.join(src, "cases/tolerances/mamba2.yaml"), os.path.join(h5dir, "tolerance.yaml"))
    tiny = os.path.join(src, "golden/mamba2/tiny.h5")
    cases = sorted(glob.glob(os.path.join(src, "tests/bad-inputs/h5/*.yaml")))
    for case in cases:
        name = os.path.basename(case)[:-5]
        if name not in MAKERS:
            sys.exit(f"make_bad_goldens: no maker for {case}")
        shutil.copyfile(case, os.path.join(h5dir, name + ".yaml"))
        MAKERS[name](tiny, os.path.join(h5dir, name + ".h5"))
    missing = sorted(set(MAKERS) - {os.path.basename(c)[:-5] for c in cases})
    if missing:
        sys.exit(f"make_bad_goldens: makers without a case file: {' '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
