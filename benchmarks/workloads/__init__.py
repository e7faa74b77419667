"""One module per workload.

Each module defines:
  TITLE           one line shown in --list
  N, QUICK_N      problem size for a full and a --quick run
  make(ti, n)     fields and kernels written against the Taichi API; called with
                  `import fluxion as ti` and with `import taichi as ti`, so both run the
                  same source
  setup_<peer>(n) for the other peers it supports (numba, numpy, torch, warp)
and optionally INNER (calls per timed sample, for microsecond kernels), BYTES_PER_ITEM
(to report bandwidth) and MEMORY (report the resident memory that make() and the timed calls
add to the process: fields, compiled kernels, active cells).

make and each setup return (run, result): run() is what gets timed; result() is called once
afterwards, untimed, and returns a numpy array or float to compare across peers, or None
when the workload's outcome depends on how often run() was called.
"""
NAMES = ["launch_empty", "launch_loop16", "saxpy", "sum", "nbody", "diff_cloth", "pad", "rwkv", "mpm", "stable_fluids",
         "ex_fem", "ex_life", "ex_julia", "ex_mpm_materials", "ex_nbody", "ex_gravity",
         "ex_diff_spring", "ggui_mpm3d", "ggui_cloth", "ggui_fem", "ggui_mpm128", "ggui_image",
         "ggui_springs", "gui_simple_uv", "gui_logo", "gui_fullscreen", "gui_widgets",
         "gui_circles", "gui_lines", "gui_triangles", "ggui_x_mpm3d", "ggui_x_fem128", "ggui_x_cloth", "ggui_x_springs",
         "ggui_x_mpm128", "ggui_x_fractal", "ggui_x_fluid", "sparse_band", "sparse_cycles", "sparse_lists", "sparse_mpm"]
