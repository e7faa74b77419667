"""Image files in the original system's convention: arrays indexed [x, y] with y up, float in
[0, 1] or uint8; written and read through Pillow."""
from __future__ import annotations

import os

import numpy as np

from fluxion.ui.gui import _to_image_array


def imwrite(img, filename):
    from PIL import Image
    a = _to_image_array(img)
    d = os.path.dirname(filename)
    if d:
        os.makedirs(d, exist_ok=True)
    Image.fromarray(a, "RGB").save(filename)


def imread(filename, channels=0):
    """uint8 array indexed [x, y] (y up), (w, h, 3) or (w, h) for channels=1."""
    from PIL import Image
    im = Image.open(filename)
    im = im.convert("L" if channels == 1 else "RGB")
    a = np.asarray(im)[::-1]
    return np.ascontiguousarray(a.transpose(1, 0, 2) if a.ndim == 3 else a.T)


def imresize(img, w, h=None):
    from PIL import Image
    a = np.asarray(img)
    h = h or w
    out = Image.fromarray(_to_image_array(a), "RGB").resize((w, h))
    return np.ascontiguousarray(np.asarray(out)[::-1].transpose(1, 0, 2))


def imshow(img, title="fluxion"):
    """Show an image in a window where a display exists; nothing on a headless machine."""
    if not os.environ.get("DISPLAY"):
        return
    from fluxion.ui.gui import GUI
    a = _to_image_array(img)
    gui = GUI(title, res=(a.shape[1], a.shape[0]))
    gui.set_image(img)
    gui.show()
