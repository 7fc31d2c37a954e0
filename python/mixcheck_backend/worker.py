"""The worker side of mixcheck's Python backends (the other half of harness/src/exec/pybackend.c).

mixcheck starts the interpreter once per run, as ``PYTHON -c "...; main()" zygote SPEC...`` with fd 3 a
SOCK_SEQPACKET socket and stdout/stderr a log. The *zygote* imports every SPEC (torch, transformers:
the expensive part, paid once), sends the description of their backend classes (with what a report's
provenance records: the interpreter, its version, each spec's file and the numpy/torch/transformers
versions) as one packet (int64 status, then JSON), and then waits. Each mixcheck process that creates a model (in a check's
child process: once per check) sends it a packet with its pid and four or five descriptors
(SCM_RIGHTS): its end of a stream socket, the shared-memory arena (a memfd), a log memfd, the write end
of a status pipe and (when that process has one) its pool, the memfd of its host memory. The zygote
forks a *worker* for it, which serves that process alone:

    3  requests from mixcheck (read)       4  replies to mixcheck (write; the same socket)
    5  the arena, mapped here and in mixcheck          1, 2  the log mixcheck reads when it dies
    6  the pool (when given): the memory mixcheck places the tensors of forward and forward_packed in
       (host_map, harness/include/mixcheck/backend.h), so x is read and y written where mixcheck has them

When the worker ends, the zygote writes its wait status (int32) into the status pipe, so mixcheck can
say "died of signal 11"; when the mixcheck process ends first (a check killed for its time limit), the
zygote kills the worker (it watches each client with a pidfd). The zygote ends with mixcheck.

The wire format of a worker, little-endian:

    request  18 x int64: op, model, cache, cache2, batch, len, off_x, off_mask, off_y, off_a, off_b,
             off_c, n, arena_bytes, payload_bytes, pool_bytes, where, reserved; then payload_bytes of
             UTF-8 JSON. Bit k of `where` set: field k's offset is into the pool, else into the arena
    reply    4 x int64: status, handle, payload_bytes, reserved; then payload_bytes of UTF-8 text

Whole stacks (StackBackend, ops 10-12): stack_create's JSON names the model_type, the config.json text,
the layer shapes and the checkpoint's weights; stack_forward reads input_ids (int64) at off_x, the mask at
off_mask and writes logits at off_y, hidden_states at off_a, mixer_outputs at off_b and mixer_inputs at
off_c (-1: not wanted);
stack_cache_export writes layer n's conv window at off_a and its state at off_b.

Offsets are byte offsets into the arena or the pool (-1: absent). mixcheck grows both between calls and
says their sizes in every request. Status values are those of ``enum mc_backend_status``. Tensors are
numpy views of the arena or the pool: no per-element copy happens here beyond the one ``np.copyto`` of
each result into its view (for a tensor in the pool, the only pass over its bytes).
"""

import fcntl
import importlib
import importlib.metadata
import importlib.util
import json
import mmap
import os
import platform
import select
import signal
import socket
import struct
import sys
import traceback

import numpy as np

from . import NUMPY_DTYPES, STATE_DTYPES, Backend, Invalid, Options, StackBackend, StackOptions, Unsupported

REQ = struct.Struct("<18q")
REP = struct.Struct("<4q")
OK, UNSUPPORTED, INVALID, NOMEM, INTERNAL = 0, 1, 2, 3, 4
(OP_CREATE, OP_DESTROY, OP_CACHE_ALLOC, OP_CACHE_COPY, OP_CACHE_FREE, OP_CACHE_EXPORT, OP_CACHE_IMPORT,
 OP_FORWARD, OP_FORWARD_PACKED, OP_STACK_CREATE, OP_STACK_FORWARD, OP_STACK_CACHE_EXPORT) = range(1, 13)
FD_REQ, FD_REP, FD_ARENA, FD_POOL = 3, 4, 5, 6
F_POOL, F_WHERE = 15, 16
FAMILIES = ("mamba2", "mamba1", "gdn", "shortconv", "attention", "lightning", "kda", "stack")
HERE = os.path.dirname(os.path.abspath(__file__))


def _read_exact(fd, n):
    b = os.read(fd, n)
    if len(b) == n:  # the whole request in one read, as nearly always
        return b
    if not b:
        return None
    chunks, got = [b], len(b)
    while got < n:
        b = os.read(fd, n - got)
        if not b:
            return None
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _reply(status, handle=0, text=""):
    payload = text.encode("utf-8", "replace")
    _write_all(FD_REP, REP.pack(status, handle, len(payload), 0) + payload)


def _describe_exception(e):
    """Type, message and the frames outside this module, innermost first (fits a short diagnosis)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if os.path.abspath(f.filename) != os.path.join(HERE, "worker.py")]
    where = " <- ".join("%s:%d in %s" % (os.path.basename(f.filename), f.lineno, f.name) for f in reversed(frames))
    text = " ".join(("%s: %s" % (type(e).__name__, e)).split())  # one line
    return text + (" [traceback, innermost first: %s]" % where if where else "")


def load_spec(spec):
    """MODULE[:ATTR] or FILE.py[:ATTR] -> (module, [backend classes])."""
    target, attr = spec, None
    head, sep, tail = spec.rpartition(":")
    if sep and tail.replace("_", "a").replace(".", "a").isalnum() and head:
        target, attr = head, tail
    if target.endswith(".py") or os.sep in target:
        name = "mixcheck_user_" + os.path.splitext(os.path.basename(target))[0]
        if name in sys.modules:
            mod = sys.modules[name]
        else:
            loc = importlib.util.spec_from_file_location(name, target)
            if loc is None:
                raise ImportError("cannot load %s" % target)
            mod = importlib.util.module_from_spec(loc)
            sys.modules[name] = mod
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            loc.loader.exec_module(mod)
    else:
        mod = importlib.import_module(target)
    obj = mod
    for part in (attr or "MIXCHECK_BACKENDS").split("."):
        if not hasattr(obj, part):
            raise ImportError("%s has no attribute '%s'%s" % (target, part, "" if attr else
                              " (a module lists its backend classes in MIXCHECK_BACKENDS, or name one as MODULE:CLASS)"))
        obj = getattr(obj, part)
    classes = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise TypeError("%s: %r is not a mixcheck_backend.Backend subclass" % (spec, cls))
        if cls.family not in FAMILIES:
            raise TypeError("%s: %s.family is %r (expected one of %s)" % (spec, cls.__name__, cls.family,
                                                                           ", ".join(FAMILIES)))
        if not cls.name or not isinstance(cls.name, str):
            raise TypeError("%s: %s has no name" % (spec, cls.__name__))
        if (cls.family == "stack") != issubclass(cls, StackBackend):
            raise TypeError("%s: %s: a whole-stack backend derives from mixcheck_backend.StackBackend (family "
                            "'stack'), a mixer backend does not" % (spec, cls.__name__))
        bad = [d for d in cls.dtypes if d not in NUMPY_DTYPES]
        if bad:
            raise TypeError("%s: %s.dtypes has unknown %s" % (spec, cls.__name__, bad))
        chunked = getattr(cls, "chunked", False)
        if not isinstance(chunked, bool):
            raise TypeError("%s: %s.chunked is %r (expected True or False)" % (spec, cls.__name__, chunked))
        if chunked and cls.family == "stack":
            raise TypeError("%s: %s: a whole-stack backend has no chunk length (chunked applies to mixer "
                            "backends)" % (spec, cls.__name__))
    return mod, classes


class SpecError(Exception):
    """A spec that cannot be loaded: the message names it."""


# The packages whose versions a report's provenance records (the ones a port's numbers depend on).
PROVENANCE_PACKAGES = ("numpy", "torch", "transformers")


def _package_version(name):
    """The version of a package as this interpreter has it: the imported module's when a spec imported
    it, else the installed distribution's; None when it is not installed."""
    mod = sys.modules.get(name)
    if mod is not None and isinstance(getattr(mod, "__version__", None), str):
        return mod.__version__
    try:
        return importlib.metadata.version(name)
    except Exception:  # not installed (PackageNotFoundError), or metadata unreadable
        return None


def describe(specs):
    """The zygote's first packet: the backend classes of every spec, and what a report's provenance
    records of them (the interpreter, its version, each spec's file, the package versions)."""
    backends, files = [], []
    for spec in specs:
        try:
            mod, classes = load_spec(spec)
        except Exception as e:
            raise SpecError("%s: %s" % (spec, _describe_exception(e))) from e
        path = getattr(mod, "__file__", None)
        files.append({"spec": spec, "path": os.path.abspath(path) if isinstance(path, str) else None})
        for cls in classes:
            backends.append({"spec": spec, "attr": cls.__qualname__, "name": cls.name, "family": cls.family,
                             "dtypes": list(cls.dtypes),
                             "packed": callable(getattr(cls, "forward_packed", None)),
                             "chunked": getattr(cls, "chunked", False) is True,
                             "hidden": bool(getattr(cls, "hidden", False)) and cls.family == "stack"})
    return {"backends": backends, "specs": files,
            "python": {"executable": sys.executable, "version": platform.python_version(),
                       "packages": {n: _package_version(n) for n in PROVENANCE_PACKAGES}}}


class Worker:
    def __init__(self):
        self.mm = None
        self.size = 0
        self.pmm = None  # the pool (FD_POOL), when mixcheck gave one
        self.psize = 0
        self.where = 0   # the request's F_WHERE: which offsets are into the pool
        # (read-only, writable) memoryviews of each mapping: a view of one is a single np.ndarray call
        self.arena_mv = self.pool_mv = None
        self.models = {}   # handle -> (Backend, dtype name)
        self.caches = {}   # handle -> [model handle, cache object, batch]
        self.next = 1
        self.classes = {}  # (spec, attr) -> class

    def arena(self, size):
        if size > self.size:
            # an old mapping stays alive while a view of it does; it is never written again
            self.mm = mmap.mmap(FD_ARENA, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self.size = size
            self.arena_mv = (memoryview(self.mm).toreadonly(), memoryview(self.mm))

    def pool(self, size, where):
        if size > self.psize:  # grown in place on mixcheck's side; a new, larger mapping here
            self.pmm = mmap.mmap(FD_POOL, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self.psize = size
            self.pool_mv = (memoryview(self.pmm).toreadonly(), memoryview(self.pmm))
        if where and self.pmm is None:
            raise Invalid("an offset into a pool this worker was not given")
        self.where = where

    def view(self, off, dtype, shape, writable=False, field=None):
        """The tensor at byte offset off of the arena, or of the pool when the request's field says so;
        read-only unless writable (a view of the read-only memoryview)."""
        mv = self.pool_mv if field is not None and self.where >> field & 1 else self.arena_mv
        return np.ndarray(shape, dtype, mv[1 if writable else 0], off)

    def handle(self):
        h = self.next
        self.next += 1
        return h

    def model(self, h):
        if h not in self.models:
            raise Invalid("no model %d" % h)
        return self.models[h]

    def cache(self, h, model):
        if h not in self.caches or self.caches[h][0] != model:
            raise Invalid("no cache %d of model %d" % (h, model))
        return self.caches[h]

    @staticmethod
    def put(dst, value, what, strict):
        """Copies a method's result into the arena view dst, checking shape (and dtype when strict)."""
        a = np.asarray(value)
        if a.shape != dst.shape:
            raise Invalid("%s returned shape %s, expected %s" % (what, a.shape, dst.shape))
        if strict and a.dtype != dst.dtype:
            raise Invalid("%s returned %s, the model stores %s" % (what, a.dtype, dst.dtype))
        if a.dtype.kind not in "fu":
            raise Invalid("%s returned dtype %s" % (what, a.dtype))
        np.copyto(dst, a, casting="unsafe" if not strict else "no")

    def lookup(self, p):
        key = (p["spec"], p["attr"])
        if key not in self.classes:
            _, classes = load_spec(p["spec"])
            for cls in classes:
                self.classes[(p["spec"], cls.__qualname__)] = cls
        cls = self.classes.get(key)
        if cls is None:
            raise Invalid("%s has no backend class %s" % key)
        return cls

    def create(self, p):
        cls = self.lookup(p)
        if issubclass(cls, StackBackend):
            raise Invalid("%s is a whole-stack backend" % cls.__name__)
        dt = NUMPY_DTYPES[p["dtype"]]
        weights = {}
        for w in p["weights"]:
            weights[w["name"]] = np.array(self.view(w["offset"], dt, tuple(w["shape"])))  # the backend's copy
        opts = Options(device=p["device"], chunk_size=p["chunk_size"], threads=p["threads"],
                       conv_shape=p["conv_shape"], state_shape=p["state_shape"], hidden=p["hidden"])
        obj = cls(p["family"], p["dtype"], p["config"], weights, opts)
        h = self.handle()
        self.models[h] = (obj, p["dtype"], opts)
        return h

    def stack_create(self, p):
        """A whole-stack model (StackBackend): the checkpoint's tensors under their names, the config.json
        text, and the layer shapes mixcheck derived from it (for the views of stack_cache_export)."""
        cls = self.lookup(p)
        if not issubclass(cls, StackBackend):
            raise Invalid("%s is not a whole-stack backend" % cls.__name__)
        dt = NUMPY_DTYPES[p["dtype"]]
        weights = {w["name"]: np.array(self.view(w["offset"], dt, tuple(w["shape"]))) for w in p["weights"]}
        opts = StackOptions(device=p["device"], threads=p["threads"], hidden=p["hidden"], vocab=p["vocab"],
                            layers=[(l["family"], l["conv_shape"], l["state_shape"]) for l in p["layers"]])
        obj = cls("stack", p["dtype"], {"model_type": p["model_type"], "config_json": p["config_json"]}, weights,
                  opts)
        h = self.handle()
        self.models[h] = (obj, p["dtype"], opts)
        return h

    def serve(self):
        while True:
            head = _read_exact(FD_REQ, REQ.size)
            if head is None:
                return  # mixcheck closed the pipe: the process is done
            f = REQ.unpack(head)
            payload = _read_exact(FD_REQ, f[14]) if f[14] else b""
            if f[14] and payload is None:
                return
            try:
                self.arena(f[13])
                self.pool(f[F_POOL], f[F_WHERE])
                h = self.dispatch(f, payload)
                _reply(OK, h)
            except Unsupported as e:
                _reply(UNSUPPORTED, 0, _describe_exception(e))
            except Invalid as e:
                _reply(INVALID, 0, _describe_exception(e))
            except MemoryError as e:
                _reply(NOMEM, 0, _describe_exception(e))
            except Exception as e:  # the check's error, with its traceback
                traceback.print_exc()
                _reply(INTERNAL, 0, _describe_exception(e))

    def dispatch(self, f, payload):
        op, mh, ch = f[0], f[1], f[2]
        if op == OP_CREATE:
            return self.create(json.loads(payload.decode("utf-8")))
        if op == OP_STACK_CREATE:
            return self.stack_create(json.loads(payload.decode("utf-8")))
        obj, dtype, opts = self.model(mh)
        if op == OP_DESTROY:
            for k in [k for k, v in self.caches.items() if v[0] == mh]:
                del self.caches[k]
            del self.models[mh]
            obj.close()
            return 0
        dt, st = NUMPY_DTYPES[dtype], STATE_DTYPES[dtype]
        if op == OP_CACHE_ALLOC:
            h = self.handle()
            self.caches[h] = [mh, obj.cache_alloc(f[4]), f[4]]
            return h
        if op == OP_CACHE_FREE:
            self.caches.pop(ch, None)
            return 0
        entry = self.cache(ch, mh) if ch else None
        if op == OP_CACHE_COPY:
            src = self.cache(f[3], mh)
            entry[1] = obj.cache_copy(src[1])
            return 0
        if op == OP_CACHE_EXPORT:
            conv, rec = obj.cache_export(entry[1])
            b = entry[2]
            self.put(self.view(f[9], st, (b,) + opts.conv_shape, True), conv, "cache_export conv_state", False)
            if opts.state_shape:
                self.put(self.view(f[10], st, (b,) + opts.state_shape, True), rec, "cache_export recurrent_state",
                         False)
            elif rec is not None:
                raise Invalid("cache_export returned a recurrent_state for a family without one")
            return 0
        if op == OP_CACHE_IMPORT:
            b = entry[2]
            conv = self.view(f[9], st, (b,) + opts.conv_shape)
            rec = self.view(f[10], st, (b,) + opts.state_shape) if opts.state_shape else None
            new = obj.cache_import(entry[1], conv, rec)
            if new is None:
                raise Invalid("cache_import returned None (it returns the cache to use from now on)")
            entry[1] = new
            return 0
        if op == OP_FORWARD:
            b, n, d = f[4], f[5], opts.hidden
            x = self.view(f[6], dt, (b, n, d), field=6)
            mask = self.view(f[7], np.uint8, (b, n), field=7) if f[7] >= 0 else None
            y = obj.forward(entry[1] if entry else None, x, mask)
            self.put(self.view(f[8], dt, (b, n, d), True, field=8), y, "forward", True)
            return 0
        if op == OP_FORWARD_PACKED:
            n, t, d = f[12], f[5], opts.hidden
            x = self.view(f[6], dt, (t, d), field=6)
            cu = self.view(f[9], np.int64, (n + 1,), field=9)
            slots = self.view(f[10], np.int64, (n,), field=10)
            init = self.view(f[11], np.uint8, (n,), field=11)
            y = obj.forward_packed(entry[1], cu, slots, init, x)
            self.put(self.view(f[8], dt, (t, d), True, field=8), y, "forward_packed", True)
            return 0
        if op == OP_STACK_FORWARD:
            b, n = f[4], f[5]
            ids = self.view(f[6], np.int64, (b, n))
            mask = self.view(f[7], np.uint8, (b, n)) if f[7] >= 0 else None
            want = f[9] >= 0 or f[10] >= 0 or f[11] >= 0
            out = obj.forward(entry[1] if entry else None, ids, mask, want)
            logits, hidden, inputs, mixers = out if want else (out, None, None, None)
            self.put(self.view(f[8], st, (b, n, opts.vocab), True), logits, "forward logits", False)
            if f[9] >= 0:
                self.put(self.view(f[9], st, (opts.n_layers + 1, b, n, opts.hidden), True), hidden,
                         "forward hidden_states", False)
            if f[10] >= 0:
                self.put(self.view(f[10], st, (opts.n_layers, b, n, opts.hidden), True), mixers,
                         "forward mixer_outputs", False)
            if f[11] >= 0:
                self.put(self.view(f[11], st, (opts.n_layers, b, n, opts.hidden), True), inputs,
                         "forward mixer_inputs", False)
            return 0
        if op == OP_STACK_CACHE_EXPORT:
            layer, b = f[12], entry[2]
            if not 0 <= layer < opts.n_layers:
                raise Invalid("no layer %d (the model has %d)" % (layer, opts.n_layers))
            family, conv_shape, state_shape = opts.layers[layer]
            conv, rec = obj.cache_export(entry[1], layer)
            self.put(self.view(f[9], st, (b,) + conv_shape, True), conv, "cache_export conv_state", False)
            if state_shape:
                self.put(self.view(f[10], st, (b,) + state_shape, True), rec, "cache_export recurrent_state", False)
            elif rec is not None:
                raise Invalid("cache_export returned a recurrent_state for a %s layer" % family)
            return 0
        raise Invalid("unknown request %d" % op)


def _prctl_pdeathsig():
    """Dies with the zygote (Linux): a worker never outlives the run."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _start_worker(ctl_fd, fds):
    """In the forked child: the descriptors in place, then serve until mixcheck closes the socket."""
    sock, arena, log, status = fds[:4]
    pool = fds[4] if len(fds) > 4 else None
    try:
        _prctl_pdeathsig()
        nul = os.open(os.devnull, os.O_RDONLY)
        moves = ((nul, 0), (log, 1), (log, 2), (sock, 3), (sock, 4), (arena, 5))
        if pool is not None:  # above every target first, so that no dup2 below closes it
            pool = fcntl.fcntl(pool, fcntl.F_DUPFD, 10)
            moves += ((pool, FD_POOL),)
        for src, dst in moves:
            os.dup2(src, dst)
        os.closerange(FD_POOL + (pool is not None), 1 << 16)
        import faulthandler
        faulthandler.enable()  # a crash leaves the Python stack in the log mixcheck reads
        Worker().serve()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    except BaseException:
        traceback.print_exc()
        os._exit(70)


def zygote(specs):
    ctl = socket.socket(fileno=FD_REQ)
    try:
        text, status = json.dumps(describe(specs)), OK
    except SpecError as e:
        traceback.print_exc()
        text, status = str(e), INTERNAL
    except Exception as e:
        traceback.print_exc()
        text, status = _describe_exception(e), INTERNAL
    ctl.send(struct.pack("<q", status) + text.encode("utf-8", "replace"))
    if status != OK:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    kids = {}  # worker pid -> (status fd, client pidfd)
    watch = {}  # client pidfd -> worker pid
    while True:
        try:
            ready, _, _ = select.select([ctl] + list(watch), [], [], 0.2)
        except InterruptedError:
            ready = []
        for r in ready:
            if r is ctl:
                try:
                    msg, fds, _, _ = socket.recv_fds(ctl, 64, 5)
                except OSError:
                    msg, fds = b"", []
                if not msg:  # mixcheck is gone
                    for pid in kids:
                        os.kill(pid, signal.SIGKILL)
                    return
                if len(fds) not in (4, 5) or len(msg) < 8:
                    for fd in fds:
                        os.close(fd)
                    continue
                client = struct.unpack("<q", msg[:8])[0]
                try:
                    pidfd = os.pidfd_open(client)
                except OSError:
                    pidfd = -1
                pid = os.fork()
                if pid == 0:
                    ctl.close()
                    _start_worker(FD_REQ, fds)
                for fd in fds[:3] + fds[4:]:
                    os.close(fd)
                kids[pid] = (fds[3], pidfd)
                if pidfd >= 0:
                    watch[pidfd] = pid
            else:  # a client ended: its worker goes too
                pid = watch.pop(r)
                os.close(r)
                if pid in kids:
                    kids[pid] = (kids[pid][0], -1)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        while kids:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            fd, pidfd = kids.pop(pid, (-1, -1))
            if fd >= 0:
                try:
                    os.write(fd, struct.pack("<i", st))
                except OSError:
                    pass
                os.close(fd)
            if pidfd >= 0:
                watch.pop(pidfd, None)
                os.close(pidfd)


def main():
    args = sys.argv[1:]
    if args and args[0] == "zygote":
        zygote(args[1:])
    else:
        sys.stderr.write("usage: worker.py zygote SPEC...\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
