"""`ti.ad`: reverse-mode automatic differentiation."""
from fluxion.lang.ad import (Tape, clear_all_gradients, grad_for, grad_replaced,  # noqa: F401
                             no_grad)
from fluxion.lang.torch_bridge import torch_function  # noqa: F401,E402
