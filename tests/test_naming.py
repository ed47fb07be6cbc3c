"""One naming scheme (user guide, "Parameter names"), checked everywhere."""

import inspect
import warnings

import numpy as np
import pytest

import skcal
import skcal.llm
import skcal.metrics
import skcal.wrappers
from skcal.cli import build_parser
from skcal.discovery import all_estimators

#: names the scheme replaced, with the name to use instead
RETIRED = {
    "max_epochs": "max_iter",
    "patience": "n_iter_no_change",
    "hidden_sizes": "hidden_layer_sizes",
    "hidden_size": "hidden_layer_sizes",
    "l2_reg": "reg_lambda",
    "off_diagonal_reg": "reg_off_diagonal",
    "lambda_intercept": "reg_intercept",
    "lambda_diagonal": "reg_diagonal",
    "lambda_off_diagonal": "reg_off_diagonal",
    "reg": "reg_lambda",
    "n_folds": "cv",
}

ESTIMATORS = [*all_estimators(), ("CalibratorSearchCV", skcal.CalibratorSearchCV)]


def _public_functions():
    for module in (skcal.metrics, skcal.llm):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                yield name, obj
    yield "extract_embeddings", skcal.wrappers.extract_embeddings


@pytest.mark.parametrize("name, cls", ESTIMATORS, ids=[n for n, _ in ESTIMATORS])
def test_estimator_parameters_follow_the_scheme(name, cls):
    params = inspect.signature(cls.__init__).parameters
    assert not set(params) & set(RETIRED), name
    if "device" in params:
        assert params["device"].default == "auto", name
    # every iteration limit is max_iter (max_time, the search's time budget in
    # seconds, is not one), and early stopping has sklearn's names
    limits = [p for p in params if p.startswith("max_")]
    assert not set(limits) - {"max_iter", "max_time"}, name
    if "validation_fraction" in params:
        assert "n_iter_no_change" in params, name
    # fitted counts: n_iter_ (never n_epochs_)
    assert "n_epochs_" not in (cls.__doc__ or ""), name


def test_every_trained_estimator_reports_n_iter():
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    from skcal.utils._testing import make_estimator

    X, y = make_classification(300, 6, n_informative=4, n_classes=3, random_state=0)
    head = LogisticRegression(max_iter=500).fit(X, y)
    checked = []
    for name, cls in all_estimators():
        params = inspect.signature(cls.__init__).parameters
        if "n_iter_no_change" not in params:
            continue
        est = make_estimator(cls, device="cpu", max_iter=2, random_state=0)
        if "coef" in params:  # local: the embeddings and the head
            est.set_params(coef=head.coef_, intercept=head.intercept_)
        inputs = X if "input" not in params else head.decision_function(X)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(inputs, y)
        n_iter = np.atleast_1d(est.n_iter_)
        assert np.all((0 <= n_iter) & (n_iter <= 2)), name
        assert np.all(np.atleast_1d(est.best_iter_) <= n_iter), name
        checked.append(name)
    assert len(checked) == 5, checked  # KCal, Local Nets, PTS, SMART, VQ


@pytest.mark.parametrize("name, func", list(_public_functions()))
def test_metric_parameters_follow_the_scheme(name, func):
    params = inspect.signature(func).parameters
    assert not set(params) & set(RETIRED), name
    if "device" in params:
        assert params["device"].default == "auto", name


def test_command_line_device_defaults_to_auto():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    seen = 0
    for command, sub_parser in sub.choices.items():
        for action in sub_parser._actions:
            if action.dest == "device" and action.default is not None:
                assert action.default == "auto", command
                seen += 1
    assert seen >= 3  # calibrate, evaluate/select and demo at least


def test_local_nets_take_several_hidden_layers():
    from skcal.utils._testing import make_region_miscalibrated_embeddings

    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        300, 3, n_features=8, random_state=0
    )
    net = skcal.LocalNetCalibrator(
        coef=coef,
        intercept=intercept,
        hidden_layer_sizes=(8, 4),
        max_iter=2,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    assert net.network_["W1"].shape == (8, 8)
    assert net.network_["W2"].shape == (8, 4)
    assert net.network_["Wc"].shape == (4, 3)
    assert "W3" not in net.network_
    proba = net.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    for bad in [(0,), (8, -1), (2.5,), "wide"]:
        with pytest.raises(ValueError, match="hidden_layer_sizes"):
            skcal.LocalNetCalibrator(
                coef=coef, intercept=intercept, hidden_layer_sizes=bad, device="cpu"
            ).fit(X, y)
