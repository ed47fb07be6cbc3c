"""The command line's data files: column options, class names, several files.

Issue 20, item 6: ``--label-col`` / ``--logit-cols`` / ``--proba-cols`` /
``--emb-cols`` in every format, class names in the output headers, and
``skcal evaluate a.npz b.npz ...`` side by side with ``--ci`` and
``--paired``. The references are computed here with scikit-learn, scipy and
numpy from the arrays written to the files.
"""

import importlib.util
import json

import numpy as np
import pytest
from scipy.special import softmax
from scipy.stats import bootstrap
from sklearn.metrics import accuracy_score, log_loss

from skcal import LocalNetCalibrator, TemperatureScaling, VectorScaling
from skcal.cli import main
from skcal.utils._testing import make_miscalibrated_logits, sample_labels

NAMES = np.array(["cat", "dog", "bird"])  # class j of the logits is NAMES[j]


def _error(capsys, command) -> str:
    """The one error line of a failed command (nothing on stdout)."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"skcal {command}: error: "), lines
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[0]


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def _nll(y, proba, labels) -> float:
    """scikit-learn's log loss of ``proba``, whose column j is ``labels[j]``."""
    order = np.argsort(labels)  # log_loss takes the columns in sorted order
    return log_loss(y, proba[:, order], labels=np.asarray(labels)[order])


def _ece(y, proba, labels, n_bins=15) -> float:
    """Top-label ECE on equal-width bins, by hand (bins closed on the left)."""
    confidence = proba.max(axis=1)
    correct = np.asarray(labels)[proba.argmax(axis=1)] == y
    bins = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in np.unique(bins):
        rows = bins == b
        total += rows.sum() * abs(correct[rows].mean() - confidence[rows].mean())
    return total / len(y)


def _brier(y, proba, labels) -> float:
    onehot = (np.asarray(y)[:, None] == np.asarray(labels)[None, :]).astype(float)
    return float(np.mean(np.sum((proba - onehot) ** 2, axis=1)))


@pytest.fixture
def scores():
    """Over-confident logits of 3 classes: 300 calibration, 200 test rows."""
    z, y = make_miscalibrated_logits(500, 3, random_state=0)
    return z[:300], y[:300], z[300:], y[300:]


def _string_csv(pd, path, z, y, order=(1, 2, 0)):
    """A CSV of string labels ``target`` and logits ``s_<name>``, columns in
    ``order`` (not the sorted order of the names), after an id column."""
    columns = {"id": np.arange(len(y)), "target": NAMES[y]}
    columns.update({f"s_{NAMES[j]}": z[:, j] for j in order})
    pd.DataFrame(columns).to_csv(path, index=False)


# ------------------------------------------------------------ column options
def test_label_col_and_prefix_read_string_labels_by_column_name(
    scores, tmp_path, capsys
):
    pd = pytest.importorskip("pandas")
    z_cal, y_cal, z_test, y_test = scores
    cal, test, out = tmp_path / "cal.csv", tmp_path / "test.csv", tmp_path / "o.csv"
    _string_csv(pd, cal, z_cal, y_cal)
    _string_csv(pd, test, z_test, y_test, order=(2, 0, 1))  # another order
    argv = ["calibrate", "--method", "ts", "--fit", str(cal), "--apply", str(test)]
    argv += ["--out", str(out), "--label-col", "target", "--logit-cols", "s_"]
    assert main([*argv, "--json", "--quiet"]) == 0
    summary = _json(capsys)
    # the classes are the columns' suffixes, in the --fit file's column order
    assert summary["classes"] == ["dog", "bird", "cat"]
    written = pd.read_csv(out)
    assert list(written.columns) == [
        "id",  # copied from --apply: results join back by it (issue 51)
        "target",  # the user's name for the labels (issue 37)
        "predict",
        "proba_dog",
        "proba_bird",
        "proba_cat",
    ]
    # temperature scaling on the integer-coded logits, fitted here
    reference = TemperatureScaling(device="cpu").fit(z_cal, y_cal)
    expected = reference.predict_proba(z_test)  # column j: NAMES[j]
    for j, name in enumerate(NAMES):
        np.testing.assert_allclose(
            written[f"proba_{name}"], expected[:, j], rtol=1e-7, atol=1e-10
        )
    np.testing.assert_array_equal(written["target"], NAMES[y_test])
    np.testing.assert_array_equal(written["predict"], NAMES[expected.argmax(1)])
    after = summary["metrics"][1]
    assert after["NLL"] == pytest.approx(
        _nll(NAMES[y_test], expected, labels=NAMES), rel=1e-9
    )
    before = summary["metrics"][0]
    assert before["NLL"] == pytest.approx(
        _nll(NAMES[y_test], softmax(z_test, axis=1), labels=NAMES), rel=1e-9
    )

    # the output reads back with the same --label-col: the same classes
    assert (
        main(["evaluate", str(out), "--label-col", "target", "--json", "--quiet"]) == 0
    )
    report = _json(capsys)
    assert report["metrics"]["NLL"] == pytest.approx(after["NLL"], rel=1e-9)
    assert report["metrics"]["accuracy"] == pytest.approx(
        accuracy_score(NAMES[y_test], NAMES[expected.argmax(1)])
    )


def test_a_comma_list_is_exact_names_in_that_order(scores, tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    z_cal, y_cal, z_test, y_test = scores
    cal, test, out = tmp_path / "cal.csv", tmp_path / "test.csv", tmp_path / "o.csv"
    _string_csv(pd, cal, z_cal, y_cal)
    _string_csv(pd, test, z_test, y_test)
    argv = ["calibrate", "--method", "vs", "--fit", str(cal), "--apply", str(test)]
    argv += ["--out", str(out), "--label-col", "target", "--quiet"]
    assert main([*argv, "--logit-cols", "s_bird, s_cat,s_dog"]) == 0
    written = pd.read_csv(out)
    assert list(written.columns)[-3:] == ["proba_bird", "proba_cat", "proba_dog"]
    order = [2, 0, 1]  # bird, cat, dog: the columns in list order
    recoded = np.argsort(order)[y_cal]  # the index of each label in that order
    reference = VectorScaling(device="cpu").fit(z_cal[:, order], recoded)
    np.testing.assert_allclose(
        written[["proba_bird", "proba_cat", "proba_dog"]].to_numpy(),
        reference.predict_proba(z_test[:, order]),
        rtol=1e-6,
        atol=1e-8,
    )


def test_npz_keys_follow_the_same_options(scores, tmp_path, capsys):
    _, _, z, y = scores
    proba = softmax(z / 2, axis=1)
    path = tmp_path / "keys.npz"
    # a 2-D array, and the same columns as 1-D arrays, under other names
    np.savez(path, y=y, scores=proba, p_0=proba[:, 0], p_1=proba[:, 1], p_2=proba[:, 2])
    expected = _nll(y, proba, labels=[0, 1, 2])
    for spec in ["scores", "p_", "p_2,p_0,p_1"]:
        argv = ["evaluate", str(path), "--label-col", "y", "--proba-cols", spec]
        assert main([*argv, "--json", "--quiet"]) == 0, spec
        assert _json(capsys)["metrics"]["NLL"] == pytest.approx(expected, rel=1e-12)
    # without --label-col the npz has no labels: a clear error
    assert main(["evaluate", str(path), "--proba-cols", "scores"]) == 2
    err = _error(capsys, "evaluate")
    assert f"{path} has no array 'labels'" in err and "--label-col" in err
    assert "its arrays: p_0, p_1, p_2, scores, y" in err


def test_numbered_columns_are_read_by_number_and_may_name_the_labels(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    proba = rng.dirichlet(np.ones(3), size=150)
    y = np.array([3, 5, 7])[sample_labels(proba, 2)]
    path = tmp_path / "numbered.csv"
    # file order 7, 3, 5: read by number
    frame = {"label": y, "proba_7": proba[:, 2], "proba_3": proba[:, 0]}
    pd.DataFrame({**frame, "proba_5": proba[:, 1]}).to_csv(path, index=False)
    assert main(["evaluate", str(path), "--json", "--quiet"]) == 0
    got = _json(capsys)["metrics"]
    assert got["NLL"] == pytest.approx(_nll(y, proba, labels=[3, 5, 7]), rel=1e-12)
    assert got["ECE"] == pytest.approx(_ece(y, proba, [3, 5, 7]), rel=1e-9)
    # a gap in 0..C-1 that the labels do not fill is an error, not a shift
    gap = tmp_path / "gap.csv"
    y012 = sample_labels(proba, 3)
    columns = {"proba_0": proba[:, 0], "proba_1": proba[:, 1]}
    pd.DataFrame({"label": y012, **columns, "proba_3": proba[:, 2]}).to_csv(
        gap, index=False
    )
    assert main(["evaluate", str(gap)]) == 2
    err = _error(capsys, "evaluate")
    assert "columns are numbered 0, 1, 3" in err and "no column for 2" in err


def test_string_labels_and_classes_arrays_name_the_output_columns(
    scores, tmp_path, capsys
):
    pd = pytest.importorskip("pandas")
    z_cal, y_cal, z_test, y_test = scores
    out = tmp_path / "o.csv"
    # string labels in an npz: column j is the j-th name in sorted order,
    # and the names head the columns
    order = np.argsort(NAMES)  # bird, cat, dog
    z_cal, z_test = z_cal[:, order], z_test[:, order]
    cal, test = tmp_path / "cal.npz", tmp_path / "test.npz"
    np.savez(cal, logits=z_cal, labels=NAMES[y_cal])
    np.savez(test, logits=z_test, labels=NAMES[y_test])
    argv = ["calibrate", "--method", "ts", "--fit", str(cal), "--apply", str(test)]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    written = pd.read_csv(out)
    assert list(written.columns) == [
        "label",
        "predict",
        "proba_bird",
        "proba_cat",
        "proba_dog",
    ]
    sorted_codes = np.argsort(order)[y_cal]  # the column of each label
    reference = TemperatureScaling(device="cpu").fit(z_cal, sorted_codes)
    np.testing.assert_allclose(
        written[["proba_bird", "proba_cat", "proba_dog"]].to_numpy(),
        reference.predict_proba(z_test),
        rtol=0,
        atol=1e-10,
    )
    # an npz array classes names the columns, numbers included; npz keeps it
    named = tmp_path / "named.npz"
    np.savez(
        named, logits=z_cal, labels=np.array([20, 0, 10])[y_cal], classes=[20, 0, 10]
    )
    argv[4] = str(named)
    test_named = tmp_path / "test_named.npz"
    np.savez(test_named, logits=z_test)
    argv[6] = str(test_named)
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    assert list(pd.read_csv(out).columns) == [
        "predict",
        "proba_20",
        "proba_0",
        "proba_10",
    ]
    assert main([*argv, "--out", str(tmp_path / "o.npz"), "--quiet"]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["classes"], [20, 0, 10])
    # numeric labels without a classes array keep the column numbers
    plain = tmp_path / "plain.npz"
    np.savez(plain, logits=z_cal, labels=np.array([20, 0, 10])[y_cal])
    argv[4] = str(plain)
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    assert list(pd.read_csv(out).columns) == [
        "predict",
        "proba_0",
        "proba_1",
        "proba_2",
    ]


def test_embeddings_columns_for_local_calibrators(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    H = rng.normal(size=(300, 4))
    y = sample_labels(softmax(H[:, :3] * 2, axis=1), 0)
    frame = pd.DataFrame({f"h{j}": H[:, j] for j in (3, 0, 2, 1)})  # not in order
    frame.insert(0, "y", y)
    cal, test = tmp_path / "cal.csv", tmp_path / "test.csv"
    frame[:200].to_csv(cal, index=False)
    frame[200:].to_csv(test, index=False)
    out = tmp_path / "o.npz"
    argv = ["calibrate", "--method", "localnet", "--fit", str(cal), "--apply"]
    argv += [str(test), "--out", str(out), "--label-col", "y", "--emb-cols", "h"]
    argv += ["--param", "max_iter=5", "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    reference = LocalNetCalibrator(max_iter=5, device="cpu", random_state=0)
    reference.fit(H[:200], y[:200])
    np.testing.assert_allclose(
        np.load(out)["proba"], reference.predict_proba(H[200:]), rtol=1e-5, atol=1e-7
    )


def test_select_reads_the_same_columns(scores, tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    z_cal, y_cal, z_test, y_test = scores
    cal, test = tmp_path / "cal.csv", tmp_path / "test.csv"
    _string_csv(pd, cal, z_cal, y_cal)
    _string_csv(pd, test, z_test, y_test, order=(0, 2, 1))
    argv = ["select", "--fit", str(cal), "--candidates", "identity", "ts", "--cv"]
    argv += ["3", "--test", str(test), "--n-resamples", "20", "--json", "--quiet"]
    assert main([*argv, "--label-col", "target", "--logit-cols", "s_"]) == 0
    got = _json(capsys)
    assert got["classes"] == ["dog", "bird", "cat"] and got["input"] == "logits"
    # the test file's columns follow the classes by name
    proba = TemperatureScaling(device="cpu").fit(z_cal, y_cal).predict_proba(z_test)
    nll = got["test"]["intervals"]["metrics"]["NLL"]["estimate"]
    assert nll == pytest.approx(_nll(NAMES[y_test], proba, NAMES), rel=1e-9)
    assert got["selected"] == "TemperatureScaling"


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--label-col", "targt"], "has no column 'targt', the true labels"),
        (["--label-col", "targt"], "(did you mean 'target'?)"),
        (
            ["--logit-cols", "q_"],
            "has no columns named q_... (logits, --logit-cols q_)",
        ),
        (["--logit-cols", "s_cat,s_dgo"], "no column 's_dgo' (of --logit-cols s_cat"),
        (["--logit-cols", "s_cat,s_dgo"], "(did you mean 's_dog'?)"),
        (["--logit-cols", "s_cat,,s_dog"], "--logit-cols 's_cat,,s_dog' has an empty"),
        (["--logit-cols", "s_cat,s_cat"], "names 's_cat' more than once"),
        (["--logit-cols", " "], "--logit-cols is empty"),
        (["--label-col", ""], "--label-col is empty"),
        (["--logit-cols", "i"], "column 'id' (logits) must be numeric"),
    ],
)
def test_column_errors_are_one_line(scores, tmp_path, capsys, extra, expected):
    pd = pytest.importorskip("pandas")
    z_cal, y_cal, _, _ = scores
    cal = tmp_path / "cal.csv"
    _string_csv(pd, cal, z_cal, y_cal)
    pd.read_csv(cal).assign(id=lambda f: f["id"].astype(str) + "x").to_csv(
        cal, index=False
    )
    out = tmp_path / "o.npz"
    argv = ["calibrate", "--method", "ts", "--fit", str(cal), "--apply", str(cal)]
    argv += ["--out", str(out)]
    if "--label-col" not in extra:
        argv += ["--label-col", "target"]
    if "--logit-cols" not in extra:
        argv += ["--logit-cols", "s_"]
    assert main([*argv, *extra]) == 2
    err = _error(capsys, "calibrate")
    assert expected in err
    if "has no column" in expected:  # the columns that exist are listed
        assert "its columns: id, target, s_dog, s_bird, s_cat" in err
    assert not out.exists()


def test_columns_naming_some_labels_but_not_all_are_an_error(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.ones(3), size=60)
    path = tmp_path / "partial.csv"
    columns = {"proba_cat": proba[:, 0], "proba_dog": proba[:, 1]}
    frame = {"label": NAMES[sample_labels(proba, 1)], **columns, "proba_x": proba[:, 2]}
    pd.DataFrame(frame).to_csv(path, index=False)
    assert main(["evaluate", str(path)]) == 2
    err = _error(capsys, "evaluate")
    assert "name the classes cat, dog, x, but the labels also include bird" in err


# --------------------------------------------------------- several files
@pytest.fixture
def three_files(tmp_path):
    """Three predictions of the same 240 rows: honest, sharp and soft."""
    z, y = make_miscalibrated_logits(240, 4, temperature=1.0, random_state=7)
    probas = {
        "honest": softmax(z, axis=1),
        "sharp": softmax(2.0 * z, axis=1),
        "soft": softmax(0.5 * z, axis=1),
    }
    paths = []
    for name, proba in probas.items():
        paths.append(tmp_path / f"{name}.npz")
        np.savez(paths[-1], proba=proba, labels=y)
    return paths, y, probas


def _table(out: str) -> tuple[list[str], dict]:
    """Header and ``{metric: cells}`` of the side-by-side table."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("metric"))
    header = lines[start].split()
    rows = {}
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        metric, _, rest = line.partition("  ")
        rows[metric.strip()] = rest.split()
    return header, rows


def test_evaluate_several_files_side_by_side(three_files, capsys):
    paths, y, probas = three_files
    labels = [0, 1, 2, 3]
    assert main(["evaluate", *map(str, paths), "--quiet"]) == 0
    out = capsys.readouterr().out
    header, rows = _table(out)
    assert header == ["metric", "honest", "sharp", "soft"]
    for column, proba in enumerate(probas.values()):
        expected = {
            "accuracy": accuracy_score(y, proba.argmax(1)),
            "NLL": _nll(y, proba, labels),
            "Brier": _brier(y, proba, labels),
            "ECE": _ece(y, proba, labels),
        }
        for metric, value in expected.items():
            assert rows[metric][column] == f"{value:.4f}", metric
    # --names, and --json: one dict per file, unrounded
    argv = ["evaluate", *map(str, paths), "--names", "A,B,C", "--json", "--quiet"]
    assert main(argv) == 0
    got = _json(capsys)
    assert list(got["files"]) == ["A", "B", "C"]
    for name, (path, proba) in zip("ABC", zip(paths, probas.values())):
        metrics = got["files"][name]["metrics"]
        assert got["files"][name]["file"] == str(path)
        assert metrics["NLL"] == pytest.approx(_nll(y, proba, labels), rel=1e-12)
        assert metrics["ECE"] == pytest.approx(_ece(y, proba, labels), rel=1e-9)
        assert metrics["Brier"] == pytest.approx(_brier(y, proba, labels), rel=1e-12)
    assert got["n_samples"] == 240 and "paired" not in got


def test_evaluate_ci_puts_the_interval_in_each_cell(three_files, capsys):
    paths, y, probas = three_files
    argv = ["evaluate", *map(str, paths[:2]), "--ci", "--n-resamples", "60"]
    assert main([*argv, "--seed", "4", "--confidence-level", "0.8", "--quiet"]) == 0
    _, rows = _table(capsys.readouterr().out)
    for column, proba in enumerate(list(probas.values())[:2]):
        # the NLL interval: percentile bootstrap of the per-row log loss,
        # resampled by scipy with the same seed (numpy's RandomState)
        per_row = -np.log(proba[np.arange(len(y)), y])
        ci = bootstrap(
            (per_row,),
            np.mean,
            n_resamples=60,
            confidence_level=0.8,
            method="percentile",
            random_state=np.random.RandomState(4),
        ).confidence_interval
        cells = rows["NLL"][3 * column : 3 * column + 3]
        assert cells == [
            f"{per_row.mean():.4f}",
            f"[{ci.low:.4f},",
            f"{ci.high:.4f}]",
        ]
    assert len(rows["MCE"]) == 2  # no interval: one number per file
    assert len(rows["ECCE p-value"]) == 2


def test_evaluate_paired_against_scipy_bootstrap(three_files, capsys):
    paths, y, probas = three_files
    argv = ["evaluate", *map(str, paths), "--paired", "--n-resamples", "200"]
    assert main([*argv, "--seed", "3", "--json", "--quiet"]) == 0
    got = _json(capsys)["paired"]
    assert got["reference"] == "honest"
    first = probas["honest"]
    for name in ["sharp", "soft"]:
        proba = probas[name]
        nll = got["comparisons"][name]["NLL"]
        assert nll["difference"] == pytest.approx(
            _nll(y, proba, [0, 1, 2, 3]) - _nll(y, first, [0, 1, 2, 3]), rel=1e-9
        )
        # per-row log-loss differences, resampled by scipy with the same seed
        rows = np.arange(len(y))
        per_row = np.log(first[rows, y]) - np.log(proba[rows, y])
        result = bootstrap(
            (per_row,),
            np.mean,
            n_resamples=200,
            confidence_level=0.9,
            method="percentile",
            random_state=np.random.RandomState(3),
        )
        assert (nll["low"], nll["high"]) == pytest.approx(
            (result.confidence_interval.low, result.confidence_interval.high),
            rel=1e-9,
        )
        values = result.bootstrap_distribution
        share = min((1 + np.sum(values <= 0)), (1 + np.sum(values >= 0))) / 201
        assert nll["p_value"] == pytest.approx(min(1.0, 2 * share), rel=1e-12)
        ece = got["comparisons"][name]["ECE"]
        assert ece["difference"] == pytest.approx(
            _ece(y, proba, [0, 1, 2, 3]) - _ece(y, first, [0, 1, 2, 3]), rel=1e-9
        )
        assert ece["low"] <= ece["high"] and 0 < ece["p_value"] <= 1
    # the text: one row per file and metric; sharp is much worse than honest
    assert main(argv[:-2] + ["--seed", "3", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "Paired bootstrap comparison with honest" in out
    line = next(row for row in out.splitlines() if row.startswith("sharp  NLL"))
    assert float(line.split()[2]) > 0


def test_evaluate_aligns_the_classes_of_named_columns(three_files, tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    paths, y, probas = three_files
    names = np.array(["w", "x", "y", "z"])
    sharp = probas["sharp"]
    csv = tmp_path / "sharp.csv"
    columns = {f"proba_{names[j]}": sharp[:, j] for j in (3, 1, 0, 2)}
    pd.DataFrame({"label": names[y], **columns}).to_csv(csv, index=False)
    honest = tmp_path / "honest_str.npz"
    np.savez(honest, proba=probas["honest"], labels=names[y])
    argv = ["evaluate", str(honest), str(csv), "--paired", "--n-resamples", "20"]
    assert main([*argv, "--json", "--quiet"]) == 0
    got = _json(capsys)
    assert got["classes"] == ["w", "x", "y", "z"]
    nll = got["paired"]["comparisons"]["sharp"]["NLL"]
    assert nll["difference"] == pytest.approx(
        _nll(names[y], sharp, names) - _nll(names[y], probas["honest"], names),
        rel=1e-9,
    )


def test_evaluate_several_files_must_hold_the_same_rows(three_files, tmp_path, capsys):
    paths, y, probas = three_files
    short, other = tmp_path / "short.npz", tmp_path / "other.npz"
    np.savez(short, proba=probas["honest"][:-1], labels=y[:-1])
    shuffled = y.copy()
    shuffled[[5, 9]] = (y[[5, 9]] + 1) % 4
    np.savez(other, proba=probas["honest"], labels=shuffled)
    assert main(["evaluate", str(paths[0]), str(short)]) == 2
    err = _error(capsys, "evaluate")
    assert f"{short} has 239 rows but {paths[0]} has 240" in err
    assert main(["evaluate", str(paths[0]), str(other)]) == 2
    err = _error(capsys, "evaluate")
    assert f"the labels of {other} differ from those of {paths[0]} in 2 of 240" in err
    assert f"(first: row 5, {shuffled[5]} against {y[5]})" in err
    assert main(["evaluate", str(paths[0]), "--paired"]) == 2
    assert "--paired compares each file with the first" in _error(capsys, "evaluate")
    assert main(["evaluate", *map(str, paths), "--names", "a,b"]) == 2
    assert "gives 2 name(s) for 3 file(s)" in _error(capsys, "evaluate")
    assert main(["evaluate", *map(str, paths[:2]), "--names", "a,a"]) == 2
    assert "gives 'a' twice" in _error(capsys, "evaluate")


def test_same_stems_fall_back_to_the_paths(three_files, tmp_path, capsys):
    paths, _, probas = three_files
    (tmp_path / "sub").mkdir()
    twin = tmp_path / "sub" / "honest.npz"
    twin.write_bytes(paths[0].read_bytes())
    assert main(["evaluate", str(paths[0]), str(twin), "--json", "--quiet"]) == 0
    got = _json(capsys)
    assert list(got["files"]) == [str(paths[0]), str(twin)]


def test_evaluate_plots_several_files(three_files, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    paths, _, _ = three_files
    png = tmp_path / "diagram.png"
    assert main(["evaluate", *map(str, paths), "--plot", str(png), "--quiet"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"written to {png}" in capsys.readouterr().out


# ------------------------------------------------------------------ parquet
def test_parquet_reads_the_same_columns(scores, tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    if not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
        pytest.skip("Parquet needs pyarrow or fastparquet, neither is installed")
    z_cal, y_cal, z_test, y_test = scores
    for name, z, y in [("cal", z_cal, y_cal), ("test", z_test, y_test)]:
        columns = {f"s_{NAMES[j]}": z[:, j] for j in (1, 2, 0)}
        pd.DataFrame({"target": NAMES[y], **columns}).to_parquet(
            tmp_path / f"{name}.parquet"
        )
    out = tmp_path / "o.parquet"
    argv = ["calibrate", "--method", "ts", "--fit", str(tmp_path / "cal.parquet")]
    argv += ["--apply", str(tmp_path / "test.parquet"), "--out", str(out)]
    assert main([*argv, "--label-col", "target", "--logit-cols", "s_", "--quiet"]) == 0
    written = pd.read_parquet(out)
    reference = TemperatureScaling(device="cpu").fit(z_cal, y_cal)
    expected = reference.predict_proba(z_test)
    for j, name in enumerate(NAMES):
        np.testing.assert_allclose(written[f"proba_{name}"], expected[:, j], atol=1e-10)


def test_evaluate_names_calibrated_files_by_method_and_plots_one_count_panel(
    scores, tmp_path, capsys, monkeypatch
):
    """Files written by calibrate carry their method: evaluate's columns and
    the diagram's legend name it, and the diagram has one count panel."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from skcal.metrics import expected_calibration_error

    z_cal, y_cal, z_test, y_test = scores
    cal, test = tmp_path / "cal.npz", tmp_path / "test.npz"
    np.savez(cal, logits=z_cal, labels=y_cal)
    np.savez(test, logits=z_test, labels=y_test)
    outs = []
    for method in ("ts", "vs"):
        outs.append(tmp_path / f"out_{method}.npz")
        argv = ["calibrate", "--method", method, "--fit", str(cal)]
        argv += ["--apply", str(test), "--out", str(outs[-1]), "--quiet"]
        assert main(argv) == 0
    capsys.readouterr()
    names = [str(np.load(out)["method"]) for out in outs]
    assert len(set(names)) == 2
    saved = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: saved.append(fig))
    png = tmp_path / "d.png"
    argv = ["evaluate", *map(str, outs), "--plot", str(png), "--json", "--quiet"]
    assert main(argv) == 0
    assert list(_json(capsys)["files"]) == names
    (figure,) = saved
    assert len(figure.axes) == 2  # the diagram and one shared count panel
    legend = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    for name, out in zip(names, outs):
        ece = expected_calibration_error(y_test, np.load(out)["proba"], n_bins=15)
        assert f"{name} (ECE {ece:.3f})" in legend
    assert len(figure.axes[1].patches) == 2  # one count outline per file


# ------------------------------------------- rounded probabilities (issue 37)
@pytest.fixture(scope="module")
def rounded(tmp_path_factory):
    """A logistic regression's probabilities on scikit-learn's digits, written
    as ``DataFrame.round(3)`` does: calibration and test CSVs, and the values
    as read back (rows summing to 0.997-1.003, not 1)."""
    pd = pytest.importorskip("pandas")
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(
        X / 16, y, train_size=0.4, random_state=0, stratify=y
    )
    model = LogisticRegression(C=0.1, max_iter=300).fit(X_train, y_train)
    frame = pd.DataFrame(
        model.predict_proba(X_rest), columns=[f"proba_{j}" for j in range(10)]
    ).round(3)
    frame.insert(0, "label", y_rest)
    folder = tmp_path_factory.mktemp("rounded")
    paths = {"cal": folder / "cal.csv", "test": folder / "test.csv"}
    frame.iloc[:500].to_csv(paths["cal"], index=False)
    frame.iloc[500:].to_csv(paths["test"], index=False)
    read = {k: pd.read_csv(p) for k, p in paths.items()}
    P = {k: f.filter(like="proba_").to_numpy() for k, f in read.items()}
    labels = {k: f["label"].to_numpy() for k, f in read.items()}
    assert np.abs(P["cal"].sum(axis=1) - 1).max() > 1e-3  # really off
    return paths, P, labels


def test_rounded_probabilities_are_refused_with_the_flag_that_fixes_them(
    rounded, tmp_path, capsys
):
    paths, _, _ = rounded
    out = tmp_path / "out.npz"
    for argv in (
        ["calibrate", "--method", "ts", "--fit", str(paths["cal"])]
        + ["--apply", str(paths["test"]), "--out", str(out)],
        ["evaluate", str(paths["test"])],
        ["select", "--fit", str(paths["cal"]), "--candidates", "ts"],
    ):
        assert main([*argv, "--quiet"]) == 2
        err = _error(capsys, argv[0])
        assert "rows sum to 1" in err and "--renormalize" in err, err
        assert "--input logits" in err and "input=" not in err and ".sum(" not in err
    assert not out.exists()


def test_renormalize_fits_the_rows_divided_by_their_sums(rounded, tmp_path, capsys):
    paths, P, labels = rounded
    cal, test = (P[k] / P[k].sum(axis=1, keepdims=True) for k in ("cal", "test"))
    out, model = tmp_path / "out.npz", tmp_path / "ts.pkl"
    argv = ["calibrate", "--method", "ts", "--fit", str(paths["cal"]), "--apply"]
    argv += [str(paths["test"]), "--out", str(out), "--save", str(model)]
    assert main([*argv, "--renormalize"]) == 0
    note = capsys.readouterr().err
    assert "--renormalize: divided each row of columns proba_0" in note
    assert f"{paths['test']} by its sum (sums in [" in note
    reference = TemperatureScaling(input="proba", device="cpu").fit(cal, labels["cal"])
    expected = reference.predict_proba(test)
    with np.load(out) as written:
        np.testing.assert_allclose(written["proba"], expected, rtol=1e-7, atol=1e-12)
    # apply and evaluate read the rounded file the same way
    again = tmp_path / "again.npz"
    argv = ["apply", "--model", str(model), "--apply", str(paths["test"])]
    assert main([*argv, "--out", str(again), "--allow-pickle", "--quiet"]) == 2
    assert "--renormalize" in _error(capsys, "apply")
    assert main([*argv, "--out", str(again), "--allow-pickle", "--renormalize"]) == 0
    with np.load(again) as written:
        np.testing.assert_allclose(written["proba"], expected, rtol=1e-7, atol=1e-12)
    capsys.readouterr()
    argv = ["evaluate", str(paths["test"]), "--renormalize", "--json", "--quiet"]
    assert main(argv) == 0
    metrics = _json(capsys)["metrics"]
    assert metrics["NLL"] == pytest.approx(
        log_loss(labels["test"], test, labels=range(10)), rel=1e-9
    )
    assert metrics["Brier"] == pytest.approx(
        _brier(labels["test"], test, range(10)), rel=1e-9
    )


def test_renormalize_still_refuses_scores_and_empty_rows(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    z, y = make_miscalibrated_logits(60, 3, random_state=1)
    frame = pd.DataFrame(z, columns=["proba_0", "proba_1", "proba_2"])
    frame.insert(0, "label", y)
    scores = tmp_path / "scores.csv"
    frame.to_csv(scores, index=False)
    assert main(["evaluate", str(scores), "--renormalize", "--quiet"]) == 2
    err = _error(capsys, "evaluate")
    assert "probabilities in [0, 1]" in err and "--input logits" in err
    frame.iloc[:, 1:] = softmax(z, axis=1)
    frame.iloc[4, 1:] = 0.0
    zero = tmp_path / "zero.csv"
    frame.to_csv(zero, index=False)
    assert main(["evaluate", str(zero), "--renormalize", "--quiet"]) == 2
    err = _error(capsys, "evaluate")
    assert "row 4 of columns proba_0" in err and "sums to 0: --renormalize" in err


def test_library_messages_name_the_options_not_python_keywords(tmp_path, capsys):
    # probabilities read as logits: the calibrator's warning, in flags
    z, y = make_miscalibrated_logits(200, 3, random_state=0)
    path, out = tmp_path / "p.npz", tmp_path / "out.npz"
    np.savez(path, logits=softmax(z, axis=1), labels=y)
    argv = ["calibrate", "--method", "ts", "--fit", str(path), "--apply", str(path)]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "skcal calibrate: warning: --input logits but every row" in err
    assert "Pass --input proba if they are" in err and "input=" not in err


def test_evaluate_ci_marks_an_interval_that_excludes_its_estimate(tmp_path, capsys):
    """Side by side with --ci: an interval that lies wholly above its
    estimate (ECE of perfectly calibrated scores grows on resampled rows)
    gets the Python report's star, and a p-value below 1e-4 is printed as
    a bound, not as 0 or 1.11e-16."""
    from skcal.metrics import calibration_report

    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.full(3, 1.0), size=3000)
    y = sample_labels(proba, rng)
    wrong = np.roll(proba, 1, axis=1) ** 3  # far from calibrated: ECCE p ~ 0
    wrong /= wrong.sum(axis=1, keepdims=True)
    paths = [tmp_path / "good.npz", tmp_path / "bad.npz"]
    for path, P in zip(paths, (proba, wrong)):
        np.savez(path, proba=P, labels=y)
    argv = ["evaluate", *map(str, paths), "--ci", "--n-resamples", "50", "--quiet"]
    assert main(argv) == 0
    _, rows = _table(capsys.readouterr().out)
    report = calibration_report(y, proba, n_resamples=50, random_state=0)
    ece = report["ECE"]
    assert not ece.covers_estimate  # the interval lies above the estimate
    assert rows["ECE"][0] == f"{ece.estimate:.4f}*"
    bad = calibration_report(y, wrong, n_resamples=50, random_state=0)
    assert bad.ecce_pvalue < 1e-4
    assert rows["ECCE p-value"][-1] == "<0.0001"


def test_tables_keep_their_ids_and_name_columns_alike(tmp_path, capsys):
    """The third day's trial (issue 51): CSV files with a target column, an id
    column and score_<class> columns. calibrate, apply and adapt write
    proba_<class> alike and keep the id (and any other column that is not a
    score or the label), so results join back by id; evaluate reads skcal's
    own output by its names when the column options name the raw file's."""
    pd = pytest.importorskip("pandas")
    classes = np.array(["<10k", "10-15k", "75k+"])
    z, y = make_miscalibrated_logits(900, 3, temperature=2.0, random_state=5)
    frames = []
    for rows in (slice(0, 600), slice(600, 900)):
        frame = pd.DataFrame({"customer_id": [f"c{i:04d}" for i in range(900)][rows]})
        frame["target"] = classes[y[rows]]
        for j, name in enumerate(classes):
            frame[f"score_{name}"] = z[rows, j]
        frame["region"] = np.where(np.arange(900)[rows] % 2, "north", "south")
        frames.append(frame)
    cal, test = tmp_path / "cal.csv", tmp_path / "test.csv"
    frames[0].to_csv(cal, index=False)
    frames[1].to_csv(test, index=False)
    opts = ["--label-col", "target", "--logit-cols", "score_", "--quiet"]
    ts, model = tmp_path / "ts.csv", tmp_path / "ts.skops"
    argv = ["calibrate", "--method", "ts", "--fit", str(cal), "--apply", str(test)]
    assert main([*argv, "--out", str(ts), "--save", str(model), *opts]) == 0
    applied, adapted = tmp_path / "applied.csv", tmp_path / "adapted.csv"
    argv = ["apply", "--model", str(model), "--apply", str(test)]
    assert main([*argv, "--out", str(applied), *opts]) == 0
    argv = ["adapt", "--model", str(model), "--fit", str(cal), "--target", str(test)]
    assert main([*argv, "--out", str(adapted), *opts]) == 0
    capsys.readouterr()

    reference = TemperatureScaling().fit(z[:600], y[:600]).predict_proba(z[600:])
    for path in (ts, applied, adapted):
        out = pd.read_csv(path)
        probas = [f"proba_{name}" for name in classes]
        assert set(probas) <= set(out.columns), (path, list(out.columns))
        assert list(out.columns[:2]) == ["customer_id", "region"]
        joined = frames[1].merge(out, on="customer_id", suffixes=("", "_out"))
        assert len(joined) == 300 and (joined["region"] == joined["region_out"]).all()
        if path != adapted:  # adapt re-weights them
            np.testing.assert_allclose(joined[probas].to_numpy(), reference, rtol=1e-9)
    # --keep-cols: only the id; none
    argv = ["apply", "--model", str(model), "--apply", str(test), *opts]
    assert main([*argv, "--out", str(applied), "--keep-cols", "customer_id"]) == 0
    assert "region" not in pd.read_csv(applied).columns
    assert main([*argv, "--out", str(applied), "--keep-cols", "none"]) == 0
    assert "customer_id" not in pd.read_csv(applied).columns

    # evaluate the raw scores against skcal's output with the raw file's options
    capsys.readouterr()
    argv = ["evaluate", str(test), str(ts), "--paired", "--json", *opts]
    assert main(argv) == 0
    got = _json(capsys)
    nll = got["files"]["ts"]["metrics"]["NLL"]
    assert nll == pytest.approx(
        log_loss(y[600:], reference, labels=[0, 1, 2]), rel=1e-9
    )
