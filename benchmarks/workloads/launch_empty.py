"""Cost of launching an already compiled kernel that does nothing."""
TITLE = "warm launch of an empty kernel"
N = QUICK_N = 1
INNER = 1000  # one call is microseconds: time a batch per sample


def make(ti, n):
    @ti.kernel
    def empty():
        pass

    return empty, lambda: None


def setup_numba(n):
    # the nearest thing numba has: calling a compiled function from Python
    import numba

    @numba.njit
    def empty():
        pass

    return empty, lambda: None


def setup_warp(n):
    import warp as wp

    @wp.kernel
    def empty():
        pass

    # a one-thread launch: warp needs a dimension
    return (lambda: wp.launch(empty, dim=1, device="cpu")), lambda: None
