"""What a kernel instance is compiled for: its plain code, or one of the autodiff variants.

The mode is part of an instance's key (a kernel has one instance per signature and mode) and
decides which autodiff transforms the compile driver applies (compiler/driver.py). It is the
IR's fact, below every layer that reads it: the launch (runtime/launch.py) tells an adjoint's
arguments by it.
"""
from __future__ import annotations

import enum


class Mode(enum.Enum):
    PRIMAL = "primal"        # the kernel as written
    GRAD = "grad"            # its adjoint (reverse mode): `kernel.grad(...)`
    DUAL = "dual"            # its dual (forward mode): a call inside `ti.ad.FwdMode`
    GRAD_DUAL = "grad_dual"  # the adjoint of the dual (Hessian-vector products)
    VALIDATE = "validate"    # the primal, checking the global data access rules (Tape, debug)
    RECORD = "record"        # the primal, logging what it overwrites (Tape)

    @property
    def reverse(self):
        """Whether the instance is an adjoint: it reads the grads of what the kernel wrote and
        accumulates into the grads of what it read (and returns nothing)."""
        return self is Mode.GRAD or self is Mode.GRAD_DUAL

    @property
    def forward(self):
        """Whether the instance computes duals (forward mode)."""
        return self is Mode.DUAL or self is Mode.GRAD_DUAL

    @property
    def differentiates(self):
        return self.reverse or self.forward

    @property
    def on_tape(self):
        """A primal instance instrumented for a Tape (access checks or an overwrite log)."""
        return self is Mode.VALIDATE or self is Mode.RECORD

    def __repr__(self):
        return f"Mode.{self.name}"


# module-level names for the launch path, where `mode is PRIMAL` must stay a global lookup
# and an identity test (an Enum attribute lookup and `__eq__` cost more)
PRIMAL = Mode.PRIMAL
GRAD = Mode.GRAD
DUAL = Mode.DUAL
GRAD_DUAL = Mode.GRAD_DUAL
VALIDATE = Mode.VALIDATE
RECORD = Mode.RECORD
