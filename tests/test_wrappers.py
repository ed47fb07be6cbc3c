"""CalibratedClassifier and extract_embeddings against independent references."""

import pickle
import warnings
from inspect import signature

import numpy as np
import pytest
import sklearn
import torch
from scipy.special import softmax
from sklearn import config_context
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    StratifiedKFold,
    cross_val_predict,
)
from sklearn.naive_bayes import GaussianNB
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks
from sklearn.utils.fixes import parse_version

from skcal import (
    CalibratedClassifier,
    PlattCalibrator,
    ProCalCalibrator,
    TemperatureScaling,
    VectorScaling,
    VQLocalCalibrator,
)
from skcal.base import BaseLocalCalibrator
from skcal.discovery import all_estimators
from skcal.metrics import get_scorer
from skcal.utils._testing import make_estimator
from skcal.wrappers import extract_embeddings

TS = TemperatureScaling(device="cpu")
#: scikit-learn 1.8 added CalibratedClassifierCV(method="temperature"), and
#: grew the data of check_n_features_in_after_fitting to 5 rows per class (the
#: minimum-versions run of .ci/run has scikit-learn 1.6)
SKLEARN_1_8 = parse_version(sklearn.__version__).release >= (1, 8)


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(
        n_samples=1500,
        n_features=12,
        n_informative=8,
        n_classes=4,
        n_clusters_per_class=1,
        class_sep=0.8,
        random_state=0,
    )
    return X[:600], y[:600], X[600:1100], y[600:1100], X[1100:], y[1100:]


@pytest.fixture(scope="module")
def mlp(data):
    X_tr, y_tr = data[0], data[1]
    return MLPClassifier(
        hidden_layer_sizes=(16,), alpha=1e-6, max_iter=600, random_state=0
    ).fit(X_tr, y_tr)


# ------------------------------------------------------------- prefit models
def test_frozen_model_is_calibrated_on_its_decision_function(data):
    X_tr, y_tr, X_cal, y_cal, X_te, _ = data
    clf = LogisticRegression(C=100, max_iter=2000).fit(X_tr, y_tr)
    cc = CalibratedClassifier(FrozenEstimator(clf), calibrator=TS).fit(X_cal, y_cal)
    ref = clone(TS).fit(clf.decision_function(X_cal), y_cal)
    np.testing.assert_allclose(
        cc.predict_proba(X_te), ref.predict_proba(clf.decision_function(X_te)), 1e-12
    )
    assert cc.response_ == "decision_function"
    assert len(cc.calibrated_classifiers_) == 1
    assert cc.calibrated_classifiers_[0].estimator is not None
    # one pair: its calibrator is a documented attribute (issue 37)
    assert cc.calibrator_ is cc.calibrated_classifiers_[0].calibrator
    assert cc.calibrator_.temperature_ == ref.temperature_


@pytest.mark.skipif(not SKLEARN_1_8, reason="method='temperature' needs sklearn 1.8")
def test_the_default_calibrator_agrees_with_sklearns_temperature_scaling(data):
    X_tr, y_tr, X_cal, y_cal, X_te, _ = data
    clf = LogisticRegression(C=100, max_iter=2000).fit(X_tr, y_tr)
    # the default calibrator is temperature scaling; sklearn's agrees
    sk = CalibratedClassifierCV(FrozenEstimator(clf), method="temperature")
    sk.fit(X_cal, y_cal)
    default = CalibratedClassifier(FrozenEstimator(clf)).fit(X_cal, y_cal)
    np.testing.assert_allclose(
        default.predict_proba(X_te), sk.predict_proba(X_te), atol=1e-5
    )
    assert default.score(X_te, data[5]) > -10


def test_binary_decision_becomes_two_columns_and_platt_matches_sklearn(data):
    X_tr, y_tr, X_cal, y_cal, X_te, _ = data
    yb_tr, yb_cal = (y_tr >= 2).astype(int), (y_cal >= 2).astype(int)
    svc = LinearSVC(C=1.0).fit(X_tr, yb_tr)
    ours = CalibratedClassifier(FrozenEstimator(svc), calibrator=PlattCalibrator()).fit(
        X_cal, yb_cal
    )
    ref = CalibratedClassifierCV(FrozenEstimator(svc), method="sigmoid")
    ref.fit(X_cal, yb_cal)
    proba = ours.predict_proba(X_te)
    assert proba.shape == (len(X_te), 2)
    np.testing.assert_allclose(proba, ref.predict_proba(X_te), atol=1e-6)


def test_predict_proba_response_and_sample_weight(data):
    X_tr, y_tr, X_cal, y_cal, X_te, _ = data
    nb = GaussianNB().fit(X_tr, y_tr)
    w = np.random.default_rng(0).uniform(0.2, 3.0, len(y_cal))
    cc = CalibratedClassifier(FrozenEstimator(nb), calibrator=TS)
    cc.fit(X_cal, y_cal, sample_weight=w)
    assert cc.response_ == "predict_proba"
    ref = TemperatureScaling(device="cpu", input="proba").fit(
        nb.predict_proba(X_cal), y_cal, sample_weight=w
    )
    np.testing.assert_allclose(
        cc.predict_proba(X_te), ref.predict_proba(nb.predict_proba(X_te)), 1e-12
    )
    with pytest.raises(ValueError, match="no decision_function"):
        CalibratedClassifier(
            FrozenEstimator(nb), response_method="decision_function"
        ).fit(X_cal, y_cal)


def test_mlp_auto_response_is_its_exact_logits(data, mlp):
    _, _, X_cal, y_cal, X_te, _ = data
    cc = CalibratedClassifier(FrozenEstimator(mlp), calibrator=TS).fit(X_cal, y_cal)
    assert cc.response_ == "mlp_logits"
    e_cal, W, b = extract_embeddings(mlp, X_cal)
    ref = clone(TS).fit(e_cal @ W.T + b, y_cal)
    e_te = extract_embeddings(mlp, X_te)[0]
    np.testing.assert_allclose(
        cc.predict_proba(X_te), ref.predict_proba(e_te @ W.T + b), 1e-12
    )
    proba = CalibratedClassifier(
        FrozenEstimator(mlp), response_method="predict_proba", calibrator=TS
    ).fit(X_cal, y_cal)
    assert proba.response_ == "predict_proba"


def test_passthrough_is_the_classifier(data):
    X_tr, y_tr, X_cal, y_cal, X_te, _ = data
    clf = LogisticRegression(max_iter=2000).fit(X_tr, y_tr)
    cc = CalibratedClassifier(FrozenEstimator(clf), calibrator="passthrough")
    cc.fit(X_cal, y_cal)
    np.testing.assert_allclose(cc.predict_proba(X_te), clf.predict_proba(X_te), 1e-12)
    np.testing.assert_array_equal(cc.predict(X_te), clf.predict(X_te))


def test_frozen_with_unknown_labels_is_a_clear_error(data):
    X_tr, y_tr, X_cal, y_cal, _, _ = data
    clf = LogisticRegression(max_iter=2000).fit(X_tr[y_tr < 3], y_tr[y_tr < 3])
    with pytest.raises(ValueError, match=r"labels \[3\].*does not know"):
        CalibratedClassifier(FrozenEstimator(clf)).fit(X_cal, y_cal)


# ------------------------------------------------------------ cross-fitting
def test_ensemble_cross_fitting_equals_a_manual_loop(data):
    X_tr, y_tr, _, _, X_te, _ = data
    base = LogisticRegression(C=100, max_iter=2000)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    cc = CalibratedClassifier(base, calibrator=TS, cv=cv).fit(X_tr, y_tr)
    expected = []
    for train, test in cv.split(X_tr, y_tr):
        clf = clone(base).fit(X_tr[train], y_tr[train])
        ts = clone(TS).fit(clf.decision_function(X_tr[test]), y_tr[test])
        expected.append(ts.predict_proba(clf.decision_function(X_te)))
    assert len(cc.calibrated_classifiers_) == 3
    assert cc.calibrator_ is None  # one per fold
    np.testing.assert_allclose(cc.predict_proba(X_te), np.mean(expected, 0), 1e-12)
    # same result with folds fitted in parallel
    par = CalibratedClassifier(base, calibrator=TS, cv=cv, n_jobs=2).fit(X_tr, y_tr)
    np.testing.assert_allclose(par.predict_proba(X_te), cc.predict_proba(X_te), 1e-12)


def test_no_ensemble_uses_out_of_fold_scores_and_a_refit(data):
    X_tr, y_tr, _, _, X_te, _ = data
    base = LogisticRegression(C=100, max_iter=2000)
    cv = StratifiedKFold(4, shuffle=True, random_state=1)
    cc = CalibratedClassifier(base, calibrator=TS, cv=cv, ensemble=False)
    cc.fit(X_tr, y_tr)
    oof = cross_val_predict(base, X_tr, y_tr, cv=cv, method="decision_function")
    ts = clone(TS).fit(oof, y_tr)
    full = clone(base).fit(X_tr, y_tr)
    np.testing.assert_allclose(
        cc.predict_proba(X_te), ts.predict_proba(full.decision_function(X_te)), 1e-10
    )


def test_too_few_samples_per_class_for_the_folds():
    X = np.random.default_rng(0).normal(size=(30, 3))
    y = np.array([0] * 14 + [1] * 14 + [2] * 2)
    with pytest.raises(ValueError, match="3-fold.*at least 3 samples"):
        CalibratedClassifier(LogisticRegression(), cv=3).fit(X, y)


def test_string_labels_and_pandas_input(data):
    pd = pytest.importorskip("pandas")
    X_tr, y_tr, _, _, X_te, _ = data
    names = np.array(["ant", "bee", "cat", "dog"])
    frame = pd.DataFrame(X_tr, columns=[f"f{i}" for i in range(X_tr.shape[1])])
    cc = CalibratedClassifier(LogisticRegression(max_iter=2000), calibrator=TS, cv=3)
    cc.fit(frame, names[y_tr])
    np.testing.assert_array_equal(cc.classes_, names)
    assert list(cc.feature_names_in_) == list(frame.columns)
    pred = cc.predict(pd.DataFrame(X_te, columns=frame.columns))
    assert set(pred) <= set(names)


# ----------------------------------------------------------- fit parameters
class _RecordingClassifier(ClassifierMixin, BaseEstimator):
    """Logistic regression that records what its fit received."""

    def fit(self, X, y, sample_weight=None, eval_set=None, tag=None):
        self.fit_sample_weight_ = sample_weight
        self.fit_eval_set_ = eval_set
        self.fit_tag_ = tag
        self.model_ = LogisticRegression(max_iter=2000).fit(X, y, sample_weight)
        self.classes_ = self.model_.classes_
        return self

    def decision_function(self, X):
        return self.model_.decision_function(X)


def test_fit_params_reach_the_classifier_indexed_per_fold(data):
    X_tr, y_tr = data[0][:300], data[1][:300]
    tag = np.arange(300)
    eval_set = [(X_tr[:5], y_tr[:5])]
    cv = KFold(3)
    cc = CalibratedClassifier(_RecordingClassifier(), calibrator=TS, cv=cv)
    cc.fit(X_tr, y_tr, eval_set=eval_set, tag=tag)
    for pair, (train, _) in zip(cc.calibrated_classifiers_, cv.split(X_tr)):
        np.testing.assert_array_equal(pair.estimator.fit_tag_, train)
        assert pair.estimator.fit_eval_set_ is eval_set


def test_sample_weight_routing(data):
    X_tr, y_tr = data[0][:300], data[1][:300]
    w = np.random.default_rng(0).uniform(0.5, 2.0, 300)
    # without routing: passed to a fit that accepts it, used by the calibrator
    cc = CalibratedClassifier(_RecordingClassifier(), calibrator=TS, cv=KFold(3))
    cc.fit(X_tr, y_tr, sample_weight=w)
    for pair, (train, test) in zip(cc.calibrated_classifiers_, KFold(3).split(X_tr)):
        np.testing.assert_array_equal(pair.estimator.fit_sample_weight_, w[train])
        est = pair.estimator
        ref = clone(TS).fit(est.decision_function(X_tr[test]), y_tr[test], w[test])
        np.testing.assert_allclose(
            pair.calibrator.temperature_, ref.temperature_, rtol=1e-12
        )
    # with routing: only when the classifier requests it
    with config_context(enable_metadata_routing=True):
        plain = CalibratedClassifier(
            _RecordingClassifier().set_fit_request(sample_weight=False),
            calibrator=TS,
            cv=KFold(3),
        ).fit(X_tr, y_tr, sample_weight=w)
        assert plain.calibrated_classifiers_[0].estimator.fit_sample_weight_ is None
        asked = CalibratedClassifier(
            _RecordingClassifier().set_fit_request(sample_weight=True),
            calibrator=TS,
            cv=KFold(3),
        ).fit(X_tr, y_tr, sample_weight=w)
        first = asked.calibrated_classifiers_[0].estimator.fit_sample_weight_
        np.testing.assert_array_equal(first, w[next(KFold(3).split(X_tr))[0]])


# ---------------------------------------------------- Pipeline, GridSearchCV
def test_grid_search_over_the_calibrator_and_its_parameters(data):
    X_tr, y_tr, X_cal, y_cal, X_te, y_te = data
    model = make_pipeline(
        StandardScaler(), MLPClassifier((32,), alpha=1e-6, max_iter=800, random_state=0)
    ).fit(X_tr, y_tr)
    pipe = Pipeline([("calibrated", CalibratedClassifier(FrozenEstimator(model)))])
    grid = {
        "calibrated__calibrator": ["passthrough", TS, VectorScaling(device="cpu")],
    }
    scorer = get_scorer("neg_expected_calibration_error")
    search = GridSearchCV(pipe, grid, scoring=scorer, cv=3).fit(X_cal, y_cal)
    scores = dict(
        zip(
            map(str, search.cv_results_["param_calibrated__calibrator"]),
            search.cv_results_["mean_test_score"],
        )
    )
    # the over-fitted MLP is over-confident: any calibration beats none
    assert search.best_params_["calibrated__calibrator"] != "passthrough"
    assert scores["passthrough"] < max(scores.values())
    # the refitted best model is that configuration fitted directly
    best = CalibratedClassifier(
        FrozenEstimator(model), calibrator=search.best_params_["calibrated__calibrator"]
    ).fit(X_cal, y_cal)
    np.testing.assert_allclose(
        search.predict_proba(X_te), best.predict_proba(X_te), 1e-12
    )
    # a nested parameter of the calibrator
    search2 = GridSearchCV(
        CalibratedClassifier(
            FrozenEstimator(model), calibrator=VectorScaling(device="cpu")
        ),
        {"calibrator__reg_lambda": [0.0, 1e-2, 1.0]},
        cv=3,
    ).fit(X_cal, y_cal)
    assert search2.best_params_["calibrator__reg_lambda"] in (0.0, 1e-2, 1.0)
    # default scoring is the negative log loss, not accuracy
    manual = search2.best_estimator_.score(X_te, y_te)
    proba = search2.best_estimator_.predict_proba(X_te)
    nll = -np.mean(np.log(proba[np.arange(len(y_te)), y_te]))
    np.testing.assert_allclose(manual, -nll, rtol=1e-10)


# ------------------------------------------------------- local calibrators
def test_local_calibrator_on_a_frozen_mlp_equals_the_direct_fit(data, mlp):
    _, _, X_cal, y_cal, X_te, _ = data
    cc = CalibratedClassifier(
        FrozenEstimator(mlp), calibrator=ProCalCalibrator(device="cpu")
    ).fit(X_cal, y_cal)
    assert cc.response_ == "embeddings"
    e_cal, W, b = extract_embeddings(mlp, X_cal)
    ref = ProCalCalibrator(device="cpu", coef=W, intercept=b).fit(e_cal, y_cal)
    e_te = extract_embeddings(mlp, X_te)[0]
    np.testing.assert_allclose(cc.predict_proba(X_te), ref.predict_proba(e_te), 1e-12)
    # ProCal's predict is the head's argmax, kept through the wrapper
    np.testing.assert_array_equal(cc.predict(X_te), mlp.predict(X_te))


def test_vq_local_calibrator_just_works_with_an_unfitted_mlp(data):
    X_tr, y_tr, _, _, X_te, _ = data
    vq = VQLocalCalibrator(
        n_slots=4, n_codewords=8, max_iter=20, random_state=0, device="cpu"
    )
    mlp = MLPClassifier((16,), max_iter=300, random_state=0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cc = CalibratedClassifier(mlp, calibrator=vq, cv=2).fit(X_tr, y_tr)
    proba = cc.predict_proba(X_te)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert len(cc.calibrated_classifiers_) == 2
    with pytest.raises(ValueError, match="ensemble=False"):
        CalibratedClassifier(mlp, calibrator=vq, ensemble=False).fit(X_tr, y_tr)
    with pytest.raises(TypeError, match="cannot read them from RandomForest"):
        CalibratedClassifier(RandomForestClassifier(), calibrator=vq).fit(X_tr, y_tr)


def test_pickle_clone_and_input_untouched(data):
    X_tr, y_tr, X_cal, y_cal, X_te, _ = data
    clf = LogisticRegression(max_iter=2000).fit(X_tr, y_tr)
    X_copy = X_cal.copy()
    cc = CalibratedClassifier(FrozenEstimator(clf), calibrator=TS).fit(X_cal, y_cal)
    np.testing.assert_array_equal(X_cal, X_copy)
    again = pickle.loads(pickle.dumps(cc))
    np.testing.assert_array_equal(again.predict_proba(X_te), cc.predict_proba(X_te))
    fresh = clone(cc)
    assert not hasattr(fresh, "classes_")
    assert fresh.get_params()["calibrator"] is not cc.calibrator


# ---------------------------------------------------------------- score
def test_score_is_sklearns_negative_log_loss_with_weights(data):
    X_tr, y_tr, X_cal, y_cal, X_te, y_te = data
    names = np.array(["ant", "bee", "cat", "dog"])
    clf = LogisticRegression(max_iter=2000).fit(X_tr, names[y_tr])
    cc = CalibratedClassifier(FrozenEstimator(clf), calibrator=TS)
    cc.fit(X_cal, names[y_cal])
    proba = cc.predict_proba(X_te)
    # inside the range where scikit-learn does not clip
    assert proba[np.arange(len(y_te)), y_te].min() > np.finfo(np.float64).eps
    w = np.arange(len(y_te)) % 3
    for weights in (None, w):
        expected = -log_loss(
            names[y_te], proba, labels=cc.classes_, sample_weight=weights
        )
        assert cc.score(X_te, names[y_te], sample_weight=weights) == pytest.approx(
            expected, rel=1e-12
        )


def test_score_floors_a_zero_probability_like_every_skcal_score(data):
    X_tr, y_tr, X_cal, y_cal, X_te, y_te = data
    tree = DecisionTreeClassifier(random_state=0).fit(X_tr, y_tr)  # 0s and 1s
    cc = CalibratedClassifier(FrozenEstimator(tree), calibrator="passthrough")
    cc.fit(X_cal, y_cal)
    wrong = tree.predict(X_te) != y_te
    assert 0 < wrong.sum() < len(y_te)
    np.testing.assert_array_equal(cc.predict_proba(X_te).max(axis=1), 1.0)
    # a probability of 0 costs -log(2.2e-308) = 708.4, not scikit-learn's 36.0
    expected = np.log(np.finfo(np.float64).tiny) * wrong.mean()
    assert cc.score(X_te, y_te) == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------- wrapper protocol
@pytest.mark.parametrize("name, cls", all_estimators())
def test_every_calibrator_is_configured_by_the_wrapper(name, cls, data, mlp):
    X_tr, y_tr, X_cal, y_cal, _, _ = data
    template = make_estimator(cls, device="cpu")
    local = issubclass(cls, BaseLocalCalibrator)
    if local:
        cc = CalibratedClassifier(FrozenEstimator(mlp), calibrator=template)
    else:  # probabilities: "proba" is not the default input, so it shows
        clf = LogisticRegression(max_iter=2000).fit(X_tr, y_tr)
        cc = CalibratedClassifier(
            FrozenEstimator(clf), calibrator=template, response_method="predict_proba"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cc.fit(X_cal, y_cal)
    (pair,) = cc.calibrated_classifiers_
    params = pair.calibrator.get_params()
    np.testing.assert_array_equal(params["classes"], cc.classes_)
    if not local:
        assert params["input"] == "proba"
    elif "coef" in signature(cls).parameters:  # takes the head: gets the MLP's
        _, coef, intercept = extract_embeddings(mlp, X_cal)
        np.testing.assert_array_equal(params["coef"], coef)
        np.testing.assert_array_equal(params["intercept"], intercept)
    assert template.get_params()["classes"] is None  # the template is untouched


def test_the_classifiers_parameters_are_validated_by_its_own_fit(data):
    X_tr, y_tr = data[0], data[1]
    # validation of nested estimators is not skipped: without it, this
    # LogisticRegression fits silently, with coefficients of 1e156
    bad = CalibratedClassifier(LogisticRegression(C=-1.0), calibrator=TS, cv=2)
    with pytest.raises(ValueError, match="'C' parameter of LogisticRegression"):
        bad.fit(X_tr, y_tr)


# ------------------------------------------------------- extract_embeddings
def test_embeddings_of_mlps_and_pipelines(data, mlp):
    X_tr, y_tr, _, _, X_te, _ = data
    emb, W, b = extract_embeddings(FrozenEstimator(mlp), X_te)
    hidden = np.maximum(X_te @ mlp.coefs_[0] + mlp.intercepts_[0], 0)
    np.testing.assert_allclose(emb, hidden, 1e-12)
    np.testing.assert_allclose(softmax(emb @ W.T + b, 1), mlp.predict_proba(X_te), 1e-9)
    # binary MLP: a single logistic output becomes two symmetric columns
    yb = (y_tr >= 2).astype(int)
    mlp2 = MLPClassifier((8,), max_iter=400, random_state=0).fit(X_tr, yb)
    e2, W2, b2 = extract_embeddings(mlp2, X_te)
    assert W2.shape == (2, 8)
    np.testing.assert_allclose(
        softmax(e2 @ W2.T + b2, 1), mlp2.predict_proba(X_te), 1e-9
    )
    # a pipeline ending in a linear model: features after the scaler
    pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    pipe.fit(X_tr, y_tr)
    e3, W3, b3 = extract_embeddings(pipe, X_te)
    np.testing.assert_allclose(e3, pipe[0].transform(X_te), 1e-12)
    np.testing.assert_allclose(
        softmax(e3 @ W3.T + b3, 1), pipe.predict_proba(X_te), 1e-9
    )
    # binary linear model
    lr = LogisticRegression(max_iter=2000).fit(X_tr, yb)
    e4, W4, b4 = extract_embeddings(lr, X_te)
    np.testing.assert_allclose(softmax(e4 @ W4.T + b4, 1), lr.predict_proba(X_te), 1e-9)
    with pytest.raises(TypeError, match="got RandomForestClassifier"):
        extract_embeddings(RandomForestClassifier(n_estimators=2).fit(X_tr, y_tr), X_te)


def test_embeddings_of_a_torch_module():
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3)
    )
    net.train()
    X = np.random.default_rng(0).normal(size=(50, 5)).astype(np.float32)
    emb, W, b = extract_embeddings(net, X, batch_size=16)
    with torch.no_grad():
        hidden = net[:2](torch.from_numpy(X)).double().numpy()
        logits = net(torch.from_numpy(X)).double().numpy()
    np.testing.assert_allclose(emb, hidden, atol=1e-6)
    np.testing.assert_allclose(emb @ W.T + b, logits, atol=1e-5)
    assert net.training  # mode restored
    # one output unit: two symmetric columns
    binary = torch.nn.Sequential(torch.nn.Linear(5, 1, bias=False))
    e1, W1, b1 = extract_embeddings(binary, torch.from_numpy(X))
    np.testing.assert_allclose(e1, X, atol=1e-7)
    assert W1.shape == (2, 5) and np.all(b1 == 0)
    # the output is not the last Linear's output
    with pytest.raises(ValueError, match="differs from the output of its last"):
        extract_embeddings(
            torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Tanh()), X
        )
    with pytest.raises(ValueError, match="contains no nn.Linear"):
        extract_embeddings(torch.nn.Sequential(torch.nn.Tanh()), X)


# -------------------------------------------------- scikit-learn's checks
@parametrize_with_checks(
    [
        CalibratedClassifier(
            LogisticRegression(), calibrator=TemperatureScaling(device="cpu")
        )
    ],
    expected_failed_checks=lambda est: {
        name: (
            "The check fits 10 samples whose classes have fewer than 5 samples "
            "each; 5-fold cross-fitting refuses them with a ValueError that "
            "says so (tested in test_too_few_samples_per_class_for_the_folds)."
        )
        for name in ("check_fit2d_1feature",)
        + (() if SKLEARN_1_8 else ("check_n_features_in_after_fitting",))
    },
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_a_fitted_classifier_not_frozen_warns_that_it_is_refitted():
    """Forgetting FrozenEstimator: the fitted model is refitted on the folds
    (as scikit-learn does); skcal says so and how to keep it. An unfitted
    classifier and a frozen one give no such warning."""
    import warnings

    from sklearn.datasets import load_iris
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import LogisticRegression

    from skcal import CalibratedClassifier, TemperatureScaling

    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=500).fit(X, y)
    with pytest.warns(UserWarning, match=r"already fitted.*FrozenEstimator") as rec:
        CalibratedClassifier(model, calibrator=TemperatureScaling(), cv=3).fit(X, y)
    assert "refitted on 3 folds" in str(rec[0].message)
    for estimator in (LogisticRegression(max_iter=500), FrozenEstimator(model)):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", "CalibratedClassifier: the")
            CalibratedClassifier(estimator, calibrator=TemperatureScaling()).fit(X, y)
