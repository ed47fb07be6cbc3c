"""One short command for a CUDA machine: GPU tests, then the GPU benchmark.

Runs every test that the ``device`` fixture parametrises on CUDA (``-k cuda``)
and the temperature-scaling benchmark with ``--device cuda``, and exits with
a non-zero status if CUDA is missing or a test fails. Meant to finish in well
under 5 minutes on one GPU.

Run:  python benchmarks/gpu_check.py
"""

import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main() -> int:
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
    bench = subprocess.run(
        [
            sys.executable,
            os.path.join(HERE, "bench_temperature.py"),
            "--device",
            "cuda",
            "--repeat",
            "2",
        ],
        cwd=ROOT,
    )
    return tests.returncode or bench.returncode


if __name__ == "__main__":
    sys.exit(main())
