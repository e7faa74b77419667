"""The `--arch` option every example takes: `cpu` (the default), `cuda` or `gpu`. Without a
CUDA device, `cuda`/`gpu` run on the CPU after ti.init's warning."""
import fluxion as ti
from fluxion.lang import runtime

CHOICES = ("cpu", "cuda", "gpu")


def add_option(ap):
    ap.add_argument("--arch", choices=CHOICES, default="cpu",
                    help="backend (cuda/gpu fall back to the CPU, with a warning, where no "
                         "CUDA device exists)")


def of(args):
    """The arch object `--arch` names."""
    return {"cpu": ti.cpu, "cuda": ti.cuda, "gpu": ti.gpu}[getattr(args, "arch", "cpu")]


def running_on_cuda():
    """Whether ti.init settled on CUDA (after a possible fallback to the CPU)."""
    return runtime.on_cuda()
