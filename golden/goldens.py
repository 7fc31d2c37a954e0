"""mixcheck golden files: the registry of the bundled goldens, and building, writing, reading and checking them.

FAMILIES / SPECS are every mixer-level family and golden: the four of golden/mixers.py (mamba2, mamba1,
gdn, shortconv), then attention from golden/models.py, then lightning and kda from golden/linear.py. build() computes a golden in memory; write() /
read_file() are the HDF5 layout of golden/README.md ("File layout"), content_sha256() its content
checksum; compare() / bit_identical() / attr_differences() what `check` and `regenerate` report. The
`list`, `regenerate` and `check` commands of the mixer-level goldens are cmd_list / cmd_regenerate /
cmd_check; golden/generate.py parses the command line and calls them (model-level goldens:
golden/stacks.py).
"""

import hashlib
import os
import platform
import sys

import h5py
import numpy as np

import linear
import mixers
import models
from mixers import GOLDEN_DIR, maxdiff

GENERATOR = "golden/generate.py"   # the `generator` root attribute: the command that makes the files
GENERATOR_VERSION = "1.3"   # 1.1: mamba1, gdn, shortconv, mamba2/rightpad (Mamba2 numbers unchanged);
                            # 1.2: GoldenSpec.a_range / dt_range, the 300-token goldens (no older number changed);
                            # 1.3: the stage probes /probes/<name> (docs/ports.md §7; no older number changed)
FORMAT = "mixcheck-golden"
FORMAT_VERSION = 1

# check: a tensor matches when max|new - stored| <= CHECK_RTOL * max(1, max|stored|); this only has to
# absorb last-bit libm differences between machines.
CHECK_RTOL = 1e-12


# ---------------------------------------------------------------------------------------------------
# the registry: family name -> Family, family/name -> GoldenSpec (the order of `list` and of --all)
# ---------------------------------------------------------------------------------------------------

FAMILIES = {**mixers.MIXER_FAMILIES, "attention": models.ATTENTION_FAMILY, **linear.LINEAR_FAMILIES}
SPECS = {**mixers.MIXER_SPECS, **{s.key: s for s in models.attention_specs()},
         **{s.key: s for s in linear.linear_all_specs()}}


# ---------------------------------------------------------------------------------------------------
# building, writing, comparing files
# ---------------------------------------------------------------------------------------------------

def build(spec):
    """Compute a golden in memory, with the expected states reduced to spec.positions."""
    g = FAMILIES[spec.family].make_golden(spec)
    positions = np.arange(spec.length + 1) if spec.positions is None else np.array(spec.positions)
    assert np.all(np.diff(positions) > 0) and positions[0] >= 0 and positions[-1] <= spec.length
    g.tensors["expected/state_positions"] = positions.astype(np.int64)
    for key in ("expected/conv_state", "expected/recurrent_state"):
        if key in g.tensors:      # shortconv has no recurrent state
            g.tensors[key] = g.tensors[key][positions]
    for key, v in g.tensors.items():
        assert np.all(np.isfinite(v)), f"{spec.name}: non-finite values in {key}"
    return g


def identity_attrs(spec):
    """Root attributes that identify a golden (compared by check)."""
    return {"format": FORMAT, "format_version": np.int64(FORMAT_VERSION), "family": spec.family,
            "name": spec.name, "description": spec.description, "seed": np.int64(spec.seed)}


def provenance_attrs():
    """Root attributes that record how a file was made (not compared by check)."""
    return {"generator": GENERATOR, "generator_version": GENERATOR_VERSION, "numpy_version": np.__version__,
            "h5py_version": h5py.__version__, "python_version": platform.python_version()}


def content_sha256(tensors):
    """The content checksum (golden/README.md "Content checksum"): SHA-256 over every dataset in byte
    order of its path (no leading '/'): u64le len(path), path (UTF-8), b"f" or b"i", u64le rank, u64le
    each dim, then the values row-major as float64 LE (floats) or int64 LE (integers and bools)."""
    h = hashlib.sha256()
    for key in sorted(tensors, key=lambda k: k.encode()):
        v = np.asarray(tensors[key])
        if v.dtype.kind == "f":
            tag, data = b"f", v.astype("<f8")
        elif v.dtype.kind in "iub":
            tag, data = b"i", v.astype("<i8")
        else:
            raise ValueError(f"{key}: dtype {v.dtype} has no canonical serialization")
        name = key.encode()
        h.update(np.array([len(name)], "<u8").tobytes() + name + tag)
        h.update(np.array([v.ndim, *v.shape], "<u8").tobytes())
        h.update(np.ascontiguousarray(data).tobytes())
    return h.hexdigest()


def bit_identical(new, old):
    """True when both hold the same tensors with the same dtypes, shapes and bytes."""
    return (old is not None and set(new) == set(old)
            and all(np.asarray(new[k]).dtype == old[k].dtype and np.asarray(new[k]).shape == old[k].shape
                    and np.asarray(new[k]).tobytes() == old[k].tobytes() for k in new))


def write(spec, g, path, provenance=None):
    """Write a golden to path (flushed and fsynced; the caller renames it into place). provenance:
    the provenance attributes to record (default: this generator and interpreter)."""
    with h5py.File(path, "w") as f:
        for k, v in {**identity_attrs(spec), **(provenance or provenance_attrs()),
                     "content_sha256": content_sha256(g.tensors)}.items():
            f.attrs[k] = v
        cfg = f.create_group("config")
        for k, v in g.config.items():
            cfg.attrs[k] = v
        for key, v in g.tensors.items():   # one chunk per tensor, byte shuffle + gzip 9
            f.create_dataset(key, data=v, chunks=v.shape, shuffle=True, compression="gzip",
                             compression_opts=9, track_times=False)


def read_file(path):
    """(tensors, config attributes, root attributes) of a golden file."""
    tensors = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda k, obj: tensors.__setitem__(k, obj[()]) if isinstance(obj, h5py.Dataset) else None)
        config = dict(f["config"].attrs) if "config" in f else {}
        return tensors, config, dict(f.attrs)


def compare(new, old):
    """Per-tensor rows (key, text, matches) of new against old (None: no previous file). A tensor matches
    when max|new - old| <= CHECK_RTOL * max(1, max|old|)."""
    rows = []
    for key in sorted(set(new) | set(old or {})):
        if old is None or key not in old:
            rows.append((key, "new", False))
        elif key not in new:
            rows.append((key, "removed", False))
        elif new[key].shape != old[key].shape:
            rows.append((key, f"shape {old[key].shape} -> {new[key].shape}", False))
        else:
            a, b = np.asarray(new[key], np.float64), np.asarray(old[key], np.float64)
            diff = maxdiff(a, b)
            limit = CHECK_RTOL * max(1.0, float(np.max(np.abs(b))) if b.size else 0.0)
            rows.append((key, f"max|change| = {diff:.3e}", diff <= limit))
    return rows


def attr_differences(new, old, keys=None):
    """Names of attributes that differ (over `keys`, or over all names in either dict)."""
    keys = sorted(set(new) | set(old)) if keys is None else keys
    return [k for k in keys
            if k not in new or k not in old or not np.array_equal(np.asarray(new[k]), np.asarray(old[k]))]


def resolve(name):
    """Specs a command-line name stands for: `family/name`; a bare mamba2 name (`tiny` = `mamba2/tiny`,
    kept from before there were other families); or a family name (`gdn`: all its goldens)."""
    if name in SPECS:
        return [SPECS[name]]
    if "mamba2/" + name in SPECS:
        return [SPECS["mamba2/" + name]]
    if name in FAMILIES:
        return [s for s in SPECS.values() if s.family == name]
    return None


def select(names):
    unknown = [n for n in names if resolve(n) is None]
    if unknown:
        print(f"unknown golden(s): {' '.join(unknown)} (known: {' '.join(SPECS)}, a family name, or a bare "
              f"mamba2 name)", file=sys.stderr)
        sys.exit(2)
    if not names:
        return list(SPECS.values())
    picked = {}
    for n in names:
        for spec in resolve(n):
            picked.setdefault(spec.key, spec)
    return list(picked.values())


def cmd_list(args):
    total = 0
    for spec in select(args.names):
        size = os.path.getsize(spec.path) if os.path.exists(spec.path) else None
        total += size or 0
        shape = ", ".join(f"{k}={v}" for k, v in spec.config.items())
        print(f"{spec.key:<20} {('%d' % size) if size is not None else 'missing':>9} bytes  "
              f"B={spec.batch} L={spec.length} {shape}")
    print(f"total {total} bytes")


PROVENANCE_KEYS = ("generator", "generator_version", "numpy_version", "h5py_version", "python_version")


def cmd_regenerate(args):
    if not args.names and not args.all:
        print("regenerate rewrites golden files: name them (family/name, a family, or a bare mamba2 name) or "
              "pass --all", file=sys.stderr)
        return 2
    if args.names and args.all:
        print("regenerate: give names or --all, not both", file=sys.stderr)
        return 2
    for spec in select(args.names):
        g = build(spec)
        print(f"{spec.key} -> {os.path.relpath(spec.path, os.path.dirname(GOLDEN_DIR))}")
        for note in g.notes:
            print(f"  {note}")
        old = read_file(spec.path) if os.path.exists(spec.path) else (None, {}, {})
        # Numbers and configuration bit-identical to the previous file: its provenance (which generator
        # made these numbers) still holds and is kept, so the rewrite changes at most content_sha256.
        keep = (bit_identical(g.tensors, old[0]) and not attr_differences(g.config, old[1])
                and all(k in old[2] for k in PROVENANCE_KEYS))
        provenance = {k: old[2][k] for k in PROVENANCE_KEYS} if keep else None
        os.makedirs(os.path.dirname(spec.path), exist_ok=True)
        tmp = spec.path + ".tmp"
        try:
            write(spec, g, tmp, provenance)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, spec.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        if keep:
            print("  tensors bit-identical to the previous file; provenance kept")
        for key, text, _ in compare(g.tensors, old[0]):
            print(f"  {key:<28} {text}")
        changed = attr_differences(g.config, old[1]) if old[0] is not None else []
        if changed:
            print(f"  config changed: {' '.join(changed)}")
        print(f"  {os.path.getsize(spec.path)} bytes")
    return 0


def cmd_check(args):
    specs = select(args.names)
    ok = True
    if args.selftest:   # the families of the selected goldens (all when none are named)
        for fam_name, fam in FAMILIES.items():
            if any(spec.family == fam_name for spec in specs):
                print(f"selftest {fam_name}:")
                ok &= fam.selftest()
    for spec in specs:
        if not os.path.exists(spec.path):
            print(f"{spec.key}: MISSING {spec.path}")
            ok = False
            continue
        g = build(spec)
        stored, stored_config, stored_root = read_file(spec.path)
        rows = compare(g.tensors, stored)
        identity = identity_attrs(spec)
        changed = (["config/" + k for k in attr_differences(g.config, stored_config)]
                   + attr_differences(identity, stored_root, keys=sorted(identity)))
        recorded, computed = stored_root.get("content_sha256"), content_sha256(stored)
        if isinstance(recorded, bytes):
            recorded = recorded.decode("utf-8", "replace")
        checksum_ok = recorded == computed
        same = all(match for _, _, match in rows) and not changed and checksum_ok
        print(f"{spec.key}: {'ok' if same else 'DIFFERS'}")
        if recorded is None:
            print(f"  content_sha256 missing (computed {computed}): regenerate {spec.key}")
        elif not checksum_ok:
            print(f"  content checksum mismatch (recorded {recorded}, computed {computed}): the file was "
                  f"modified after generation; regenerate {spec.key}")
        for note in g.notes:
            print(f"  {note}")
        if not same:
            for key, text, match in rows:
                if not match:
                    print(f"  {key:<28} {text}")
            if changed:
                print(f"  attributes differ: {' '.join(changed)}")
        ok &= same
    return 0 if ok else 1

