"""Displays: the plotted data are the metric's numbers."""

import numpy as np
import pytest

from skcal.display import ESSProfileDisplay
from skcal.metrics import ess_profile
from skcal.utils._testing import sample_labels

plt = pytest.importorskip("matplotlib.pyplot")


def problem(seed=0, n=500):
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(n, 3))
    logits = np.column_stack([2 * features[:, 0], 2 * features[:, 1], np.zeros(n)])
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    return sample_labels(proba, rng), proba, features


def test_ess_profile_display_plots_the_metric_and_stacks_methods():
    y, proba, features = problem()
    kwargs = dict(space=None, bandwidth=0.7, n_quantiles=6)
    disp = ESSProfileDisplay.from_predictions(y, proba, features, name="raw", **kwargs)
    ref = ess_profile(y, proba, features, **kwargs)
    keep = ref.count > 0
    x, v = disp.line_.get_data()
    np.testing.assert_array_equal(x, ref.ess[keep])
    np.testing.assert_array_equal(v, ref.lce[keep])
    np.testing.assert_array_equal(disp.count, ref.count)
    sharp = proba**3 / (proba**3).sum(1, keepdims=True)
    second = ESSProfileDisplay.from_predictions(
        y, sharp, features, name="sharpened", ax=disp.ax_, **kwargs
    )
    assert second.ax_ is disp.ax_ and len(disp.ax_.lines) == 2
    labels = [t.get_text() for t in disp.ax_.get_legend().get_texts()]
    assert labels == ["raw", "sharpened"]
    assert disp.ax_.get_xscale() == "log"
    plt.close("all")


def test_from_estimator_uses_x_as_features_and_the_class_name():
    from sklearn.linear_model import LogisticRegression

    y, _, features = problem(seed=1)
    model = LogisticRegression().fit(features, y)
    disp = ESSProfileDisplay.from_estimator(
        model, features, y, space=None, bandwidth=0.7, n_quantiles=5
    )
    ref = ess_profile(
        y,
        model.predict_proba(features),
        features,
        space=None,
        bandwidth=0.7,
        n_quantiles=5,
    )
    np.testing.assert_array_equal(disp.lce, ref.lce)
    assert disp.line_.get_label() == "LogisticRegression"
    plt.close("all")
