"""CONTRIBUTING.md's recipe, tried: a throwaway calibrator added to a copy.

A copy of the package, its tests and the docs the recipe names gets a numpy
``ShiftScaling`` (a per-class bias added to the logits) written by the
recipe. With every file the recipe lists, the checks it names pass and the
copy differs from the original by exactly the number of files the recipe
states; with any one piece forgotten, the test the recipe's table names for
that piece fails. About a minute (one pytest process per scenario).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: what the copy leaves out: version control, environments, build outputs
LEFT_OUT = (".git", ".venv", "__pycache__", "_build", ".cache", "*.egg-info")
LEFT_OUT += ("auto_examples", "generated", ".pytest_cache", ".ruff_cache", "dist")

MODULE = '''"""Shift scaling: a per-class bias added to the logits (a recipe check)."""

from numbers import Real

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax
from sklearn.utils._param_validation import Interval

from ..base import BaseCalibrator

__all__ = ["ShiftScaling"]


class ShiftScaling(BaseCalibrator):
    """Add a fitted bias to each class's logit.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    alpha : float, default=1e-3
        Ridge penalty on the biases.

    Attributes
    ----------
    bias_ : ndarray of shape (n_classes,)
        The fitted biases.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.calibrators import ShiftScaling
    >>> X = np.zeros((4, 2))
    >>> ShiftScaling(alpha=0.0).fit(X, [0, 0, 0, 1]).predict_proba(X[:1]).round(2)
    array([[0.75, 0.25]])
    """

    _parameter_constraints = {
        **BaseCalibrator._parameter_constraints,
        "alpha": [Interval(Real, 0, None, closed="left")],  # CONSTRAINT
    }
    _shift_invariant = True  # FLAG
    _corrects_temperature = False  # EXEMPT

    def __init__(self, *, input="logits", classes=None, alpha=1e-3):
        self.input = input
        self.classes = classes
        self.alpha = alpha

    def n_free_parameters(self, n_classes, n_features=None):  # COUNT
        """One bias per class."""  # COUNT
        return n_classes  # COUNT

    def _fit(self, logits, y_index, sample_weight):
        w = sample_weight / sample_weight.sum()
        onehot = np.eye(logits.shape[1])[y_index]

        def loss(b):
            z = logits + b
            value = -np.sum(w * log_softmax(z, axis=1)[np.arange(len(z)), y_index])
            grad = ((softmax(z, axis=1) - onehot) * w[:, None]).sum(axis=0)
            return value + self.alpha * b @ b, grad + 2 * self.alpha * b

        x0 = np.zeros(logits.shape[1])
        self.bias_ = minimize(loss, x0, jac=True, method="L-BFGS-B").x

    def _calibrated_logits(self, logits):
        return logits + self.bias_
'''

TEST_MODULE = """import numpy as np

from skcal.calibrators import ShiftScaling


def test_biases_give_the_class_frequencies():
    X = np.zeros((8, 3))
    y = [0, 0, 0, 0, 1, 1, 1, 2]
    proba = ShiftScaling(alpha=0.0).fit(X, y).predict_proba(X[:1])
    np.testing.assert_allclose(proba[0], [0.5, 0.375, 0.125], atol=1e-4)
"""

#: the recipe's files: where each goes, and what it adds
EXPORT = ("skcal/calibrators/__init__.py", '    "ShiftScaling": "._shift_scaling",\n')
API_LINE = "   ShiftScaling\n"
CHANGELOG = "- New calibrator :class:`skcal.ShiftScaling`, a per-class bias.\n\n"

#: the checks the recipe's table names, by the piece whose omission they catch
LAYOUT = "tests/test_layout.py::"
CHECKS = {
    "test module": LAYOUT + "test_every_calibrator_module_has_its_test_module",
    "export": LAYOUT + "test_every_calibrator_class_is_exported",
    "api line": LAYOUT + "test_every_public_calibrator_is_in_the_api_reference",
    "changelog": LAYOUT + "test_every_calibrator_is_in_the_changelog",
    "COUNT": "tests/model_selection/test_search.py::"
    "test_every_calibrator_states_a_finite_parameter_count",
    "CONSTRAINT": "tests/test_common.py::test_every_parameter_has_a_constraint",
    "FLAG": "tests/test_promises.py::test_an_undeclared_shift_invariance_has_a_witness",
    "EXEMPT": "tests/calibrators/test_behaviour.py::"
    "test_lowers_nll_on_miscalibrated_scores",
}
#: the layout's checks, whole; the shared suites' share of the new class
WHOLE = (
    "tests/test_layout.py",
    "tests/model_selection/test_search.py::"
    "test_every_calibrator_states_a_finite_parameter_count",
    "tests/test_properties.py::test_every_estimator_is_covered",
)
ITS_SHARE = (
    "tests/test_common.py",
    "tests/test_promises.py",
    "tests/calibrators/test_behaviour.py",
    "tests/calibrators/test_shift_scaling.py",
)
NEW = "ShiftScaling or shift_scaling"


def _stated_file_count() -> int:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    words = {"four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
    match = re.search(r"A calibrator is (\w+) files", text)
    assert match, "CONTRIBUTING.md's recipe no longer states its file count"
    return words[match.group(1)]


def _copy(tmp: Path) -> Path:
    dest = tmp / "repo"
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(*LEFT_OUT))
    return dest


def _add(repo: Path, skip: str | None = None) -> list[str]:
    """The recipe's files written into ``repo`` (less ``skip``); returns the
    paths touched."""
    module = "".join(
        line + "\n"
        for line in MODULE.splitlines()
        if not (skip and skip.isupper() and line.endswith(f"# {skip}"))
    )
    touched = ["skcal/calibrators/_shift_scaling.py"]
    (repo / touched[0]).write_text(module)
    if skip != "test module":
        touched.append("tests/calibrators/test_shift_scaling.py")
        (repo / touched[-1]).write_text(TEST_MODULE)
    if skip != "export":
        init = repo / EXPORT[0]
        text = init.read_text()
        text = re.sub(r"(_MODULES = \{\n)", lambda m: m.group(1) + EXPORT[1], text)
        text = re.sub(r"(__all__ = \[\n)", r'\1    "ShiftScaling",\n', text, count=1)
        init.write_text(text)
        touched.append(EXPORT[0])
    if skip != "api line":
        api = repo / "doc/api.rst"
        api.write_text(
            re.sub(
                r"(\n   IdentityCalibrator\n)",
                r"\1" + API_LINE,
                api.read_text(),
                count=1,
            )
        )
        touched.append("doc/api.rst")
    if skip != "changelog":
        notes = repo / "doc/whats_new.rst"
        text = notes.read_text()
        first = re.search(r"\n~+\n\n", text)
        notes.write_text(text[: first.end()] + CHANGELOG + text[first.end() :])
        touched.append("doc/whats_new.rst")
    return touched


def _pytest(repo: Path, *targets: str, k: str | None = None):
    env = {**os.environ, "PYTHONPATH": str(repo)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"]
    cmd += ["-k", k] if k else []
    return subprocess.run(
        cmd + list(targets), cwd=repo, env=env, capture_output=True, text=True
    )


def test_the_recipe_with_every_file_passes_the_shared_checks(tmp_path):
    repo = _copy(tmp_path)
    touched = _add(repo)
    assert len(set(touched)) == _stated_file_count(), touched
    for run in (_pytest(repo, *WHOLE), _pytest(repo, *ITS_SHARE, k=NEW)):
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
        assert re.search(r"\d+ passed", run.stdout), run.stdout[-2000:]


@pytest.mark.parametrize("piece", sorted(CHECKS))
def test_each_forgotten_piece_fails_its_named_check(tmp_path, piece):
    repo = _copy(tmp_path)
    _add(repo, skip=piece)
    layout = CHECKS[piece].startswith(LAYOUT)
    run = _pytest(repo, CHECKS[piece], k=None if layout else NEW)
    assert run.returncode == 1 and "failed" in run.stdout, (
        f"forgetting the {piece} was not caught by {CHECKS[piece]}:\n"
        + run.stdout[-3000:]
    )
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert CHECKS[piece].rsplit("::", 1)[1] in text, (
        f"CONTRIBUTING.md's table does not name {CHECKS[piece]}"
    )
