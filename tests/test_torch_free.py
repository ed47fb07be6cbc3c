"""The calibrators and metrics that need no torch import none.

Each check runs in a fresh interpreter (the test process itself has torch
loaded by other tests): ``import skcal``, then a fit and every prediction
method, and ``"torch" not in sys.modules`` afterwards. A worker of
``GridSearchCV(n_jobs=2)`` over such a calibrator then pays for numpy,
scipy, scikit-learn and skcal, not for torch (the user guide's "Threads").
"""

import subprocess
import sys
import textwrap

import pytest

from skcal.discovery import all_estimators

NUMPY_ONLY = sorted(
    name for name, cls in all_estimators("score") if not cls._needs_torch
)
NEEDS_TORCH = sorted(name for name, cls in all_estimators() if cls._needs_torch)


def _run(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


def test_the_flag_splits_the_calibrators():
    # the ones the maintainers named, on each side of the flag
    assert {
        "HistogramBinningCalibrator",
        "IsotonicCalibrator",
        "CenteredIsotonicCalibrator",
        "ScalingBinningCalibrator",
        "BBQCalibrator",
        "ENIRCalibrator",
        "PlattCalibrator",
        "BetaCalibrator",
        "VennAbersCalibrator",
        "IdentityCalibrator",
    } <= set(NUMPY_ONLY)
    assert {"TemperatureScaling", "DirichletCalibrator", "KCalCalibrator"} <= set(
        NEEDS_TORCH
    )


@pytest.mark.parametrize("name", NUMPY_ONLY)
def test_a_numpy_only_calibrator_imports_no_torch(name):
    loaded = _run(
        f"""
        import sys
        import numpy as np
        import skcal
        from scipy.special import softmax
        from skcal.utils._testing import make_miscalibrated_logits

        X, y = make_miscalibrated_logits(300, 3, random_state=0)
        for inp, S in (("logits", X), ("proba", softmax(X, axis=1))):
            est = skcal.{name}(input=inp).fit(S, y)
            est.predict_proba(S), est.predict(S), est.predict_log_proba(S)
            est.decision_function(S), est.score(S, y)
        print("torch" in sys.modules, "skcal._torch.kernels" in sys.modules)
        """
    )
    assert loaded == ["False", "False"]


def test_the_numpy_metrics_import_no_torch():
    loaded = _run(
        """
        import sys
        import numpy as np
        from skcal import metrics

        rng = np.random.default_rng(0)
        P, y = rng.dirichlet(np.ones(3), 300), rng.integers(0, 3, 300)
        for f in (
            metrics.expected_calibration_error,
            metrics.classwise_calibration_error,
            metrics.max_calibration_error,
            metrics.negative_log_likelihood,
            metrics.brier_score,
            metrics.smooth_expected_calibration_error,
            metrics.cumulative_calibration_error,
            metrics.l2_calibration_error,
            metrics.maximum_mean_calibration_error,
        ):
            f(y, P)
        metrics.spiegelhalter_test(y, P)
        metrics.get_scorer("ece")
        print("torch" in sys.modules)
        """
    )
    assert loaded == ["False"]


def test_a_wrapped_numpy_only_calibrator_imports_no_torch():
    loaded = _run(
        """
        import sys
        from sklearn.datasets import make_classification
        from sklearn.linear_model import LogisticRegression
        import skcal

        X, y = make_classification(300, n_classes=3, n_informative=4, random_state=0)
        model = skcal.CalibratedClassifier(
            LogisticRegression(), calibrator=skcal.IsotonicCalibrator()
        ).fit(X, y)
        model.predict_proba(X)
        print("torch" in sys.modules)
        """
    )
    assert loaded == ["False"]


def test_a_torch_calibrator_still_fits_and_says_so():
    loaded = _run(
        """
        import sys
        import skcal
        from skcal.utils._testing import make_miscalibrated_logits

        X, y = make_miscalibrated_logits(300, 3, random_state=0)
        print("torch" in sys.modules)
        ts = skcal.TemperatureScaling().fit(X, y)
        print(ts.predict_proba(X).shape[0], "torch" in sys.modules)
        """
    )
    assert loaded == ["False", "300", "True"]


def test_the_methods_page_says_which_calibrators_need_torch():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "doc" / "methods.rst").read_text(
        encoding="utf-8"
    )
    section = text[text.index("What needs torch") :]
    numpy_part, torch_part = section.split("Need torch", 1)
    named = re.compile(r":class:`~skcal\.(\w+)`")
    assert sorted(set(named.findall(numpy_part)) - {"CalibratedClassifier"}) == (
        NUMPY_ONLY
    )
    assert sorted(set(named.findall(torch_part))) == NEEDS_TORCH
