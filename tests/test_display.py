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


# ---------------------------------------------------------- reliability
def _reliability_problem(seed=0, n=2000, n_classes=3):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(n_classes), size=n)
    y = rng.integers(0, n_classes, size=n)
    return y, P


def test_reliability_points_are_the_metric_bins():
    from skcal.display import ReliabilityDisplay
    from skcal.metrics import (
        binned_statistics,
        classwise_calibration_error,
        expected_calibration_error,
    )

    y, P = _reliability_problem()
    disp = ReliabilityDisplay.from_predictions(y, P, n_bins=10)
    conf, correct = P.max(1), (P.argmax(1) == y).astype(float)
    stats = binned_statistics(conf, correct, n_bins=10)
    keep = stats.weight > 0
    np.testing.assert_allclose(disp.line_.get_xdata(), stats.mean_score[keep])
    np.testing.assert_allclose(disp.line_.get_ydata(), stats.mean_target[keep])
    # the ECE recomputed from the plotted numbers is the metric
    frac = disp.count[keep] / disp.count.sum()
    gaps = np.abs(disp.fraction_positive[keep] - disp.mean_predicted[keep])
    assert frac @ gaps == pytest.approx(expected_calibration_error(y, P, n_bins=10))
    # one diagram per class: their mean ECE is the classwise ECE
    per_class = []
    for k in range(3):
        d = ReliabilityDisplay.from_predictions(y, P, view=k, n_bins=10)
        keep = d.count > 0
        per_class.append(
            d.count[keep]
            @ np.abs(d.fraction_positive - d.mean_predicted)[keep]
            / d.count.sum()
        )
    assert np.mean(per_class) == pytest.approx(
        classwise_calibration_error(y, P, n_bins=10)
    )
    plt.close("all")


def test_reliability_quantile_bins_band_and_several_methods():
    from skcal.display import ReliabilityDisplay

    y, P = _reliability_problem(seed=1)
    fig, ax = plt.subplots()
    a = ReliabilityDisplay.from_predictions(
        y,
        P,
        strategy="quantile",
        n_bins=8,
        n_bootstraps=50,
        random_state=0,
        name="a",
        ax=ax,
    )
    counts = a.count
    assert counts.max() - counts.min() <= 2  # equal-mass bins
    assert a.band.shape == (2, 8)
    keep = counts > 0
    assert np.all(a.band[0, keep] <= a.band[1, keep])
    inside = (a.band[0] <= a.fraction_positive) & (a.fraction_positive <= a.band[1])
    assert inside[keep].mean() >= 0.75
    again = ReliabilityDisplay.from_predictions(
        y, P, strategy="quantile", n_bins=8, n_bootstraps=50, random_state=0
    )
    np.testing.assert_array_equal(again.band, a.band)
    b = ReliabilityDisplay.from_predictions(y, np.roll(P, 1, axis=1), name="b", ax=ax)
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels.count("perfectly calibrated") == 1
    assert f"a (ECE {a.ece_:.3f})" in labels and f"b (ECE {b.ece_:.3f})" in labels
    assert a.figure_ is b.figure_ is fig
    plt.close("all")


def test_reliability_from_estimator_and_bad_view():
    from skcal import TemperatureScaling
    from skcal.display import ReliabilityDisplay
    from skcal.utils._testing import make_miscalibrated_logits

    X, y = make_miscalibrated_logits(800, 3, random_state=0)
    names = np.array(["ant", "bee", "cat"])
    ts = TemperatureScaling(device="cpu").fit(X, names[y])
    disp = ReliabilityDisplay.from_estimator(ts, X, names[y], view="bee")
    assert disp.line_.get_label().startswith("TemperatureScaling (ECE ")
    assert disp.view == "class bee"
    with pytest.raises(ValueError, match="view must be"):
        ReliabilityDisplay.from_estimator(ts, X, names[y], view="dog")
    plt.close("all")


def test_reliability_view_has_one_spelling_and_the_old_one_is_deprecated():
    from skcal.display import ReliabilityDisplay

    y, proba, _ = problem(seed=2)
    disp = ReliabilityDisplay.from_predictions(y, proba, n_bins=10)
    assert disp.view == "top_label"  # the spelling of its own view= argument
    # a new figure: the counts are a panel below, which carries the x label
    assert disp.count_ax_.get_xlabel() == "mean confidence (top-label)"
    assert disp.ax_.get_ylabel() == "accuracy"
    arrays = dict(
        mean_predicted=disp.mean_predicted,
        fraction_positive=disp.fraction_positive,
        count=disp.count,
        edges=disp.edges,
    )
    with pytest.warns(FutureWarning, match='view="top_label"'):
        old = ReliabilityDisplay(**arrays, view="top-label")
    assert old.view == "top_label"
    old.plot(show_counts=False)
    assert old.ax_.get_ylabel() == "accuracy"  # still the top-label diagram
    one_class = ReliabilityDisplay.from_predictions(
        y, proba, view=1, n_bins=10, show_counts=False
    )
    assert one_class.ax_.get_xlabel() == "mean predicted probability (class 1)"
    assert one_class.ax_.get_ylabel() == "observed frequency"
    plt.close("all")


def test_reliability_several_models_share_one_count_axis_and_show_their_ece():
    """Models drawn on one axis: one shared count axis (not a twin each), the
    counts drawn are the bins' counts, the legend's ECE is the metric, marker
    areas grow with the bin's share and small bins are hollow."""
    from skcal.display import ReliabilityDisplay
    from skcal.metrics import expected_calibration_error

    y, P = _reliability_problem(seed=3, n=600)
    sharp = P**4 / (P**4).sum(1, keepdims=True)
    fig, ax = plt.subplots()
    shown = []
    for name, proba in [("raw", P), ("sharp", sharp)]:
        d = ReliabilityDisplay.from_predictions(
            y, proba, n_bins=15, name=name, ax=ax, min_count=20
        )
        shown.append(d)
        # the legend's ECE is the library's metric, recomputed independently
        assert d.ece_ == pytest.approx(
            expected_calibration_error(y, proba, n_bins=15), rel=1e-12
        )
        assert d.line_.get_label() == f"{name} (ECE {d.ece_:.3f})"
        np.testing.assert_array_equal(d.counts_.get_data().values, d.count)
        keep = d.count > 0
        sizes = d.markers_.get_sizes()
        assert len(sizes) == keep.sum()
        big = d.count[keep] >= 20
        # areas ordered as the counts of the bins drawn filled
        order = np.argsort(d.count[keep][big], kind="stable")
        assert np.all(np.diff(sizes[big][order]) >= 0)
        assert sizes[big].max() > sizes[big].min()
        faces = d.markers_.get_facecolors()
        assert np.all(faces[~big, 3] == 0) and np.all(faces[big, 3] > 0)
        assert (~big).any()  # each model has bins of fewer than 20 samples
    assert shown[0].count_ax_ is shown[1].count_ax_
    # one count axis, inside the diagram (its lower quarter), not a twin each
    assert len(fig.axes) == 1 and ax.child_axes == [shown[0].count_ax_]
    # the shared axis runs to the larger of the two count series (issue 37:
    # it ran to 4 times that)
    top = max(d.count.max() for d in shown)
    assert top <= shown[0].count_ax_.get_ylim()[1] <= 1.1 * top
    plt.close("all")


def test_reliability_new_figure_has_a_count_panel_below():
    from skcal.display import ReliabilityDisplay

    y, P = _reliability_problem(seed=4, n=400)
    d = ReliabilityDisplay.from_predictions(y, P, n_bins=10, name="m")
    assert len(d.figure_.axes) == 2
    below = d.count_ax_
    assert below.get_position().y1 <= d.ax_.get_position().y0 + 1e-9
    assert d.ax_.get_shared_x_axes().joined(d.ax_, below)
    assert below.get_ylabel() == "samples per bin"
    assert d.ax_.get_xlabel() == ""
    plain = ReliabilityDisplay.from_predictions(
        y, P, n_bins=10, show_counts=False, show_ece=False, name="m"
    )
    assert len(plain.figure_.axes) == 1 and plain.count_ax_ is None
    assert plain.line_.get_label() == "m"
    plt.close("all")


# ------------------------------------- count axis and legend (issue 37)
def _legend_covers(disp) -> list:
    """The markers of ``disp.ax_`` (display pixels, centres) inside its legend."""
    disp.figure_.canvas.draw()
    box = disp.ax_.get_legend().get_window_extent()
    covered = []
    for markers in disp.ax_.collections:
        centres = markers.get_offset_transform().transform(markers.get_offsets())
        covered += [tuple(c) for c in centres if box.contains(*c)]
    return covered


@pytest.mark.parametrize("count_ax", [False, True])
def test_reliability_count_axis_ends_at_the_largest_count(count_ax):
    from skcal.display import ReliabilityDisplay

    y, P = _reliability_problem(seed=5, n=900)
    fig, (ax, below) = plt.subplots(2, 1)
    kwargs = {"count_ax": below} if count_ax else {}
    d = ReliabilityDisplay.from_predictions(y, P, n_bins=10, ax=ax, **kwargs)
    low, high = d.count_ax_.get_ylim()
    assert low == 0 and d.count.max() <= high <= 1.1 * d.count.max()
    assert d.count_ax_.get_yscale() == "linear"
    plt.close("all")


def test_reliability_count_scale_log_and_its_check():
    from skcal.display import ReliabilityDisplay

    y, P = _reliability_problem(seed=6, n=3000, n_classes=10)
    d = ReliabilityDisplay.from_predictions(y, P, n_bins=15, count_scale="log")
    assert d.count_ax_.get_yscale() == "log"
    low, high = d.count_ax_.get_ylim()
    assert 0 < low <= 1 and d.count.max() <= high <= 1.1 * d.count.max()
    with pytest.raises(ValueError, match="count_scale must be 'linear' or 'log'"):
        ReliabilityDisplay.from_predictions(y, P, count_scale="logarithmic")
    plt.close("all")


def test_reliability_legend_covers_no_point():
    from skcal.display import ReliabilityDisplay

    # under-confident predictions: the points lie above the diagonal, in
    # the upper-left corner where the legend used to be
    rng = np.random.default_rng(7)
    sharp = rng.dirichlet(np.full(3, 0.3), size=3000)
    y = sample_labels(sharp, rng)
    flat = 0.15 * sharp + 0.85 / 3
    for kwargs in ({"show_counts": False}, {}):
        d = ReliabilityDisplay.from_predictions(y, flat, n_bins=15, **kwargs)
        assert _legend_covers(d) == []
    d.ax_.get_legend().set_loc("upper left")  # where it used to be
    assert _legend_covers(d) != []
    # a point in every corner: the legend stays inside the diagram (where it
    # covers no title and no neighbouring panel), at a side's middle
    edges = np.linspace(0, 1, 6)
    corners = ReliabilityDisplay(
        mean_predicted=np.array([0.05, 0.05, 0.5, 0.95, 0.95]),
        fraction_positive=np.array([0.05, 0.95, 0.5, 0.05, 0.95]),
        count=np.full(5, 100),
        edges=edges,
        name="corners",
    ).plot(show_counts=False)
    assert _legend_covers(corners) == []
    legend = corners.ax_.get_legend().get_window_extent()
    assert _within(legend, corners.ax_.get_window_extent())
    plt.close("all")


def _within(box, outer, slack=0.5) -> bool:
    return (
        box.x0 >= outer.x0 - slack
        and box.x1 <= outer.x1 + slack
        and box.y0 >= outer.y0 - slack
        and box.y1 <= outer.y1 + slack
    )


def test_reliability_five_models_and_a_title_in_the_users_layout():
    """Five models on one axis with a title, in two side-by-side panels
    (``plt.subplots(1, 2)``, ``ax=``): each legend and each count inset
    (its texts included) stays inside its own diagram, so nothing covers
    the title or the neighbouring panel; the counts are drawn behind the
    curves."""
    from skcal.display import ReliabilityDisplay

    fig, panels = plt.subplots(1, 2, figsize=(9, 4))
    rng = np.random.default_rng(3)
    for ax in panels:
        ax.set_title("five models")
        for k in range(5):
            sharp = rng.dirichlet(np.full(4, 0.4 + 0.3 * k), size=800)
            y = sample_labels(sharp, rng)
            ReliabilityDisplay.from_predictions(
                y, sharp, n_bins=10, name=f"model {k}", ax=ax
            )
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax, other in (panels, panels[::-1]):
        frame = ax.get_window_extent()
        legend = ax.get_legend().get_window_extent()
        assert _within(legend, frame)
        assert not legend.overlaps(ax.title.get_window_extent(renderer))
        (inset,) = ax.child_axes
        assert _within(inset.get_tightbbox(renderer), frame)
        assert not inset.get_tightbbox(renderer).overlaps(other.get_window_extent())
        lines = [line.get_zorder() for line in ax.get_lines()]
        assert inset.get_zorder() < min(lines)
        assert "samples per bin" in inset.texts[0].get_text()
    plt.close("all")


# -------------------------------------------------------- risk-coverage
def test_risk_coverage_points_are_the_selective_risks():
    from skcal.display import RiskCoverageDisplay
    from skcal.metrics import aurc

    y, proba = _reliability_problem(n=300)
    conf = proba.max(1)
    errors = proba.argmax(1) != y
    disp = RiskCoverageDisplay.from_predictions(y, proba, name="model")
    # the curve written here: accept the k most confident rows (no ties)
    order = np.argsort(-conf)
    k = np.arange(1, 301)
    np.testing.assert_allclose(disp.line_.get_xdata(), k / 300)
    np.testing.assert_allclose(disp.line_.get_ydata(), np.cumsum(errors[order]) / k)
    np.testing.assert_allclose(disp.thresholds, conf[order])
    assert disp.line_.get_label() == f"model (AURC {aurc(y, proba):.3f})"
    assert disp.marker_ is None
    plt.close("all")


def test_risk_coverage_several_models_and_a_marked_point():
    from sklearn.linear_model import LogisticRegression

    from skcal.display import RiskCoverageDisplay

    y, proba = _reliability_problem(n=400)
    _, ax = plt.subplots()
    first = RiskCoverageDisplay.from_predictions(
        y, proba, name="a", ax=ax, mark_coverage=0.5
    )
    threshold, coverage, risk = first.operating_point_
    assert coverage == 0.5  # 200 of 400 rows, no ties
    conf = proba.max(1)
    accepted = conf >= threshold
    assert accepted.mean() == coverage
    assert risk == pytest.approx((proba.argmax(1) != y)[accepted].mean())
    X = np.random.default_rng(1).normal(size=(400, 2))
    model = LogisticRegression().fit(X, y)
    middle = float(np.median(model.predict_proba(X).max(1)))
    second = RiskCoverageDisplay.from_estimator(
        model, X, y, ax=ax, mark_threshold=middle, show_aurc=False
    )
    assert second.line_.get_label() == "LogisticRegression"
    assert second.operating_point_[0] >= middle
    assert second.operating_point_[1] == pytest.approx(0.5, abs=0.01)
    assert second.ax_ is first.ax_
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == 4  # two curves, two marked points
    with pytest.raises(ValueError, match="not both"):
        first.plot(mark_coverage=0.5, mark_threshold=0.5)
    with pytest.raises(ValueError, match="accepts nothing"):
        first.plot(mark_threshold=1.5)
    plt.close("all")
