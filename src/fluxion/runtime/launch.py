"""The launch of a compiled kernel instance: the arguments packed into its context, the
call, the return values read back, and the errors it reports raised in Python.

`Instance` wraps what the compile driver made (or the offline cache loaded) with how the
kernel's arguments map to context slots. A launch costs about a microsecond, most of it
here: the packing loop below is the hot path of every kernel call, so it tests types by
identity first and keeps to local and global names.
"""
from __future__ import annotations

import operator
import time

import numpy as np

from fluxion.ir.modes import PRIMAL
from fluxion.ir.errors import FluxionRuntimeError, FluxionRuntimeTypeError
from fluxion.runtime import program
from fluxion.runtime.args import ArrayArg, ScalarArg, StructArg, int_range, int_slot_value
from fluxion.runtime.staging import HostStaging


class Instance:
    """One compiled instance of a kernel: its machine code and how to pass its arguments."""

    def __init__(self, kernel, key, compiled, layout, ret_types, ret_shape):
        # one launch of an instance at a time: its arguments, returns and error code go
        # through one context buffer (launches from several Python threads take turns).
        # The launch in flight holds the token: popping and appending it are atomic under
        # the GIL and cost ~40 ns, where a threading.Lock costs 0.3-0.8 us (a system call
        # on some machines), a third of an empty kernel's launch.
        self._token = [True]
        st = program.state()
        self.generation = st.generation
        st.instances.add(self)
        st.compiled_count += 1
        self.kernel = kernel
        self.key = key
        self.compiled = compiled
        self.ret_types = ret_types
        self.ret_shape = ret_shape
        self._layout = layout       # per argument: None (template) or (slot, spec)
        # how the offline cache served this instance ("loaded", "compiled", "compiled, not
        # cached: <why>"), and its key there
        self.cache_note = None
        self.cache_key = None
        self._packers = []
        # host arrays passed to a CUDA kernel are copied in and out around each launch
        self._staging = getattr(compiled, "stages_host_arrays", False)
        for pos, entry in enumerate(layout):
            if entry is None:
                continue
            slot, spec = entry
            self._packers.append((pos, slot, spec))

    def __repr__(self):
        return f"<instance of {self.kernel.name} {self.key}>"

    def drop(self, why):
        """Remove this instance from its kernel's cache (the next call compiles anew); a
        launch of it kept elsewhere raises."""
        if self.kernel._instances.get(self.key) is self:
            del self.kernel._instances[self.key]
        self.compiled = _Dropped(self.compiled, self.kernel.name, why)

    def _stage(self, ptr, shape, strides, desc, back, keep):
        """A device copy of host memory for this launch (CUDA): its pointer, and `keep` with
        the staging added, which the launch finishes."""
        st = HostStaging(self.compiled.jit.device, ptr, shape, strides,
                                     desc.dtype.nbytes, back)
        keep = [] if keep is None else keep
        keep.append(st)
        return st.device_pointer(ptr), keep

    def _arg_error(self, pos, spec, a, dtype=None):
        k = self.kernel
        name = k._arg_specs[pos][0]
        dtype = dtype or spec.dtype
        note = ""
        if dtype.is_int:
            lo, hi = int_range(dtype)
            if isinstance(a, (float, np.floating)):
                note = (" (a float is never converted to an integer argument, whose value "
                        "it could change; pass an int: int(x), round(x))")
            else:
                try:
                    operator.index(a)
                    note = f" (out of range: {dtype} arguments take {lo} .. {hi})"
                except TypeError:
                    pass
        # a launch-time error, as in the original system (whose words come first)
        return FluxionRuntimeTypeError(k._where(
            f"Argument ({pos},) (type={type(a)}) cannot be converted into required type "
            f"{dtype}: kernel '{k.name}': argument '{name}' expects {dtype}, got "
            f"{type(a).__name__} {a!r}"[:400] + note))

    def _struct_error(self, pos, spec, a, why):
        k = self.kernel
        name = k._arg_specs[pos][0]
        return FluxionRuntimeTypeError(k._where(
            f"Argument ({pos},) (type={type(a)}) cannot be converted into required type "
            f"{spec.stype!r}: kernel '{k.name}': argument '{name}': {why}"[:600]))

    def _int_value(self, v, pos, spec, dtype):
        """The context slot value of integer argument `v` (see int_slot_value), or raise."""
        bits = int_slot_value(v, dtype)
        if bits is None:
            raise self._arg_error(pos, spec, v, dtype) from None
        return bits

    def _take_turn(self):
        """Wait for the launch of this instance in flight on another thread (rare), or
        raise if `ti.reset` retired the instance (it keeps the token)."""
        self._wait_for_token(check_stale=True)

    def retire(self):
        """Wait for the launch in flight, if any, and take the token for good: later launches
        raise (`ti.reset`, which has already published the new generation, calls this)."""
        try:
            self._token.pop()
        except IndexError:
            self._wait_for_token(check_stale=False)

    def _wait_for_token(self, check_stale):
        while True:
            if check_stale and self.generation != program._state.generation:
                raise self._stale()
            time.sleep(2e-5)
            try:
                self._token.pop()
                return
            except IndexError:
                pass

    def _stale(self):
        return FluxionRuntimeError(
            f"kernel '{self.kernel.name}' was launched while ti.reset() (or ti.init()) ran on "
            f"another thread, or after it: the fields and code of that launch are gone")

    def launch(self, args, arrays=None, mode=PRIMAL, grads=None):
        token = self._token
        try:
            token.pop()
        except IndexError:
            self._take_turn()
        try:
            c = self.compiled
            ints, floats = c.ctx_i, c.ctx_f
            keep = None
            for pos, slot, spec in self._packers:
                a = args[pos]
                if type(spec) is ArrayArg:
                    keep = spec.pack(self, spec, a, arrays[pos], ints, mode, keep,
                                     grads.get(pos) if grads else None)
                elif isinstance(spec, ScalarArg):
                    if spec.is_float:
                        try:
                            if isinstance(a, (str, bytes)):
                                raise TypeError  # numpy would parse "3" silently
                            floats[slot] = a
                        except (OverflowError, TypeError, ValueError):
                            raise self._arg_error(pos, spec, a) from None
                    elif type(a) is int and spec.lo <= a <= spec.hi:
                        ints[slot] = a      # the common case: a Python int in range
                    else:
                        ints[slot] = self._int_value(a, pos, spec, spec.dtype)
                elif type(spec) is StructArg:
                    why = spec.mismatch(a)
                    try:
                        if why is None:
                            vals = spec.flatten(a)
                    except (AttributeError, KeyError, IndexError, TypeError) as e:
                        why = str(e)
                    if why is not None:
                        raise self._struct_error(pos, spec, a, why) from None
                    for k, ((_, dt), v) in enumerate(zip(spec.leaves, vals)):
                        if dt.is_float:
                            try:
                                floats[slot + k] = v
                            except (OverflowError, TypeError, ValueError):
                                raise self._arg_error(pos, spec, v, dt) from None
                        else:
                            ints[slot + k] = self._int_value(v, pos, spec, dt)
                else:
                    why = spec.mismatch(a)
                    vals = a.entries if isinstance(a, spec.matrix_cls) else list(np.ravel(a))
                    if why is None and len(vals) != spec.count:
                        why = f"it takes {spec.count} values, got {len(vals)}"
                    if why is not None:
                        raise FluxionRuntimeTypeError(self.kernel._where(
                            f"Argument ({pos},) (type={type(a)}) cannot be converted into "
                            f"required type {spec.mtype!r}: kernel '{self.kernel.name}': "
                            f"argument '{self.kernel._arg_specs[pos][0]}': {why}"[:600]))
                    if spec.dtype.is_float:
                        for k, v in enumerate(vals):
                            try:
                                floats[slot + k] = v
                            except (OverflowError, TypeError, ValueError):
                                raise self._arg_error(pos, spec, v) from None
                    else:
                        for k, v in enumerate(vals):
                            ints[slot + k] = self._int_value(v, pos, spec, spec.dtype)
            if keep is None:
                c.run()
            else:
                # scratch gradient arrays live until the launch is over; host arrays staged for
                # a CUDA launch come back (and their device copies go) even if it fails
                try:
                    c.run()
                finally:
                    for k in keep:
                        if type(k) is HostStaging or type(k) is TorchWrite:
                            k.finish()
                del keep
            if not self.ret_types:
                return None
            vals = c.read_returns()
            if self.ret_shape == "scalar":
                return vals[0]
            rebuild = getattr(self.ret_shape, "rebuild", None)
            if rebuild is not None:
                # vectors and matrices, structs and tuples of them: the language's values,
                # made by lang/launch_values.py's MatrixReturn and lang/kernel.py's ReturnSpec
                return rebuild(vals)
            return list(vals)        # (several scalars: a list, as the original returns)
        finally:
            token.append(True)


class _Dropped:
    """Stands for the code of a dropped instance: launching it raises."""

    def __init__(self, compiled, name, why):
        self.ctx_i, self.ctx_f = compiled.ctx_i, compiled.ctx_f
        self.stages_host_arrays = getattr(compiled, "stages_host_arrays", False)
        self._name, self._why = name, why

    def run(self):
        raise FluxionRuntimeError(f"kernel '{self._name}': this compiled instance was dropped: "
                                  f"{self._why}; call the kernel again to compile it anew")


class TorchWrite:
    """A tensor that requires grad and that a launch writes: afterwards its version counter
    moves on (torch checks it before using a saved tensor in a backward pass)."""
    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor

    def finish(self):
        from torch.autograd.graph import increment_version
        increment_version(self.tensor)
