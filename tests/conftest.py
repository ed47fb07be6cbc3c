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


# Hypothesis profiles of the property suite (tests/test_properties.py):
# - "ci" (the default): seeded (derandomize), no example database, few
#   examples: about two minutes for the module. It does not shrink a failing
#   example, so that a failure costs no more time than a pass;
# - "repro": the same examples as "ci", shrunk to a minimal one on failure
#   (HYPOTHESIS_PROFILE=repro to read a CI failure);
# - "dev": ten times more examples, random, shrunk.
try:
    import os

    from hypothesis import Phase, settings
except ImportError:  # the property suite needs the test extra
    pass
else:
    _ci = dict(derandomize=True, database=None, deadline=None, max_examples=4)
    settings.register_profile(
        "ci", phases=(Phase.explicit, Phase.reuse, Phase.generate), **_ci
    )
    settings.register_profile("repro", **_ci)
    settings.register_profile("dev", deadline=None, max_examples=40)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
