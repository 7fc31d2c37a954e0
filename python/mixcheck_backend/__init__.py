"""mixcheck_backend: write a mixcheck backend in Python.

A Python backend is a class derived from :class:`Backend`. ``mixcheck run --python PY --python-backend SPEC``
(SPEC: ``MODULE``, ``MODULE:CLASS``, ``FILE.py`` or ``FILE.py:CLASS``) imports it once per run in the
interpreter PY and drives it through the same scenarios as a C backend: each check's process gets a
worker forked from that interpreter (worker.py), the harness calls the methods below over a socket, and
every tensor travels through shared memory as a numpy array.

What a port author writes::

    import numpy as np
    from mixcheck_backend import Backend

    class MyShortConv(Backend):
        name = "my-shortconv"          # the backend name in reports and for --backend
        family = "shortconv"           # mamba2, mamba1, gdn, shortconv, attention, lightning or kda
                                       # (a whole model: derive from StackBackend instead)
        dtypes = ("f64", "f32")        # the storage dtypes it accepts

        def __init__(self, family, dtype, config, weights, options):
            ...                        # keep what you need; `weights` are yours
        def cache_alloc(self, batch): ...
        def cache_copy(self, cache): ...
        def cache_export(self, cache): ...
        def cache_import(self, cache, conv_state, recurrent_state): ...
        def forward(self, cache, x, mask): ...

    MIXCHECK_BACKENDS = [MyShortConv]  # what `--python-backend my_module` registers

The contract is that of ``harness/include/mixcheck/backend.h`` (docs/semantics.md §1.3, §A.4), restated
on each method. Arrays handed *to* a method (x, mask, conv_state, ...) are read-only views of shared
memory, valid only during the call: copy what you keep. Arrays a method returns are copied out by the
worker, which checks their shape and dtype; a wrong shape or dtype is that call's error.

Errors: any exception is the check's error, with its type, message and traceback in the diagnosis.
Raise :class:`Unsupported` for a configuration, dtype or option the backend does not do (the check is
then ``unsupported``, never passed) and :class:`Invalid` for arguments that break the contract.

Dtypes: ``f64`` and ``f32`` arrays are numpy float64 / float32, ``f16`` is numpy float16, and ``bf16``
(which numpy lacks) travels as its uint16 bit pattern (``torch.from_numpy(a).view(torch.bfloat16)``).
"""

import numpy as np

__all__ = ["Backend", "StackBackend", "StackOptions", "Options", "Unsupported", "Invalid", "NUMPY_DTYPES", "STATE_DTYPES"]

#: numpy storage type of each mixcheck dtype (bf16 as its bit pattern).
NUMPY_DTYPES = {"f64": np.dtype(np.float64), "f32": np.dtype(np.float32),
                "f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16)}
#: dtype of exported / imported cache states: f64 for an f64 model, else f32 (docs/semantics.md §A.6).
STATE_DTYPES = {"f64": np.dtype(np.float64), "f32": np.dtype(np.float32),
                "f16": np.dtype(np.float32), "bf16": np.dtype(np.float32)}


class Unsupported(Exception):
    """A configuration, dtype or option this backend does not do: the check is ``unsupported``."""


class Invalid(Exception):
    """Arguments that break the contract (shapes, a batch mismatch): the check's error."""


class Options:
    """What ``mixcheck run`` chose for the model besides its configuration.

    Attributes:
        device: ``--python-device`` (default ``"cpu"``). The backend runs there and is checked against
            that device's tolerance profile; host<->device copies are the backend's job (the arrays the
            worker hands over and takes back are host numpy arrays).
        chunk_size: the internal chunk length asked for (0 = the backend's default). Only a backend
            that declares ``chunked = True`` is asked for others: ``chunk_size_invariance`` runs it at
            each chunk length of the case, and each must match the golden.
        threads: worker threads asked for (0 = the backend's default).
        conv_shape: ``(C, K)``, one batch row of the exported conv window.
        state_shape: one batch row of the exported recurrent state (``()`` for ShortConv, which has none).
        hidden: ``D``.
    """

    def __init__(self, device="cpu", chunk_size=0, threads=0, conv_shape=(), state_shape=(), hidden=0):
        self.device = device
        self.chunk_size = chunk_size
        self.threads = threads
        self.conv_shape = tuple(conv_shape)
        self.state_shape = tuple(state_shape)
        self.hidden = hidden


class Backend:
    """Base class of a Python mixer backend: one instance is one model (``model_create``).

    Class attributes a subclass sets:
        name: the backend name (unique per family), e.g. ``"np-shortconv"``.
        family: ``"mamba2"``, ``"mamba1"``, ``"gdn"``, ``"shortconv"``, ``"attention"``, ``"lightning"`` or ``"kda"``.
        dtypes: the storage dtypes accepted, a subset of ``("f64", "f32", "f16", "bf16")``.

        chunked: ``True`` when the backend has an internal chunk length and honours
            ``options.chunk_size`` (``MC_CAP_CHUNK_SIZE``; Mamba2 and GDN ports of chunked kernels).
            ``chunk_size_invariance`` then creates one model per chunk length of the case; without it
            that scenario is not scheduled for the backend. Default ``False``.

    A subclass that defines :meth:`forward_packed` has the packed call (``MC_CAP_PACKED``); without
    it the serving-path scenarios report ``unsupported``.
    """

    name = None
    family = None
    dtypes = ("f64", "f32")
    chunked = False

    def __init__(self, family, dtype, config, weights, options):
        """Creates the model.

        Args:
            family: the family name (the class's own ``family``).
            dtype: ``"f64"``, ``"f32"``, ``"f16"`` or ``"bf16"``: the storage of weights, x and y.
            config: dict of the HF configuration attributes (``hidden_size``, ``num_heads``,
                ``time_step_limit`` as a 2-list, ``projection_layout`` for GDN, ...), as the golden
                stores them (docs/semantics.md §2.1, §3.1, §4.1, §5.1).
            weights: dict HF parameter name -> numpy array with its HF shape, in the model dtype. The
                arrays are the backend's own copies.
            options: an :class:`Options`.
        """
        self.dtype = dtype
        self.config = config
        self.options = options

    def close(self):
        """Releases the model (``model_destroy``). Optional."""

    def cache_alloc(self, batch):
        """Returns a fresh cache for ``batch`` rows: zero window, zero state, not primed.

        The cache is any Python object; the harness only holds a handle to it."""
        raise NotImplementedError

    def cache_copy(self, cache):
        """Returns an independent copy of ``cache``, including whether it is primed."""
        raise NotImplementedError

    def cache_export(self, cache):
        """Returns ``(conv_state, recurrent_state)``.

        conv_state: ``[B][C][K]``, the last K pre-conv inputs of each channel, oldest first.
        recurrent_state: Mamba2 ``[B][H][P][N]``, Mamba1 ``[B][I][N]``, GDN ``[B][Hv][dk][dv]``, or
        ``None`` for ShortConv. Any float dtype; the worker converts to :data:`STATE_DTYPES`."""
        raise NotImplementedError

    def cache_import(self, cache, conv_state, recurrent_state):
        """Sets the window and state from the layouts of :meth:`cache_export` and marks the cache
        primed. Returns the cache to use from now on (``cache`` itself, filled, or a new object)."""
        raise NotImplementedError

    def forward(self, cache, x, mask):
        """One forward over ``L`` tokens; returns ``y`` ``[B][L][D]`` in the model dtype.

        x: ``[B][L][D]`` in the model dtype. mask: ``[B][L]`` uint8 (1 real token, 0 padding) or
        ``None`` (all real). cache: ``None`` (prefill without cache) or a cache of this model, updated
        in place:
          - a cache no forward has written yet: prefill from a zero window and a zero state;
          - a primed cache and L == 1: one decode step;
          - a primed cache and L > 1: a multi-token forward seeded from the cache.
        A padding token never reaches the cache (the window and state after it equal those before it);
        its output is not compared but must be finite. The mask is honoured whenever it is given."""
        raise NotImplementedError

    # forward_packed(self, pool, cu_seqlens, slots, has_initial_state, x) -> y   (optional)
    #   The packed call of serving engines: n sequences back to back along the token axis of x [T][D],
    #   sequence i owning tokens cu_seqlens[i] .. cu_seqlens[i+1]-1 and row slots[i] of `pool` (a
    #   cache from cache_alloc with S >= n rows); has_initial_state[i] == 0 starts it from zero whatever
    #   its slot holds. Returns y [T][D]. Every slot not named is left as it was. cu_seqlens and slots
    #   are int64 arrays, has_initial_state uint8.


class StackOptions:
    """What ``mixcheck run`` tells a whole-stack backend besides the checkpoint.

    Attributes:
        device: ``--python-device`` (default ``"cpu"``).
        threads: worker threads asked for (0 = the backend's default).
        hidden: ``D``; vocab: ``V``; n_layers: ``n``.
        layers: one entry per layer, in order: ``(family, conv_shape, state_shape)`` with the family name
            (``mamba2``, ``mamba1``, ``gdn``, ``shortconv``, ``attention``), one batch row of the exported
            conv window and of the exported state (``()`` for ShortConv), as mixcheck derives them from the
            config.json (``harness/src/family/stackconfig.c``).
    """

    def __init__(self, device="cpu", threads=0, hidden=0, vocab=0, layers=()):
        self.device = device
        self.threads = threads
        self.hidden = hidden
        self.vocab = vocab
        self.layers = [(f, tuple(c), tuple(s)) for f, c, s in layers]
        self.n_layers = len(self.layers)


class StackBackend(Backend):
    """Base class of a Python whole-stack backend (``MC_FAMILY_STACK``): one instance is one model, a port
    of an upstream ``...ForCausalLM`` (docs/models.md §7). Token ids in, logits out, one cache for every
    layer. ``cache_alloc`` and ``cache_copy`` are :class:`Backend`'s.

    Class attributes a subclass sets: ``name``, ``dtypes`` (``family`` is ``"stack"``; ``chunked`` does not
    apply: a whole stack is created without a chunk length), and ``hidden``:
    True when :meth:`forward` returns the hidden states, mixer inputs and mixer outputs it is asked for
    (``MC_CAP_STACK_HIDDEN``).
    """

    family = "stack"
    hidden = False

    def __init__(self, family, dtype, config, weights, options):
        """Creates the model.

        Args:
            family: ``"stack"``.
            dtype: the storage dtype of the weights (``"f64"``, ``"f32"``, ``"f16"``, ``"bf16"``).
            config: ``{"model_type": str, "config_json": str}``: the config.json ``model_type`` and the
                upstream config.json text.
            weights: dict checkpoint name -> numpy array in its checkpoint shape and the model dtype
                (every tensor of the checkpoint; a tied head has no ``lm_head.weight``).
            options: a :class:`StackOptions`.
        """
        super().__init__(family, dtype, config, weights, options)

    def forward(self, cache, input_ids, mask, want_hidden=False):
        """One forward of the whole model over ``L`` tokens.

        input_ids: ``[B][L]`` int64. mask: ``[B][L]`` uint8 or ``None``. cache: ``None`` or a cache of this
        model (the forward contract of :meth:`Backend.forward`, for every layer; an attention layer's
        position of a real token is the number of real tokens before it in its row).
        Returns ``logits`` ``[B][L][V]`` or, with ``want_hidden``, ``(logits, hidden_states,
        mixer_inputs, mixer_outputs)``: ``[n+1][B][L][D]`` the residual stream after the embedding and
        after every layer (the last before the final norm), ``[n][B][L][D]`` each layer's mixer input (its
        block norm's output) and ``[n][B][L][D]`` each layer's mixer output before its residual add. Any
        float dtype; the worker converts to f64 for f64 models, else f32."""
        raise NotImplementedError

    def cache_export(self, cache, layer):
        """Returns ``(conv_state, recurrent_state)`` of layer ``layer`` in its family's layout
        (:meth:`Backend.cache_export`; attention: conv ``[B][1][1]`` the cached position count, state
        ``[B][2*Hkv][Lmax][hd]``, keys after the k norm and RoPE then values, slots >= count zero)."""
        raise NotImplementedError

    def cache_import(self, cache, conv_state, recurrent_state):
        raise Unsupported("a whole-stack backend has no cache_import")
