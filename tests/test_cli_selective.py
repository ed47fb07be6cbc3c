"""``skcal evaluate``: the selective-prediction rows and ``--risk``."""

import json

import numpy as np
import pytest

from skcal.cli import main
from skcal.metrics import augrc, aurc, coverage_at_risk, eaurc
from skcal.utils._testing import sample_labels


@pytest.fixture
def predictions(tmp_path):
    rng = np.random.default_rng(4)
    proba = rng.dirichlet(np.full(3, 0.6), size=400)
    y = sample_labels(proba, 5)
    path = tmp_path / "pred.npz"
    np.savez(path, proba=proba, labels=y)
    return path, y, proba


def _coverage_by_hand(y, proba, risk):
    """The largest share of the most confident rows with error rate <= risk."""
    errors = (proba.argmax(1) != y)[np.argsort(-proba.max(1))]
    rates = np.cumsum(errors) / np.arange(1, len(y) + 1)
    ok = np.flatnonzero(rates <= risk)
    return (ok[-1] + 1) / len(y) if ok.size else 0.0


def test_evaluate_reports_the_areas_and_the_coverage_at_a_risk(predictions, capsys):
    path, y, proba = predictions
    assert main(["evaluate", str(path), "--risk", "0.2", "--json", "--quiet"]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["AURC"] == pytest.approx(aurc(y, proba), abs=1e-15)
    assert metrics["E-AURC"] == pytest.approx(eaurc(y, proba), abs=1e-15)
    assert metrics["AUGRC"] == pytest.approx(augrc(y, proba), abs=1e-15)
    coverage = metrics["coverage at risk 0.2"]
    assert coverage == _coverage_by_hand(y, proba, 0.2)
    assert coverage == coverage_at_risk(y, proba, risk=0.2)
    assert 0 < coverage < 1


def test_evaluate_table_and_note(predictions, capsys):
    path, y, proba = predictions
    assert main(["evaluate", str(path), "--risk", "0.1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "E-AURC" in out and "coverage at risk 0.1" in out
    assert "higher is better" in out
    # without --risk: the areas only
    assert main(["evaluate", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "AUGRC" in out and "coverage at risk" not in out.lower()


def test_evaluate_side_by_side(predictions, tmp_path, capsys):
    path, y, proba = predictions
    other = tmp_path / "flat.npz"
    flat = 0.5 * proba + 0.5 / 3
    np.savez(other, proba=flat, labels=y)
    argv = ["evaluate", str(path), str(other), "--risk", "0.3", "--json", "--quiet"]
    assert main(argv) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    # a monotone map of the confidence keeps the ranking and the argmax
    assert files["flat"]["metrics"]["AURC"] == pytest.approx(aurc(y, proba))
    assert files["flat"]["metrics"]["coverage at risk 0.3"] == pytest.approx(
        files["pred"]["metrics"]["coverage at risk 0.3"]
    )


@pytest.mark.parametrize("value", ["1.5", "-0.1", "five"])
def test_evaluate_refuses_a_bad_risk(predictions, capsys, value):
    path, _, _ = predictions
    with pytest.raises(SystemExit):
        main(["evaluate", str(path), "--risk", value])
    assert "--risk takes an error rate between 0 and 1" in capsys.readouterr().err
