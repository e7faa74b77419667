"""`ti.ad`: reverse-mode automatic differentiation."""
from fluxion.lang.ad import (FwdMode, Tape, clear_all_gradients, grad_for,  # noqa: F401
                             grad_replaced, hvp, jacobian, no_grad)
from fluxion.lang.torch_bridge import torch_function  # noqa: F401,E402
