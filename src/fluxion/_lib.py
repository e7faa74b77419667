"""`ti._lib.core`: the few questions Taichi's programs ask its native core, such as
`ti.vulkan if ti._lib.core.with_vulkan() else ti.cuda` in its GGUI examples. fluxion has no
Vulkan, Metal or OpenGL backend, and CUDA where a driver is present."""
from __future__ import annotations

import types

from fluxion.runtime import cuda_driver


def _no():
    return False


core = types.SimpleNamespace(
    with_vulkan=_no, with_metal=_no, with_opengl=_no, with_gles=_no, with_dx11=_no,
    with_dx12=_no, with_amdgpu=_no, with_cuda=lambda: bool(cuda_driver.available()),
    GGUI_AVAILABLE=True)
