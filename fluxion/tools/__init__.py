"""`ti.tools`: image files and videos (Pillow, and imageio for MP4)."""
from fluxion.tools.image import imread, imresize, imshow, imwrite  # noqa: F401
from fluxion.tools.video import VideoManager  # noqa: F401
