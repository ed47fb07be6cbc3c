"""One short command for a CUDA machine: GPU tests, then the GPU benchmark.

Runs every test that the ``device`` fixture parametrises on CUDA (``-k cuda``)
and, with ``--device cuda``, the temperature-scaling benchmark, the fit and
predict times of the scaling family at 50,000 x 1,000 (``bench_device.py``),
SMART's speed benchmark, the local-metrics benchmark and the VQ fit benchmark,
and exits with a non-zero status if CUDA is missing or a test fails. Meant to
finish in well under 5 minutes on one GPU.

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
