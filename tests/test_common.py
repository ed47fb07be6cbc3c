"""scikit-learn's common estimator checks on every public skcal calibrator."""

from inspect import signature

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skcal import IdentityCalibrator, TemperatureScaling
from skcal.base import BaseCalibrator
from skcal.discovery import all_estimators
from skcal.model_selection import CalibratorSearchCV
from skcal.utils._testing import make_estimator

# Score calibrators read column j of X as the score of class j. sklearn's generic
# checks feed arbitrary feature matrices whose number of columns is unrelated to
# the number of classes in y; the checks below cannot hold for that contract.
COLUMNS_ARE_CLASSES = (
    "X must have one column per class: the check's X has fewer columns than y "
    "has classes, which a score calibrator rejects with a ValueError by design."
)
ONE_D_ADVICE = (
    "For 1-D scores a score calibrator gives its own advice "
    "(np.column_stack([-d, d]) for a binary decision function) instead of "
    "scikit-learn's 'Reshape your data ... reshape(-1, 1)', which would lead a "
    "binary user to a second error (tested in tests/test_base.py)."
)
EXPECTED_FAILED = {
    "check_fit2d_predict1d": ONE_D_ADVICE,
    "check_classifiers_train": COLUMNS_ARE_CLASSES,
    "check_classifiers_classes": COLUMNS_ARE_CLASSES,
    "check_fit2d_1feature": COLUMNS_ARE_CLASSES,
    "check_estimators_overwrite_params": COLUMNS_ARE_CLASSES,
    "check_estimators_fit_returns_self": COLUMNS_ARE_CLASSES,
    "check_readonly_memmap_input": COLUMNS_ARE_CLASSES,
    "check_decision_proba_consistency": COLUMNS_ARE_CLASSES,
}
# Each of these properties is tested on valid scores in tests/test_base.py.


def _estimators():
    # CalibratorSearchCV lives in skcal.model_selection, outside the calibrators
    # that all_estimators lists; it is checked here with two cheap candidates
    # and 2 folds (the checks fit it dozens of times on tiny data).
    search = CalibratorSearchCV(
        [IdentityCalibrator(), TemperatureScaling(device="cpu")], cv=2, random_state=0
    )
    return (
        [make_estimator(cls, device="cpu") for _, cls in all_estimators()]
        + [search]
        + _decision_estimators()
    )


def _decision_estimators():
    """skcal.decision's meta-estimators around a probabilistic classifier (the
    checks' X are features, not scores, and their tiny data leave no room
    for a wrapper's cross-fitting; tests/decision composes them with skcal's
    calibrators); the selective one with a 20% target, which the checks'
    easy data meet."""
    from sklearn.linear_model import LogisticRegression

    from skcal.decision import CostSensitiveClassifier, SelectiveClassifier

    return [
        SelectiveClassifier(LogisticRegression(), target_risk=0.2, random_state=0),
        CostSensitiveClassifier(LogisticRegression()),
    ]


CV_SPLITS_ROWS = (
    "Cross-validation splits rows: a row repeated k times can land in several "
    "folds while a row of weight k lands in one, so weights and repetitions "
    "select (slightly) different regularisation."
)


STOCHASTIC_TRAINING = (
    "Trained by mini-batch Adam on a random train/validation split: a row "
    "repeated k times changes the split and the batches, a weighted row does "
    "not, so the two fits differ."
)
FLOAT32_TRAINING = (
    "Each epoch runs in float32: weighting and repeating rows sum in a "
    "different order, and Adam on the kinked SoftECE objective amplifies the "
    "~1e-7 rounding differences (~1e-4 after 40 epochs, 1e-2 after 60; the "
    "check asks for 1e-7). tests/calibrators/test_smart.py checks the "
    "equivalence over 20 epochs, at 1e-5 in the probabilities."
)
KNN_ON_ROWS = (
    "Proximity is the distance to the nearest calibration rows: a row repeated "
    "k times is its own neighbour at distance 0, a weighted row is not."
)
SPLINE_ON_RANKS = (
    "The spline is fitted by least squares to the cumulative residual at each "
    "sample's rank: a row repeated k times adds k points along its step of the "
    "curve, a row of weight k one point of weight k, so the fits differ slightly "
    "(tests/calibrators/test_spline.py checks zero weights and weight scaling)."
)
RELATIVE_WEIGHTS = (
    "Weights are relative (multiplying them all by a constant changes nothing, "
    "a guarantee tested in tests/test_properties.py), so the default ridge "
    "C / n uses Kish's effective sample size (sum w)^2 / sum w^2: a row "
    "repeated k times adds k to n, a row of weight k adds less, and the two "
    "fits differ by the ridge. With a fixed reg_lambda they agree (tested in "
    "tests/calibrators/test_scaling.py)."
)
EFFECTIVE_COUNTS = (
    "Platt's smoothed targets (N+ + 1) / (N+ + 2) count the positives with "
    "Kish's effective sample size, so that only the ratios of the weights "
    "matter: a row repeated k times adds k to N+, a row of weight k less "
    "(tests/calibrators/test_platt.py checks the targets and weight scaling)."
)
WEIGHTS_ARE_NOT_REPETITIONS = {
    "PlattCalibrator": EFFECTIVE_COUNTS,
    "VectorScaling": RELATIVE_WEIGHTS,
    "DirichletCalibrator": RELATIVE_WEIGHTS,
    "MatrixScaling": RELATIVE_WEIGHTS,
    "StructuredMatrixScaling": RELATIVE_WEIGHTS,
    "StructuredVectorScaling": RELATIVE_WEIGHTS,
    "DirichletCalibratorCV": CV_SPLITS_ROWS,
    "SMARTCalibrator": FLOAT32_TRAINING,
    "KCalCalibrator": STOCHASTIC_TRAINING,
    "LocalNetCalibrator": STOCHASTIC_TRAINING,
    "VQLocalCalibrator": STOCHASTIC_TRAINING,
    "ProCalCalibrator": KNN_ON_ROWS,
    "SplineCalibrator": SPLINE_ON_RANKS,
    "ENIRCalibrator": (
        "The BIC of its models counts Kish's effective sample size, so that "
        "only the ratios of the weights matter: a row repeated k times adds k "
        "to N, a row of weight k less (tests/calibrators/test_bayesian_binning.py "
        "checks zero weights and weight scaling)."
    ),
}

# ProCal fits the densities of the confidences of the correct and of the wrong
# predictions; on the checks' data the head makes (almost) no mistake.
NO_WRONG_PREDICTION = (
    "On the check's data (separable blobs, or 10 samples) the fitted head makes "
    "fewer than 2 mistakes, and ProCal needs at least 2 wrong predictions to "
    "estimate their density (a ValueError by design; tested in "
    "tests/calibrators/test_procal.py)."
)
PROCAL_FAILED = {
    name: NO_WRONG_PREDICTION
    for name in (
        "check_estimators_overwrite_params",
        "check_estimators_fit_returns_self",
        "check_readonly_memmap_input",
        "check_sample_weights_shape",
        "check_sample_weights_not_overwritten",
        "check_pipeline_consistency",
        "check_estimators_pickle",
        "check_classifiers_classes",
        "check_fit2d_1feature",
    )
}
PROCAL_FAILED["check_classifiers_train"] = (
    "ProCal's predict returns the head's argmax (the class whose confidence it "
    "calibrates), which the rescaled probabilities need not rank first; the check "
    "asks for predict == argmax(predict_proba)."
)


ABSTAINS = (
    "predict returns abstain_label on the rows whose confidence is below the "
    "threshold, where the check asks for argmax(predict_proba) (the abstention "
    "is tested in tests/decision/test_selective_classifier.py)."
)
SELECTIVE_FAILED = {
    "check_classifiers_train": ABSTAINS,
    "check_classifiers_train(readonly_memmap=True)": ABSTAINS,
    "check_classifiers_train(readonly_memmap=True,X_dtype=float32)": ABSTAINS,
    "check_classifiers_classes": (
        "The check's string labels with the default abstain_label=-1 are "
        "refused by design: predictions would mix strings and numbers "
        "(tested in tests/decision/test_selective_classifier.py)."
    ),
    "check_sample_weight_equivalence_on_dense_data": (
        "The threshold rows count once each, whatever their weight (the "
        "binomial bound counts rows), and the split puts a repeated row in "
        "either part: weights are not repetitions."
    ),
}


def _expected_failed_checks(estimator):
    name = type(estimator).__name__
    failed = dict(EXPECTED_FAILED) if isinstance(estimator, BaseCalibrator) else {}
    if name == "SelectiveClassifier":
        failed.update(SELECTIVE_FAILED)
    if name == "ProCalCalibrator":
        failed.update(PROCAL_FAILED)
    reason = WEIGHTS_ARE_NOT_REPETITIONS.get(name)
    if reason:
        failed["check_sample_weight_equivalence_on_dense_data"] = reason
    return failed


def test_all_estimators_found():
    names = {name for name, _ in all_estimators()}
    assert {
        "TemperatureScaling",
        "VectorScaling",
        "MatrixScaling",
        "DirichletCalibrator",
        "DirichletCalibratorCV",
        "StructuredMatrixScaling",
        "ClassTemperatureScaling",
        "ParameterizedTemperatureScaling",
        "SMARTCalibrator",
        "KCalCalibrator",
        "LocalNetCalibrator",
        "ProCalCalibrator",
        "VQLocalCalibrator",
        "IsotonicCalibrator",
        "HistogramBinningCalibrator",
        "PlattCalibrator",
        "BetaCalibrator",
        "SplineCalibrator",
    } <= names
    decision = {name for name, _ in all_estimators("decision")}
    checked = {type(e).__name__ for e in _decision_estimators()}
    assert decision == checked == {"CostSensitiveClassifier", "SelectiveClassifier"}


# an expected failure that passes is an error (scikit-learn >= 1.8 offers it;
# the minimum-versions run of .ci/run has scikit-learn 1.6)
STRICT = (
    {"xfail_strict": True}
    if "xfail_strict" in signature(parametrize_with_checks).parameters
    else {}
)


@parametrize_with_checks(
    _estimators(), expected_failed_checks=_expected_failed_checks, **STRICT
)
# scikit-learn's checks fit on tiny or separable data, where skcal warns by
# design (no temperature maximises the likelihood, a class has no calibration
# row, KCal's bandwidth search hits an end or its memory is small); each
# warning has its own test, so here they are noise
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings("ignore::skcal.exceptions.MissingClassWarning")
@pytest.mark.filterwarnings("ignore::skcal.exceptions.GridEdgeWarning")
@pytest.mark.filterwarnings(
    "ignore:KCalCalibrator predicts from the kernel neighbours:UserWarning"
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize("name, cls", all_estimators())
def test_docstring_has_example(name, cls):
    assert "Examples" in (cls.__doc__ or ""), f"{name} needs a doctest example"


# ------------------------------------------------ parameters and constraints
def _public_estimators():
    """The checked estimators plus the public meta-estimators outside them."""
    from sklearn.linear_model import LogisticRegression

    from skcal import CalibratedClassifier
    from skcal.shift import PriorShiftAdapter

    extra = [
        CalibratedClassifier(LogisticRegression(), calibrator=TemperatureScaling()),
        PriorShiftAdapter(),
    ]
    return _estimators() + extra


@pytest.mark.parametrize(
    "estimator", _public_estimators(), ids=lambda e: type(e).__name__
)
def test_every_parameter_has_a_constraint(estimator):
    """Step 1 of CONTRIBUTING.md's recipe: ``_parameter_constraints`` names
    exactly the parameters of ``__init__`` (scikit-learn validates only the
    named ones: a forgotten entry lets any value through)."""
    params = set(estimator.get_params(deep=False))
    constrained = set(getattr(estimator, "_parameter_constraints", {}))
    assert params == constrained, (
        f"{type(estimator).__name__}: parameters without a constraint "
        f"{sorted(params - constrained)}, constraints without a parameter "
        f"{sorted(constrained - params)}"
    )


@pytest.mark.parametrize(
    "estimator", _public_estimators(), ids=lambda e: type(e).__name__
)
def test_param_validation(estimator):
    """scikit-learn's ``check_param_validation``, called as scikit-learn's own
    test suite calls it: ``parametrize_with_checks`` does not run it."""
    import warnings

    from sklearn.utils.estimator_checks import check_param_validation

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check_param_validation(type(estimator).__name__, estimator)
