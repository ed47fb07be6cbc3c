"""scikit-learn's common estimator checks on every public skcal calibrator."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skcal.utils.discovery import all_estimators

# Score calibrators read column j of X as the score of class j. sklearn's generic
# checks feed arbitrary feature matrices whose number of columns is unrelated to
# the number of classes in y; the checks below cannot hold for that contract.
COLUMNS_ARE_CLASSES = (
    "X must have one column per class: the check's X has fewer columns than y "
    "has classes, which a score calibrator rejects with a ValueError by design."
)
EXPECTED_FAILED = {
    "check_classifiers_train": COLUMNS_ARE_CLASSES,
    "check_classifiers_classes": COLUMNS_ARE_CLASSES,
    "check_supervised_y_2d": COLUMNS_ARE_CLASSES,
    "check_fit2d_1feature": COLUMNS_ARE_CLASSES,
    "check_estimators_overwrite_params": COLUMNS_ARE_CLASSES,
    "check_estimators_fit_returns_self": COLUMNS_ARE_CLASSES,
    "check_readonly_memmap_input": COLUMNS_ARE_CLASSES,
    "check_decision_proba_consistency": COLUMNS_ARE_CLASSES,
}
# Each of these properties is tested on valid scores in tests/test_base.py.


def _estimators():
    return [cls(device="cpu") for _, cls in all_estimators()]


def _expected_failed_checks(estimator):
    return EXPECTED_FAILED


def test_all_estimators_found():
    names = {name for name, _ in all_estimators()}
    assert {"TemperatureScaling", "VectorScaling", "MatrixScaling"} <= names


@parametrize_with_checks(
    _estimators(), expected_failed_checks=_expected_failed_checks, xfail_strict=True
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize("name, cls", all_estimators())
def test_docstring_has_example(name, cls):
    assert "Examples" in (cls.__doc__ or ""), f"{name} needs a doctest example"
