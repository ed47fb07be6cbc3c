"""Safe persistence with skops (issue 20, item 4).

Every estimator of ``all_estimators()`` (and the wrapper and the search)
round-trips through :func:`skcal.utils.persistence.dump` / ``load`` and through
``skops.io`` with exactly skcal's types trusted; a file holding any other type
is refused before anything is rebuilt. The reference of a round trip is the
model's own ``predict_proba`` before saving, which must come back bitwise.
"""

import io
import warnings

import numpy as np
import pytest

skops_io = pytest.importorskip("skops.io")

from sklearn.ensemble import RandomForestClassifier  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from skcal import (  # noqa: E402
    CalibratedClassifier,
    CalibratorSearchCV,
    IdentityCalibrator,
    TemperatureScaling,
)
from skcal.base import BaseLocalCalibrator  # noqa: E402
from skcal.discovery import all_estimators  # noqa: E402
from skcal.utils._testing import (  # noqa: E402
    make_estimator,
    make_miscalibrated_logits,
    make_region_miscalibrated_embeddings,
)
from skcal.utils.persistence import (  # noqa: E402
    dump,
    dumps,
    load,
    trusted_types,
    untrusted_types,
)


def _qualname(obj) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _fitted(cls):
    """A fitted instance of ``cls`` and the rows it predicts on."""
    if issubclass(cls, BaseLocalCalibrator):
        X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
            600, 3, n_features=16, random_state=0
        )
        params = {}
        if "coef" in cls().get_params():
            params = {"coef": coef, "intercept": intercept}
        est = make_estimator(cls, device="cpu", **params)
    else:
        X, y = make_miscalibrated_logits(400, 4, temperature=2.0, random_state=0)
        est = make_estimator(cls, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    return est, X


@pytest.mark.parametrize("cls", [cls for _, cls in all_estimators()], ids=str)
def test_every_estimator_round_trips_with_only_skcal_types(cls, tmp_path):
    est, X = _fitted(cls)
    expected = est.predict_proba(X)
    path = tmp_path / "model.skops"
    dump(est, path)
    # skops alone flags the model's types as untrusted: they are skcal's, all
    # of them in trusted_types(), and nothing else is needed
    flagged = skops_io.get_untrusted_types(file=str(path))
    assert _qualname(est) in flagged
    assert all(name.startswith("skcal.") for name in flagged), flagged
    assert set(flagged) <= set(trusted_types())
    assert untrusted_types(path) == []
    again = load(path)
    assert type(again) is cls
    np.testing.assert_array_equal(again.predict_proba(X), expected)
    np.testing.assert_array_equal(again.predict(X), est.predict(X))
    assert again.get_params().keys() == est.get_params().keys()
    # plain skops with exactly those types trusted gives the same model
    plain = skops_io.load(str(path), trusted=flagged)
    np.testing.assert_array_equal(plain.predict_proba(X), expected)


def test_unfitted_estimator_and_bytes_and_file_objects():
    est, X = _fitted(TemperatureScaling)
    data = dumps(est)
    np.testing.assert_array_equal(load(data).predict_proba(X), est.predict_proba(X))
    buffer = io.BytesIO()
    dump(est, buffer)
    buffer.seek(0)
    np.testing.assert_array_equal(load(buffer).predict_proba(X), est.predict_proba(X))
    fresh = load(dumps(TemperatureScaling(device="cpu")))
    assert not hasattr(fresh, "temperature_")
    assert fresh.get_params() == TemperatureScaling(device="cpu").get_params()


def test_untrusted_types_then_load_on_one_open_file(tmp_path):
    """The documented order, on one file object. Was: ValueError 'negative
    seek value' (untrusted_types read the file to its end); and a file
    opened in text mode gave a UnicodeDecodeError."""
    est, X = _fitted(TemperatureScaling)
    path = tmp_path / "ts.skops"
    dump(est, path)
    with open(path, "rb") as file:
        file.read(0)
        assert untrusted_types(file) == []
        np.testing.assert_array_equal(load(file).predict_proba(X), est.predict_proba(X))
    with open(path, encoding="latin-1") as text, pytest.raises(TypeError, match="'rb'"):
        load(text)


def test_wrapper_and_search_round_trip():
    X, y = make_miscalibrated_logits(400, 3, temperature=2.0, random_state=1)
    search = CalibratorSearchCV(
        [IdentityCalibrator(), TemperatureScaling(device="cpu")], cv=2, random_state=0
    ).fit(X, y)
    again = load(dumps(search))
    assert again.selected_ == search.selected_
    np.testing.assert_array_equal(again.predict_proba(X), search.predict_proba(X))
    features = X + np.random.default_rng(0).normal(size=X.shape)
    wrapped = CalibratedClassifier(
        LogisticRegression(), calibrator=TemperatureScaling(device="cpu")
    ).fit(features, y)
    again = load(dumps(wrapped))
    np.testing.assert_array_equal(
        again.predict_proba(features), wrapped.predict_proba(features)
    )


def test_foreign_types_are_refused_until_trusted():
    X, y = make_miscalibrated_logits(300, 3, random_state=2)
    forest = CalibratedClassifier(
        RandomForestClassifier(n_estimators=3, random_state=0),
        calibrator=TemperatureScaling(device="cpu"),
    ).fit(X, y)
    data = dumps(forest)
    # skops does not trust scikit-learn's tree structure by default
    assert untrusted_types(data) == ["sklearn.tree._tree.Tree"]
    with pytest.raises(ValueError, match=r"sklearn\.tree\._tree\.Tree") as info:
        load(data)
    assert "trusted=" in str(info.value)
    again = load(data, trusted=["sklearn.tree._tree.Tree"])
    np.testing.assert_array_equal(again.predict_proba(X), forest.predict_proba(X))


class _Payload:
    """A type from outside skcal that a hostile file could ask to rebuild."""

    def __init__(self):
        self.command = "rm -rf /"


def test_a_type_from_elsewhere_is_never_rebuilt():
    est = TemperatureScaling(device="cpu")
    est.extra_ = _Payload()  # smuggled in: not skcal's, not skops' default
    data = dumps(est)
    name = f"{__name__}._Payload"
    assert untrusted_types(data) == [name]
    with pytest.raises(ValueError, match="neither skcal's nor trusted"):
        load(data)


def test_trusted_types_cover_every_public_estimator():
    names = set(trusted_types())
    for _, cls in all_estimators():
        assert f"{cls.__module__}.{cls.__qualname__}" in names
    assert "skcal.wrappers._calibrated.CalibratedClassifier" in names
    assert "skcal.model_selection._search.CalibratorSearchCV" in names
    assert not any(".exceptions." in n or "._torch." in n for n in names)


def _without_attribute(data: bytes, attribute: str) -> bytes:
    """The skops bytes ``data`` with ``attribute`` removed from the saved
    estimator's state: the schema of the file, edited."""
    import json
    import zipfile

    source, target = io.BytesIO(data), io.BytesIO()
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            content = old.read(item.filename)
            if item.filename == "schema.json":
                schema = json.loads(content)
                del schema["content"]["content"][attribute]
                content = json.dumps(schema).encode()
            new.writestr(item, content)
    return target.getvalue()


def test_files_that_are_not_skops_give_one_clear_error(tmp_path):
    """A pickle, a truncated, an empty or a random file. Was: zipfile's
    BadZipFile 'File is not a zip file' (and skops' 'Exactly one of data or
    file should be passed.' for empty bytes)."""
    import pickle

    est, _ = _fitted(TemperatureScaling)
    data = dumps(est)
    cases = {
        "pickle": pickle.dumps(est),
        "truncated": data[: len(data) // 2],
        "empty": b"",
        "random": np.random.default_rng(0).bytes(300),
    }
    for label, content in cases.items():
        path = tmp_path / f"{label}.skops"
        path.write_bytes(content)
        for source, name in [(path, str(path)), (content, "the data given")]:
            for read in (load, untrusted_types):
                with pytest.raises(ValueError) as info:
                    read(source)
                message = str(info.value)
                assert message.startswith(f"{name} is not a readable .skops file")
                assert "\n" not in message and "dump" in message, message


def test_a_fitted_model_missing_an_attribute_is_refused_at_load(tmp_path):
    """Deleted before saving, or dropped from the file. Was: an
    AttributeError at predict time."""
    est, X = _fitted(TemperatureScaling)
    path = tmp_path / "edited.skops"
    path.write_bytes(_without_attribute(dumps(est), "temperature_"))
    del est.temperature_
    for source, name in [(dumps(est), "the data given"), (path, str(path))]:
        with pytest.raises(ValueError) as info:
            load(source)
        message = str(info.value)
        assert message.startswith(f"{name} holds a TemperatureScaling")
        assert "fitted attribute 'temperature_' is missing" in message
        assert "\n" not in message
    # held by a wrapper, and with a device this machine may lack: checked
    # on the CPU, and the saved device is kept
    wrapped = CalibratedClassifier(
        LogisticRegression(), calibrator=TemperatureScaling(device="cpu")
    ).fit(X, np.argmax(X, axis=1))
    wrapped.calibrated_classifiers_[0].calibrator.device = "cuda:7"
    again = load(dumps(wrapped))
    assert again.calibrated_classifiers_[0].calibrator.device == "cuda:7"
    del wrapped.calibrated_classifiers_[0].calibrator.temperature_
    with pytest.raises(ValueError, match="'temperature_' is missing"):
        load(dumps(wrapped))


@pytest.mark.parametrize("input", ["logits", "proba"])
def test_an_adapted_prior_shift_adapter_round_trips(input, tmp_path):
    """skcal.shift's types are trusted, and the load-time check reads the
    inner calibrator's input (the adapter has no ``input`` of its own)."""
    from skcal import TemperatureScaling
    from skcal.shift import PriorShiftAdapter

    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3), size=200)
    y = (P.cumsum(axis=1) < rng.uniform(size=(200, 1))).sum(axis=1)
    X = P if input == "proba" else np.log(P)
    ts = TemperatureScaling(input=input, device="cpu")
    adapter = PriorShiftAdapter(ts).fit(X, y).adapt(X[:50])
    path = tmp_path / "adapter.skops"
    dump(adapter, path)
    assert untrusted_types(path) == []
    again = load(path)
    np.testing.assert_array_equal(again.priors_, adapter.priors_)
    np.testing.assert_array_equal(again.predict_proba(X), adapter.predict_proba(X))
