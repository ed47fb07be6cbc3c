import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    """Run a numerical test on the CPU and, when CUDA is present, on CUDA."""
    return request.param


try:  # draw without a display
    import matplotlib

    matplotlib.use("Agg")
except ImportError:  # the display tests skip
    pass
