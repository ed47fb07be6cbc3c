"""What a release ships: one version, the licence, tested lower bounds."""

import re
import subprocess
import sys
from inspect import signature
from pathlib import Path

import pytest

import skcal

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python >= 3.11


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_version_has_one_source():
    project = _pyproject()
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "skcal.__version__"}
    # a final or pre-release of PEP 440 (N.N.N, N.N.NrcN, N.N.N.devN)
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.dev\d+)?", skcal.__version__)
    conf = (ROOT / "doc" / "conf.py").read_text(encoding="utf-8")
    assert "version = release = skcal.__version__" in conf
    # the README names the wheel that this version builds
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"pip install dist/skcal-{skcal.__version__}-py3-none-any.whl" in readme


def test_skcal_version_prints_the_version_without_importing_torch():
    code = (
        "import sys\n"
        "from skcal.cli import main\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "assert 'torch' not in sys.modules and 'sklearn' not in sys.modules\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"skcal {skcal.__version__}\n"
    # the console script's own entry point says the same
    proc = subprocess.run(
        [sys.executable, "-m", "skcal", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout) == (0, f"skcal {skcal.__version__}\n")


def test_the_licence_is_bsd_3_clause_and_named_in_the_metadata():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("BSD 3-Clause License\n\nCopyright (c) 2026, the skcal")
    assert "3. Neither the name of the copyright holder" in text
    project = _pyproject()["project"]
    assert project["license"] == "BSD-3-Clause"  # PEP 639: an SPDX expression
    assert project["license-files"] == ["LICENSE"]
    # PEP 639: no licence classifier beside the expression
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]
    requires = _pyproject()["build-system"]["requires"]
    assert "setuptools>=77" in requires  # the first to read PEP 639's fields


def _release(version):
    return tuple(int(part) for part in version.split("."))


def _padded(release, n=3):
    return release + (0,) * (n - len(release))


def test_the_minimum_versions_run_pins_the_lower_bounds():
    bounds = {}
    for requirement in _pyproject()["project"]["dependencies"]:
        name, bound = re.fullmatch(r"([\w-]+)>=([\d.]+)", requirement).groups()
        bounds[name] = _release(bound)
    pins = {}
    text = (ROOT / ".ci" / "min-requirements.txt").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = re.fullmatch(r"([\w-]+)==([\d.]+)", line).groups()
            pins[name] = _release(version)
    # torch: 2.13.0, the CPU build at hand, installed by .ci/run itself
    assert set(pins) == set(bounds) - {"torch"}
    for name, pin in pins.items():
        assert _padded(pin) == _padded(bounds[name]), (name, pin, bounds[name])
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "min-requirements.txt" in ci and "torch==2.13.0" in ci


def test_ci_smoke_tests_the_wheel_after_the_tests():
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    ci = "\n".join(line for line in lines if not line.startswith("#"))
    tests = ci.index(".venv/bin/python -m pytest -q\n")
    assert tests < ci.index("python -m build") < ci.index(".ci/smoke.py")
    assert (ROOT / ".ci" / "smoke.py").is_file()


def test_weights_that_are_all_zero_are_refused_below_scikit_learn_1_9(monkeypatch):
    # scikit-learn < 1.9 (the lower bound is 1.6) accepts them in its weight
    # check: skcal refuses them itself, with the message of later versions
    from sklearn.utils.validation import _check_sample_weight

    from skcal.utils import _validation

    def accepting(*args, allow_all_zero_weights=None, **kwargs):
        if "allow_all_zero_weights" in signature(_check_sample_weight).parameters:
            kwargs["allow_all_zero_weights"] = True
        return _check_sample_weight(*args, **kwargs)

    monkeypatch.setattr(_validation, "_check_sample_weight", accepting)
    monkeypatch.setattr(_validation, "_ALL_ZERO", False)
    with pytest.raises(ValueError, match="at least one non-zero number"):
        _validation.check_sample_weight([0.0, 0.0], 2)
    zeros = _validation.check_sample_weight([0.0, 0.0], 2, allow_zero=True)
    assert zeros.tolist() == [0.0, 0.0]
    assert _validation.check_sample_weight([0.0, 2.0], 2).tolist() == [0.0, 2.0]
