"""CalibrationMonitor: the e-process against hand-computed bets, its
martingale property checked exactly, its false-alarm rate, detection and
verdicts, merging, persistence and errors."""

import json
import warnings

import numpy as np
import pytest

from skcal.monitor import CalibrationMonitor

SHRINK = 20.0  # the plug-in estimates' pseudo-rows, as documented


def _softmax(z):
    z = np.exp(z - z.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def _draw(rng, p):
    return np.minimum(
        (rng.random((len(p), 1)) > p.cumsum(axis=1)).sum(axis=1), p.shape[1] - 1
    )


def _batch(rng, n, k=4, scale=2.0):
    logits = rng.normal(size=(n, k)) * scale
    return logits, _softmax(logits)


def test_first_batch_matches_hand_computed_bets():
    # two rows, two classes, one temperature, one bin: every bet by hand
    p = np.array([[0.8, 0.2], [0.4, 0.6]])
    y = np.array([0, 0])
    m = CalibrationMonitor(alpha=0.1, temperatures=(2.0,), n_bins=1)
    m.update(y, p)
    # temperature 2: q = sqrt(p) normalised
    q = np.sqrt(p) / np.sqrt(p).sum(axis=1, keepdims=True)
    w_t = (q[0, 0] / 0.8) * (q[1, 0] / 0.4)
    # prior: w = (0 + 20) / (0 + 20) = 1 for the first batch -> factor 1
    w_prior = 1.0
    # confidence: ratio (0 + 20) / (0 + 20) = 1, q_top = conf -> factor 1
    w_conf = 1.0
    assert m.e_value_ == pytest.approx((w_t + w_prior + w_conf) / 3, rel=1e-12)
    # second batch: the plug-ins now use the first batch's statistics
    p2 = np.array([[0.3, 0.7]])
    m.update(np.array([1]), p2)
    w = np.array([2 + SHRINK, 0 + SHRINK]) / (p.sum(axis=0) + SHRINK)
    w_prior2 = w[1] / (p2[0] @ w)
    ratio = (1 + SHRINK) / (0.8 + 0.6 + SHRINK)  # one bin: 1 hit of confidences .8, .6
    q_top = np.clip(0.7 * ratio, 0.35, 0.85)
    w_conf2 = q_top / 0.7
    q2 = np.sqrt(p2) / np.sqrt(p2).sum()
    w_t2 = w_t * q2[0, 1] / 0.7
    expected = (w_t2 + w_prior * w_prior2 + w_conf * w_conf2) / 3
    assert m.e_value_ == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("grouped", [False, True])
def test_the_e_value_is_a_martingale_under_calibration(grouped):
    # after some history, the expected e-value of one more row, its label
    # drawn from its own predicted distribution, equals the current one
    rng = np.random.default_rng(3)
    m = CalibrationMonitor(max_groups=3)
    for _ in range(5):
        _, p = _batch(rng, 50)
        g = rng.integers(0, 2, 50) if grouped else None
        m.update(_draw(rng, _softmax(np.log(p) * 1.3)), p, groups=g)  # drifted history
    _, p_row = _batch(rng, 1)
    expected = 0.0
    for label in range(4):
        trial = CalibrationMonitor.from_dict(json.loads(json.dumps(m.to_dict())))
        trial.update(
            np.array([label]), p_row, groups=np.array([1]) if grouped else None
        )
        expected += p_row[0, label] * trial.e_value_
    assert expected == pytest.approx(m.e_value_, rel=1e-10)


def test_false_alarms_stay_under_alpha():
    # labels drawn from the predictions: calibrated by construction;
    # 200 monitors x 40 looks of 50 rows (the benchmark runs 10,000 looks)
    rng = np.random.default_rng(0)
    alarms = 0
    for _ in range(200):
        m = CalibrationMonitor(alpha=0.1, temperatures=(0.8, 1.25))
        for _ in range(40):
            _, p = _batch(rng, 50)
            m.update(_draw(rng, p), p)
            if m.alarm_:
                alarms += 1
                break
    rate = alarms / 200
    assert rate <= 0.1 + 3 * np.sqrt(0.1 * 0.9 / 200)


@pytest.mark.parametrize(
    "shift, family",
    [("temperature", "temperature"), ("prior", "prior"), ("ranking", "confidence")],
)
def test_detects_each_shift_and_names_it(shift, family):
    rng = np.random.default_rng(1)
    m = CalibrationMonitor(alpha=0.01)
    for _ in range(20):  # alarm within 1-2 looks; the verdict settles after 3-4
        logits, p = _batch(rng, 200)
        if shift == "temperature":
            truth = _softmax(logits / 1.5)
        elif shift == "prior":
            truth = p * np.array([2.0, 1.0, 1.0, 0.5])
            truth /= truth.sum(axis=1, keepdims=True)
        else:  # the top two classes swap in 30% of the rows
            order = np.argsort(-p, axis=1)
            rows = np.arange(len(p))
            truth = p.copy()
            swap = rng.random(len(p)) < 0.3
            a, b = order[swap, 0], order[swap, 1]
            truth[rows[swap], a], truth[rows[swap], b] = (
                p[rows[swap], b],
                p[rows[swap], a],
            )
        m.update(_draw(rng, truth), p)
    verdict = m.verdict()
    assert verdict.alarm and verdict.family == family
    if family == "temperature":
        assert verdict.temperature == 1.5
        assert "refit the temperature" in verdict.message


def test_a_drifting_group_is_named():
    rng = np.random.default_rng(2)
    m = CalibrationMonitor(alpha=0.01, max_groups=10)
    for _ in range(60):
        logits, p = _batch(rng, 300)
        groups = rng.choice(np.array(["a", "b", "c"]), 300)
        truth = np.where((groups == "b")[:, None], _softmax(logits / 1.6), p)
        m.update(_draw(rng, truth), p, groups=groups)
        if m.alarm_:
            break
    v = m.verdict()
    assert v.alarm and v.group == "b" and "group 'b'" in v.message


def test_merge_multiplies_the_fixed_bets_and_adds_the_statistics():
    rng = np.random.default_rng(4)
    batches = [(_draw(rng, p), p) for _, p in (_batch(rng, 40) for _ in range(6))]
    whole, left, right = (
        CalibrationMonitor(),
        CalibrationMonitor(),
        CalibrationMonitor(),
    )
    for i, (y, p) in enumerate(batches):
        whole.update(y, p)
        (left if i % 2 else right).update(y, p)
    merged = left.merge(right)
    a, b = whole.to_dict()["groups"][0][1], merged.to_dict()["groups"][0][1]
    # the temperature family's bets do not depend on the order of the rows
    np.testing.assert_allclose(a["log_wealth_t"], b["log_wealth_t"], rtol=1e-12)
    for key in ("label_counts", "proba_sums", "bin_correct", "bin_confidence"):
        np.testing.assert_allclose(a[key], b[key], rtol=1e-12)
    assert merged.n_looks_ == 6 and merged.n_rows_ == 240


def test_saved_state_continues_as_if_uninterrupted(tmp_path):
    rng = np.random.default_rng(5)
    batches = [(_draw(rng, p), p) for _, p in (_batch(rng, 30) for _ in range(4))]
    straight = CalibrationMonitor(alpha=0.2)
    for y, p in batches:
        straight.update(y, p)
    first = CalibrationMonitor(alpha=0.2)
    for y, p in batches[:2]:
        first.update(y, p)
    first.save(tmp_path / "state.json")
    second = CalibrationMonitor.load(tmp_path / "state.json")
    for y, p in batches[2:]:
        second.update(y, p)
    assert second.e_value_ == pytest.approx(straight.e_value_, rel=1e-12)
    assert second.n_looks_ == 4


def test_bad_input_is_refused_clearly():
    p = np.array([[0.5, 0.5], [0.9, 0.1]])
    m = CalibrationMonitor()
    m.update([0, 1], p)
    with pytest.raises(ValueError, match="same classes"):
        m.update([0], np.array([[0.2, 0.3, 0.5]]))
    with pytest.raises(ValueError, match="at every update or at none"):
        m.update([0, 1], p, groups=["a", "b"])
    g = CalibrationMonitor(max_groups=1)
    with pytest.raises(ValueError, match="max_groups=1"):
        g.update([0, 1], p, groups=["a", "b"])
    with pytest.raises(ValueError, match="one entry per row"):
        CalibrationMonitor().update([0, 1], p, groups=["a"])
    with pytest.raises(ValueError, match="alpha"):
        CalibrationMonitor(alpha=1.5)
    with pytest.raises(ValueError, match="positive"):
        CalibrationMonitor(temperatures=(1.5, -1.0))
    with pytest.raises(ValueError, match="different settings"):
        CalibrationMonitor(alpha=0.1).merge(CalibrationMonitor(alpha=0.2))
    before = p.copy()
    CalibrationMonitor().update([0, 1], p)
    np.testing.assert_array_equal(p, before)


def _log_softmax(z):
    # written out here, independently of the monitor's blocked computation
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


@pytest.mark.parametrize("n_rows", [7, 2_000])  # 2,000 rows: the grid in blocks
def test_temperature_wealth_matches_the_formula_for_every_grid_point(n_rows):
    rng = np.random.default_rng(6)
    temperatures = (0.5, 0.67, 0.8, 0.9, 1.1, 1.25, 1.5, 2.0)
    m = CalibrationMonitor(temperatures=temperatures)
    expected = np.zeros(len(temperatures))
    for _ in range(2):
        _, p = _batch(rng, n_rows)
        y = _draw(rng, p)
        m.update(y, p)
        rows = np.arange(n_rows)
        for j, t in enumerate(temperatures):
            log_q = _log_softmax(np.log(p) / t)
            expected[j] += np.sum(log_q[rows, y] - np.log(p[rows, y]))
    got = m.to_dict()["groups"][0][1]["log_wealth_t"]
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_small_batches_of_many_classes_raise_no_warning():
    # 30 rows of 26 classes: scikit-learn's target check would call the
    # labels a regression target; the monitor knows its classes
    rng = np.random.default_rng(7)
    m = CalibrationMonitor()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            _, p = _batch(rng, 30, k=26)
            m.update(_draw(rng, p), p)
    assert m.n_rows_ == 90


def test_every_input_form_gives_the_same_evidence():
    # integer arrays (the fast path), lists, explicit classes 0..K-1, string
    # labels with classes and float32 probabilities: one e-process
    rng = np.random.default_rng(8)
    batches = [(_draw(rng, p), p) for _, p in (_batch(rng, 15, k=5) for _ in range(8))]
    names = np.array(list("abcde"))
    forms = {
        "arrays": (CalibrationMonitor(), lambda y, p: (y, p)),
        "lists": (CalibrationMonitor(), lambda y, p: (y.tolist(), p.tolist())),
        "classes": (CalibrationMonitor(classes=range(5)), lambda y, p: (y, p)),
        "strings": (CalibrationMonitor(classes=names), lambda y, p: (names[y], p)),
    }
    for y, p in batches:
        for monitor, form in forms.values():
            monitor.update(*form(y, p))
    reference = forms["lists"][0].e_value_
    for monitor, _ in forms.values():
        assert monitor.e_value_ == pytest.approx(reference, rel=1e-12)
    # float32 probabilities: the e-process of their float64 values
    single, double = CalibrationMonitor(), CalibrationMonitor()
    for y, p in batches:
        p32 = (p / p.sum(axis=1, keepdims=True)).astype(np.float32)
        single.update(y, p32)
        double.update(y.tolist(), p32.astype(np.float64).tolist())
    assert single.e_value_ == pytest.approx(double.e_value_, rel=1e-12)


@pytest.mark.parametrize(
    "bad, match",
    [
        ([[0.5, 0.7], [0.9, 0.1]], "sum to 1"),
        ([[-0.1, 1.1], [0.9, 0.1]], r"in \[0, 1\]"),
        ([[np.nan, 0.5], [0.9, 0.1]], "NaN"),
    ],
)
def test_later_batches_are_checked_as_the_first(bad, match):
    m = CalibrationMonitor()
    m.update(np.array([0, 1]), np.array([[0.5, 0.5], [0.9, 0.1]]))
    with pytest.raises(ValueError, match=match):
        m.update(np.array([0, 1]), np.array(bad))
    with pytest.raises(ValueError, match="same classes"):
        m.update(np.array([0, 1]), np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]))
    assert m.n_looks_ == 1
