"""`ti.tools.VideoManager`: save frames as PNG files, then turn them into a GIF (Pillow) and an
MP4 (imageio with imageio-ffmpeg, when installed; otherwise the MP4 is skipped with a warning).

Frames go to disk as they come (`<output_dir>/frames/000000.png`, ...) rather than staying in
memory, so long runs cost no RAM and a crashed run keeps its frames.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from fluxion.tools.image import as_numpy, imresize, imwrite, require_pillow, to_uint8

FRAME_DIR = "frames"


def mp4_support():
    """None if MP4s can be written here, else the exception that says why not."""
    try:
        import imageio.v2  # noqa: F401
        import imageio_ffmpeg
        imageio_ffmpeg.get_ffmpeg_exe()     # raises when no ffmpeg binary can be found
    except Exception as e:  # ImportError, or RuntimeError from a missing binary
        return e
    return None


class VideoManager:
    """Collect frames (images indexed [x, y], y up; float in [0, 1] or uint8) and build videos.

    output_dir        where frames/ and the videos go (created if missing)
    video_filename    the videos' base name ('video' by default; a .mp4/.gif suffix is dropped)
    width, height     the video's size; frames of another size are resized (nearest) to it.
                      By default the first frame's size.
    post_processing   accepted for compatibility; nothing is done with it
    post_processor    an object whose .process(img) returns the image to store, applied to
                      every frame before it is written
    framerate         frames per second
    automatic_build   build the videos again whenever the frame count reaches 4, 8, 16, ...,
                      so an interrupted run still leaves a video; make_video() builds at will
    """

    def __init__(self, output_dir, video_filename=None, width=None, height=None,
                 post_processing=False, framerate=24, automatic_build=True,
                 post_processor=None):
        if (width is None) != (height is None):
            raise ValueError("VideoManager: give both width and height, or neither")
        self.directory = os.fspath(output_dir)
        self.frame_directory = os.path.join(self.directory, FRAME_DIR)
        os.makedirs(self.frame_directory, exist_ok=True)
        name = video_filename or "video"
        base, ext = os.path.splitext(name)
        self.video_filename = base if ext.lower() in (".mp4", ".gif") else name
        self.width, self.height = width, height
        self.post_processing = post_processing
        self.post_processor = post_processor
        self.framerate = framerate
        self.automatic_build = automatic_build
        self.frame_counter = 0
        self.frame_fns = []
        self._next_build = 4
        self._warned_mp4 = False

    def get_output_filename(self, suffix):
        """The path of the video with this suffix ('.mp4', '.gif')."""
        return os.path.join(self.directory, self.video_filename + suffix)

    def get_frame_directory(self):
        return self.frame_directory

    def write_frame(self, img):
        """Store one frame (array or field). Returns the PNG file it was written to."""
        a = as_numpy(img)
        if self.post_processor is not None:
            a = as_numpy(self.post_processor.process(a))
        a = to_uint8(a)
        if self.width is None:
            self.width, self.height = int(a.shape[0]), int(a.shape[1])
        elif a.shape[:2] != (self.width, self.height):
            a = imresize(a, self.width, self.height)
        fn = os.path.join(self.frame_directory, f"{self.frame_counter:06d}.png")
        imwrite(a, fn)
        self.frame_fns.append(fn)
        self.frame_counter += 1
        if self.automatic_build and self.frame_counter == self._next_build:
            self._next_build *= 2
            self.make_video()
        return fn

    def write_frames(self, images):
        for img in images:
            self.write_frame(img)

    def clean_frames(self):
        """Delete the frame files this manager wrote (and forget them)."""
        for fn in self.frame_fns:
            if os.path.exists(fn):
                os.remove(fn)
        self.frame_fns = []
        self.frame_counter = 0
        self._next_build = 4

    def _frames(self):
        """The stored frames as PIL RGB images, one at a time."""
        Image = require_pillow()
        for fn in self.frame_fns:
            with Image.open(fn) as im:
                yield im.convert("RGB")

    def make_video(self, mp4=True, gif=True):
        """Build the videos from all frames so far; returns the paths written. Without
        imageio / imageio-ffmpeg the MP4 is skipped with a warning (the GIF needs Pillow only).
        Note that a GIF stores identical consecutive frames as one longer frame."""
        if not self.frame_fns:
            raise ValueError("VideoManager.make_video: no frames were written")
        written = []
        if gif:
            written.append(self._make_gif())
        if mp4:
            reason = mp4_support()
            if reason is None:
                written.append(self._make_mp4())
            elif not self._warned_mp4:
                self._warned_mp4 = True
                warnings.warn(f"VideoManager: no MP4 written ({type(reason).__name__}: "
                              f"{reason}); pip install imageio imageio-ffmpeg", stacklevel=2)
        return written

    def _make_gif(self):
        fn = self.get_output_filename(".gif")
        frames = list(self._frames())
        # GIF delays are in hundredths of a second; Pillow takes milliseconds.
        delay = max(10, int(round(100.0 / self.framerate)) * 10)
        frames[0].save(fn, save_all=True, append_images=frames[1:], duration=delay, loop=0)
        return fn

    def _make_mp4(self):
        import imageio.v2 as imageio
        fn = self.get_output_filename(".mp4")
        # H.264 in yuv420p needs even sides: drop a last odd row / column. macro_block_size=2
        # stops imageio from rescaling to multiples of 16 behind our back.
        with imageio.get_writer(fn, fps=self.framerate, codec="libx264", macro_block_size=2,
                                pixelformat="yuv420p", ffmpeg_log_level="error") as writer:
            for im in self._frames():
                rows = np.asarray(im)
                h, w = rows.shape[0] & ~1, rows.shape[1] & ~1
                if h == 0 or w == 0:
                    raise ValueError("VideoManager: an MP4 needs frames of at least 2 x 2 pixels")
                writer.append_data(np.ascontiguousarray(rows[:h, :w]))
        return fn
