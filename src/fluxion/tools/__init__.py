"""`ti.tools`: image files (imwrite, imread, imresize, imshow), videos (VideoManager) and PLY
files (PLYWriter).

Images follow the original system's convention: indexed [x, y] with y up, float in [0, 1] or
uint8. Pillow (and imageio + imageio-ffmpeg for MP4) come with the `gui` extra; they are
imported only when used.
"""
from fluxion.tools import image, ply, video  # noqa: F401
from fluxion.tools.image import imread, imresize, imwrite  # noqa: F401
# (after tools.image, which ti.GUI imports)
from fluxion.tools.show import imshow  # noqa: F401
from fluxion.tools.ply import PLYWriter  # noqa: F401
from fluxion.tools.video import VideoManager  # noqa: F401

__all__ = ["image", "ply", "video", "imread", "imresize", "imshow", "imwrite", "PLYWriter",
           "VideoManager"]
