r"""One short command for a CUDA machine: GPU tests, then the GPU benchmark.

Runs every test that the ``device`` fixture parametrises on CUDA (``-k cuda``)
and, with ``--device cuda``, the temperature-scaling benchmark, the fit and
predict times of the scaling family at 50,000 x 1,000 (``bench_device.py``),
SMART's speed benchmark, the local-metrics benchmark and the VQ fit benchmark,
and exits with a non-zero status if CUDA is missing or a test fails. Meant to
finish in well under 5 minutes on one GPU.

Run:  python benchmarks/gpu_check.py

On a lent device machine (nothing can be installed from the network there;
its ``python3`` is 3.12 with torch, scipy, numpy, joblib, pytest and
hypothesis, and a scikit-learn of unchecked version, while skcal needs
>= 1.6), carry a scikit-learn wheel in an ignored folder and put skcal's
source on the path. Here, once (``.whl`` listed in ``.git/info/exclude``)::

    pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 -d .whl \
        scikit-learn==1.9.1

then, as the device command (``carry: [".whl"]``)::

    python3 -m pip install -q --no-index --no-deps --target /tmp/site \
        .whl/*.whl && PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 \
        python3 benchmarks/gpu_check.py
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: CUDA is not available on this machine", file=sys.stderr)
        return 1
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}", flush=True)
    tests = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "cuda",
            os.path.join(ROOT, "tests"),
        ],
        cwd=ROOT,
    )
    codes = [tests.returncode]
    for script, extra in (
        ("bench_temperature.py", ["--repeat", "2"]),
        ("bench_device.py", ["--shape", "50000x1000"]),
        ("bench_smart.py", ["--skip-evidence"]),
        ("bench_local.py", []),
        ("bench_vq.py", ["--skip-evidence"]),
    ):
        run = subprocess.run(
            [sys.executable, os.path.join(HERE, script), "--device", "cuda", *extra],
            cwd=ROOT,
        )
        codes.append(run.returncode)
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
