"""A model of the user's own subclass (issue 37, item 9): ``skcal apply
--trust`` of a type whose module cannot be imported is one clear line, not a
traceback; with the module importable the model applies as in Python."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.linear_model import LogisticRegression

pytest.importorskip("skops.io")

from skcal import TemperatureScaling  # noqa: E402
from skcal.utils.persistence import dump, load  # noqa: E402

#: a module name no other test imports
MODULE = "skcal_user_subclass_issue37"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A user's module defining ``MyTS(TemperatureScaling)``, the subclass
    fitted on a logistic regression's logits of wine and saved with skops,
    and a file of other logits to apply it to."""
    tmp = tmp_path_factory.mktemp("trust")
    (tmp / "user").mkdir()
    (tmp / "user" / f"{MODULE}.py").write_text(
        textwrap.dedent(
            """
            from skcal import TemperatureScaling

            class MyTS(TemperatureScaling):
                '''A user's own calibrator.'''
            """
        )
    )
    X, y = load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    logits = LogisticRegression(C=0.05, max_iter=300).fit(X[::2], y[::2])
    logits = logits.decision_function(X[1::2])
    sys.path.insert(0, str(tmp / "user"))
    try:
        module = __import__(MODULE)
        model = module.MyTS(device="cpu").fit(logits[::2], y[1::2][::2])
    finally:
        sys.path.remove(str(tmp / "user"))
    dump(model, tmp / "my.skops")
    np.savez(tmp / "new.npz", logits=logits[1::2])
    return tmp, model, logits[1::2]


def _apply(tmp, pythonpath=None, trust=True):
    """``skcal apply --trust MODULE.MyTS``, run from a folder without it."""
    (tmp / "elsewhere").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    argv = ["apply", "--model", tmp / "my.skops", "--apply", tmp / "new.npz"]
    argv += ["--out", tmp / "out.npz"] + ["--trust", f"{MODULE}.MyTS"] * trust
    return subprocess.run(
        [sys.executable, "-m", "skcal", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp / "elsewhere",
        env=env,
    )


def test_a_subclass_whose_module_is_not_importable_is_one_line(saved):
    tmp, _, _ = saved
    proc = _apply(tmp)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        f"skcal apply: error: --model {tmp / 'my.skops'} holds {MODULE}.MyTS, "
        f"which cannot be imported here (ModuleNotFoundError: No module named "
        f"'{MODULE}')"
    )
    assert "PYTHONPATH" in lines[0]
    assert not (tmp / "out.npz").exists()


def test_without_trust_the_error_says_the_module_is_missing_too(saved):
    tmp, _, _ = saved
    proc = _apply(tmp, trust=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert f"pass them explicitly: --trust {MODULE}.MyTS." in lines[0]
    assert f"The module(s) {MODULE} of these types cannot be imported" in lines[0]
    assert "PYTHONPATH" in lines[0]


def test_with_its_module_importable_the_subclass_applies(saved):
    tmp, model, logits = saved
    proc = _apply(tmp, pythonpath=tmp / "user")
    assert proc.returncode == 0, proc.stderr
    with np.load(tmp / "out.npz") as out:
        np.testing.assert_array_equal(out["proba"], model.predict_proba(logits))


def _foreign(module: str, name: str = "Foreign"):
    """A fitted subclass that claims to live in ``module`` (as a class made
    in a script, or in a module since removed, would)."""
    cls = type(name, (TemperatureScaling,), {"__module__": module})
    X, y = load_wine(return_X_y=True)
    return cls(device="cpu").fit(X[:, :3] / 100.0, y)


@pytest.mark.parametrize(
    "module, match",
    [
        ("skcal_no_such_module_issue37", "No module named .*PYTHONPATH"),
        ("__main__", "defined in a script or notebook \\(__main__\\)"),
        ("skcal.calibrators", "has no attribute 'Foreign'.*still defines it"),
    ],
)
def test_load_names_the_type_and_the_fix(tmp_path, module, match):
    path = tmp_path / "m.skops"
    dump(_foreign(module), path)
    with pytest.raises(ImportError, match=match) as info:
        load(path, trusted=[f"{module}.Foreign"])
    assert f"holds {module}.Foreign, which cannot be imported here" in str(info.value)
