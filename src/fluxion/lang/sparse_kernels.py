"""The kernels that sparse bookkeeping launches from Python scope (lang/sparse_memory.py and
lang/sparse_list_sweep.py call them through the hook set here: this module imports
lang/kernel.py, which the modules of sparse SNodes sit below; the package imports it at its
start, fluxion/__init__.py)."""
from fluxion.frontend.loops import grouped
from fluxion.lang import sparse, sparse_list_sweep
from fluxion.lang.ad import current_tape
from fluxion.lang.kernel import kernel, template


@kernel
def _clear_lists(node: template(), length: template()):
    # the elements of each list up to its length zeroed (in parallel, over the lists), and
    # the length set to 0: what ti.deactivate does to one list in a kernel
    for I in grouped(length):
        if length[I] != 0:
            sparse.deactivate(node, I)


def clear_lists(node, length):
    """Empty the lists of dynamic `node` (`length`: their lengths) by a kernel; False (nothing
    done) while a Tape records: it would record the launch."""
    if current_tape() is not None:
        return False
    _clear_lists(node, length)
    return True


sparse_list_sweep.clear_lists = clear_lists
