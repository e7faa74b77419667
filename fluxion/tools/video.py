"""`ti.tools.VideoManager`: collect frames, then write a GIF (Pillow) and an MP4 (imageio +
imageio-ffmpeg, when installed)."""
from __future__ import annotations

import os
import warnings

import numpy as np

from fluxion.ui.gui import _to_image_array


class VideoManager:
    def __init__(self, output_dir, video_filename="video", width=None, height=None,
                 post_processing=False, framerate=24, automatic_build=True):
        self.output_dir = output_dir
        self.video_filename = video_filename or "video"
        self.framerate = framerate
        self.frames = []
        os.makedirs(output_dir, exist_ok=True)

    def write_frame(self, img):
        self.frames.append(_to_image_array(img))

    def write_frames(self, images):
        for img in images:
            self.write_frame(img)

    def get_output_filename(self, suffix):
        return os.path.join(self.output_dir, self.video_filename + suffix)

    def make_video(self, gif=True, mp4=True):
        from PIL import Image
        if not self.frames:
            raise ValueError("VideoManager: no frames were written")
        if gif:
            ims = [Image.fromarray(f, "RGB") for f in self.frames]
            ims[0].save(self.get_output_filename(".gif"), save_all=True, append_images=ims[1:],
                        duration=int(1000 / self.framerate), loop=0)
        if mp4:
            try:
                import imageio.v2 as imageio
                with imageio.get_writer(self.get_output_filename(".mp4"), fps=self.framerate) as w:
                    for f in self.frames:
                        h, wd = f.shape[:2]
                        w.append_data(np.ascontiguousarray(f[: h - h % 2, : wd - wd % 2]))
            except Exception as e:  # imageio or its ffmpeg missing
                warnings.warn(f"VideoManager: no MP4 written ({e}); install imageio and "
                              f"imageio-ffmpeg", stacklevel=2)
