"""Benchmarks: fluxion against Taichi, Numba, NumPy, PyTorch and Warp.

Run `python -m benchmarks` (see run.py).
"""
