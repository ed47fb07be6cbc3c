"""VQLocalCalibrator: Divide et Calibra (Barbera et al., arXiv:2605.21060)."""

import numpy as np
import pytest
import torch
from scipy.special import gammaln, log_softmax, softmax

from skcal import VQLocalCalibrator
from skcal._torch.kernels import CompositionalMap, vq_calibrated_proba
from skcal._torch.kernels._vq import codeword_counts, compositional_logits
from skcal.exceptions import CodebookWarning, MissingClassWarning
from skcal.utils._split import stratified_split
from skcal.utils._testing import make_region_miscalibrated_embeddings


@pytest.fixture(scope="module")
def data():
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        1200, 3, random_state=0
    )
    return X, y, coef, intercept


def _vq(**params):
    defaults = dict(n_slots=8, n_codewords=16, max_iter=5, random_state=0)
    return VQLocalCalibrator(**{**defaults, "device": "cpu", **params})


def _numpy_quantize(X, codebook, n_slots):
    S = X.reshape(len(X), n_slots, -1)
    d2 = ((S[:, :, None, :] - codebook[None, None]) ** 2).sum(-1)
    return d2.argmin(-1)


def _numpy_map(log_p, index, A, B, prior_logits, scales=None):
    """The compositional Dirichlet map, written out per sample."""
    n, C = log_p.shape
    out = np.empty((n, C))
    scales = np.ones(index.shape[1]) if scales is None else scales
    for i in range(n):
        M = sum(s * np.outer(A[k], B[k]) for k, s in zip(index[i], scales))
        alpha = np.logaddexp(0, M) + 1e-8  # softplus
        omega = alpha - 1 + np.eye(C)
        log_beta = gammaln(alpha).sum(0) - gammaln(alpha.sum(0))
        out[i] = omega.T @ log_p[i] + log_softmax(prior_logits) - log_beta
    return softmax(out, axis=1)


@pytest.mark.parametrize("learn_variance", [False, True])
def test_predictions_match_an_independent_numpy_reference(data, learn_variance, device):
    X, y, _, _ = data
    vq = _vq(learn_variance=learn_variance, max_iter=8, device=device).fit(X, y)
    index = _numpy_quantize(X, vq.codebook_, 8)
    np.testing.assert_array_equal(vq.quantize(X), index)
    q = vq.codebook_[index].reshape(len(X), -1)
    log_p = log_softmax(q @ vq.head_coef_.T + vq.head_intercept_, axis=1)
    scales = vq.slot_scales_ if learn_variance else None
    expected = _numpy_map(
        log_p, index, vq.receivers_, vq.senders_, vq.prior_logits_, scales
    )
    np.testing.assert_allclose(vq.predict_proba(X), expected, rtol=1e-9, atol=1e-12)
    if learn_variance:
        assert not np.allclose(vq.slot_scales_, 1.0)
    else:
        np.testing.assert_array_equal(vq.slot_scales_, 1.0)


def test_identity_at_initialisation(data, device):
    X, y, _, _ = data
    vq = _vq(max_iter=0, device=device).fit(X, y)
    assert vq.best_iter_ == (0, 0)
    q = vq.codebook_[vq.quantize(X)].reshape(len(X), -1)
    log_p = log_softmax(q @ vq.head_coef_.T + vq.head_intercept_, axis=1)
    # A = B = sqrt(softplus^-1(1) / w) make alpha = 1 exactly: the map is
    # softmax(log p + log pi), to rounding
    base = np.full((16, 3), np.sqrt(np.log(np.e - 1) / 8))
    exact = CompositionalMap(base, base, vq.prior_logits_, None, identity_shift=True)
    np.testing.assert_allclose(
        vq_calibrated_proba(vq.quantize(X), log_p, exact, "cpu"),
        softmax(log_p + log_softmax(vq.prior_logits_), axis=1),
        rtol=1e-12,
    )
    # the fitted initial state adds N(0, 1e-5^2) noise to A and B, which moves
    # alpha by ~1e-5 and the probabilities by a few 1e-6
    np.testing.assert_allclose(
        vq.predict_proba(X),
        softmax(log_p + log_softmax(vq.prior_logits_), axis=1),
        atol=5e-5,
    )
    # the prior starts near uniform: the map starts near the identity
    np.testing.assert_allclose(vq.predict_proba(X), np.exp(log_p), atol=0.02)


def test_parameter_count(data):
    X, y, _, _ = data
    vq = _vq().fit(X, y)
    K, C = 16, 3
    n_params = vq.receivers_.size + vq.senders_.size + vq.prior_logits_.size
    assert n_params == 2 * K * C + C
    assert vq.codebook_.shape == (16, 2)
    assert vq.codeword_usage_.sum() == len(X) * 8


def test_output_depends_only_on_codeword_counts(data):
    X, y, _, _ = data
    vq = _vq().fit(X, y)
    index = vq.quantize(X[:50])
    log_p = log_softmax(np.random.default_rng(0).normal(size=(50, 3)), axis=1)
    fitted = CompositionalMap(
        vq.receivers_, vq.senders_, vq.prior_logits_, None, identity_shift=True
    )
    perm = np.random.default_rng(0).permutation(8)
    same = vq_calibrated_proba(index[:, perm], log_p, fitted, "cpu")
    np.testing.assert_allclose(
        same, vq_calibrated_proba(index, log_p, fitted, "cpu"), rtol=1e-12
    )
    # per-slot scales break the symmetry
    scaled = CompositionalMap(
        vq.receivers_,
        vq.senders_,
        vq.prior_logits_,
        np.linspace(0.5, 1.5, 8),
        identity_shift=True,
    )
    a = vq_calibrated_proba(index, log_p, scaled, "cpu")
    b = vq_calibrated_proba(index[:, perm], log_p, scaled, "cpu")
    assert not np.allclose(a, b, rtol=1e-6, atol=0)


def test_equal_cells_get_equal_outputs(data, device):
    X, y, _, _ = data
    vq = _vq(device=device).fit(X, y)
    # the quantized embedding itself lies in the same cell as X
    X_q = vq.codebook_[vq.quantize(X)].reshape(len(X), -1)
    np.testing.assert_array_equal(vq.quantize(X_q), vq.quantize(X))
    np.testing.assert_array_equal(vq.predict_proba(X_q), vq.predict_proba(X))


def test_determinism_and_device(data, device):
    X, y, _, _ = data
    a = _vq(device=device).fit(X, y).predict_proba(X)
    b = _vq(device=device).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    c = _vq(device=device, random_state=1).fit(X, y).predict_proba(X)
    assert not np.allclose(a, c)


def test_variants(data, device):
    X, y, coef, intercept = data
    # VQ-NC: the quantized head alone
    nc = _vq(device=device, calibration="none").fit(X, y)
    q = nc.codebook_[nc.quantize(X)].reshape(len(X), -1)
    np.testing.assert_allclose(
        nc.predict_proba(X), softmax(q @ nc.head_coef_.T + nc.head_intercept_, axis=1)
    )
    assert nc.n_iter_[1] == 0
    # VQ-DC: W^T log p + b on the head
    dc = _vq(device=device, calibration="dirichlet").fit(X, y)
    q = dc.codebook_[dc.quantize(X)].reshape(len(X), -1)
    log_p = log_softmax(q @ dc.head_coef_.T + dc.head_intercept_, axis=1)
    np.testing.assert_allclose(
        dc.predict_proba(X),
        softmax(log_p @ dc.dirichlet_coef_ + dc.dirichlet_intercept_, axis=1),
        rtol=1e-10,
    )
    # VQ_frz: the backbone's head on the quantized embedding
    frz = _vq(
        device=device, head="frozen", coef=coef, intercept=intercept, calibration="none"
    )
    frz.fit(X, y)
    np.testing.assert_array_equal(frz.head_coef_, coef)
    q = frz.codebook_[frz.quantize(X)].reshape(len(X), -1)
    np.testing.assert_allclose(
        frz.predict_proba(X), softmax(q @ coef.T + intercept, axis=1), rtol=1e-10
    )
    with pytest.raises(ValueError, match="head='frozen' .* pass it as coef"):
        _vq(device=device, head="frozen").fit(X, y)
    # fixed codebooks do not move
    for mode in ("data", "normal"):
        fixed = _vq(device=device, codebook=mode).fit(X, y)
        init = _vq(device=device, codebook=mode, max_iter=0).fit(X, y)
        np.testing.assert_array_equal(fixed.codebook_, init.codebook_)
    ema = _vq(device=device).fit(X, y)
    assert not np.array_equal(
        ema.codebook_, _vq(device=device, max_iter=0).fit(X, y).codebook_
    )


def test_zero_ema_initialisation_kills_codewords():
    # the paper's N = m = 0: codewords unused by the first batch go to 0
    X, y, _, _, _ = make_region_miscalibrated_embeddings(1200, 3, random_state=0)
    X = X + 20.0  # far from the origin, where dead codewords end up
    with pytest.warns(CodebookWarning, match="used by no slot"):
        zeros = _vq(ema_init="zeros", n_codewords=64, batch_size=8).fit(X, y)
    assert (zeros.codeword_usage_ == 0).any()
    assert (np.abs(zeros.codebook_).sum(axis=1) == 0).any()
    robust = _vq(n_codewords=64, batch_size=8).fit(X, y)
    assert (robust.codeword_usage_ == 0).sum() < (zeros.codeword_usage_ == 0).sum()


def test_slot_width_must_divide_the_features(data):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="n_slots=5 must divide .* 16"):
        _vq(n_slots=5).fit(X, y)
    # more codewords than distinct slot vectors: the repeats are dead
    with pytest.warns(CodebookWarning, match="of 4000 codewords are used by no"):
        big = _vq(n_codewords=4000, n_slots=1, max_iter=1).fit(X, y)
    assert np.isfinite(big.predict_proba(X)).all()


def test_many_classes_chunked_map(monkeypatch):
    # 40 classes, the n x C x C map evaluated in blocks of 12 rows, in
    # training too; compare with the per-sample numpy reference and with the
    # fit whose batches fit in one block (column blocks: the test below)
    X, y, _, _, _ = make_region_miscalibrated_embeddings(
        2000, 40, n_features=16, random_state=2
    )
    one_block = _vq(n_slots=4, max_iter=2).fit(X, y)
    monkeypatch.setattr("skcal._torch.kernels._vq._BLOCK", 20_000)
    vq = _vq(n_slots=4, max_iter=2).fit(X, y)
    index = vq.quantize(X[:30])
    q = vq.codebook_[index].reshape(30, -1)
    log_p = log_softmax(q @ vq.head_coef_.T + vq.head_intercept_, axis=1)
    expected = _numpy_map(log_p, index, vq.receivers_, vq.senders_, vq.prior_logits_)
    np.testing.assert_allclose(vq.predict_proba(X[:30]), expected, rtol=1e-9)
    assert vq.n_iter_ == one_block.n_iter_
    np.testing.assert_allclose(vq.receivers_, one_block.receivers_, rtol=1e-9)
    np.testing.assert_allclose(
        vq.predict_proba(X), one_block.predict_proba(X), rtol=1e-9
    )


def _dense_map(log_p, counts, A, B, prior_logits, identity_shift=True):
    """The paper's compositional map by autograd, every C x C matrix stored."""
    M = torch.einsum("nk,kc,kj->ncj", counts, A, B)
    alpha = torch.logaddexp(M, torch.zeros((), dtype=M.dtype)) + 1e-8
    omega = alpha - 1.0
    linear = (omega * log_p[:, :, None]).sum(dim=1)
    if identity_shift:
        linear = linear + log_p
    log_beta = torch.lgamma(alpha).sum(dim=1) - torch.lgamma(alpha.sum(dim=1))
    return linear + torch.log_softmax(prior_logits, dim=0) - log_beta


@pytest.mark.parametrize(
    "block",
    [
        1 << 22,  # one block: M and alpha kept for the backward pass
        100_000,  # blocks of 62 whole rows
        1000,  # blocks of one row and 25 of the 40 columns
        600,  # one row's 40 x 16 receiver products exceed the block
    ],
)
@pytest.mark.parametrize("identity_shift", [True, False])
def test_blocked_map_and_its_gradients_match_the_dense_formula(
    monkeypatch, block, identity_shift
):
    monkeypatch.setattr("skcal._torch.kernels._vq._BLOCK", block)
    gen = torch.Generator().manual_seed(0)
    # several row blocks need more rows than one block holds
    n, C, K, w = 70 if block == 100_000 else 20, 40, 16, 6

    def leaf(*shape, scale=1.0, shift=0.0):
        x = shift + scale * torch.randn(*shape, generator=gen, dtype=torch.float64)
        return x.requires_grad_(True)

    log_p = leaf(n, C, scale=3.0)
    index = torch.randint(K, (n, w), generator=gen)
    scales = leaf(w, scale=0.3, shift=1.0)
    A, B = leaf(K, C, scale=0.4), leaf(K, C, scale=0.4)
    prior = leaf(C)
    y = torch.randint(C, (n,), generator=gen)
    inputs = (log_p, scales, A, B, prior)
    results = []
    for fn in (compositional_logits, _dense_map):
        lp = torch.log_softmax(log_p, dim=1)
        counts = codeword_counts(index, K, scales)
        out = fn(lp, counts, A, B, prior, identity_shift=identity_shift)
        loss = torch.nn.functional.cross_entropy(out, y)
        results.append([out, *torch.autograd.grad(loss, inputs)])
    for got, expected in zip(*results):
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    # the map is a function of the counts: without gradients it is the same
    with torch.no_grad():
        counts = codeword_counts(index, K)
        torch.testing.assert_close(
            compositional_logits(log_p, counts, A, B, prior),
            _dense_map(log_p, counts, A, B, prior),
            rtol=1e-10,
            atol=1e-12,
        )


def test_blocked_map_gradient_by_finite_differences(monkeypatch):
    monkeypatch.setattr("skcal._torch.kernels._vq._BLOCK", 12)  # 1 row, 3 columns
    gen = torch.Generator().manual_seed(1)
    n, C, K = 3, 4, 5
    args = [
        torch.log_softmax(torch.randn(n, C, generator=gen, dtype=torch.float64), 1),
        torch.rand(n, K, generator=gen, dtype=torch.float64) * 3,
        0.5 * torch.randn(K, C, generator=gen, dtype=torch.float64),
        0.5 * torch.randn(K, C, generator=gen, dtype=torch.float64),
        torch.randn(C, generator=gen, dtype=torch.float64),
    ]
    for a in args:
        a.requires_grad_(True)
    assert torch.autograd.gradcheck(compositional_logits, args)


@pytest.mark.parametrize("head", ["frozen", "train"])
def test_a_class_missing_from_y_keeps_its_row_of_the_head(head):
    # issue 15: with a frozen head of C rows and integer labels in range(C)
    # that lack a class, label j is row j: C columns, not C - 1
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        3000, 6, random_state=0
    )
    fit, test = slice(0, 1500), slice(1500, None)
    for missing in (5, 2):  # the last class, or one in the middle
        keep = y[fit] != missing
        # (a new head needs more epochs to be accurate: only the layout here)
        epochs = 5 if head == "frozen" else 1
        vq = _vq(head=head, coef=coef, intercept=intercept, max_iter=epochs)
        with pytest.warns(MissingClassWarning, match=rf"\[{missing}\]"):
            vq.fit(X[fit][keep], y[fit][keep])
        np.testing.assert_array_equal(vq.classes_, np.arange(6))
        proba = vq.predict_proba(X[test])
        assert proba.shape == (1500, 6)
        assert np.isfinite(proba).all()
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        assert vq.score(X[test], y[test]) > -np.inf
        if head == "frozen":
            # the other classes are still predicted about as well as by the
            # frozen head itself (quantization costs a few points)
            other = y[test] != missing
            head_acc = np.mean(
                (X[test] @ coef.T + intercept).argmax(axis=1)[other] == y[test][other]
            )
            acc = np.mean(vq.predict(X[test])[other] == y[test][other])
            assert acc > 0.8 * head_acc


def test_many_classes_on_the_cpu_are_refused_up_front():
    """The region map costs C^2 K per sample: hours at 1,000 classes."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 8))
    coef, intercept = rng.normal(size=(1000, 8)), np.zeros(1000)
    y = rng.integers(0, 1000, 50)
    est = VQLocalCalibrator(
        coef=coef, intercept=intercept, n_slots=2, device="cpu", max_iter=1
    )
    with pytest.raises(ValueError, match="would take hours.*device='cuda'"):
        est.fit(X, y)


@pytest.mark.filterwarnings("ignore::skcal.exceptions.AccuracyDropWarning")
def test_finetuned_head_starts_from_the_backbone_head_and_learns(data, device):
    # issue 18: head="finetune" trains the backbone's head further on the
    # quantized embeddings instead of a new head from a random start
    X, y, coef, intercept = data
    fit, test = slice(0, 800), slice(800, None)
    # an under-confident backbone head: the right direction, a fifth of the scale
    weak = dict(coef=0.2 * coef, intercept=0.2 * intercept)
    params = dict(calibration="none", max_iter=60, device=device)
    start = _vq(head="finetune", **weak, **{**params, "max_iter": 0})
    start.fit(X[fit], y[fit])
    np.testing.assert_array_equal(start.head_coef_, weak["coef"])
    np.testing.assert_array_equal(start.head_intercept_, weak["intercept"])
    frozen = _vq(head="frozen", **weak, **params).fit(X[fit], y[fit])
    tuned = _vq(head="finetune", **weak, **params).fit(X[fit], y[fit])
    assert tuned.best_iter_[0] > 0
    assert not np.allclose(tuned.head_coef_, weak["coef"])

    # an independent check of the gain: held-out log loss of the quantized
    # embeddings read by each head (numpy, from the fitted codebooks)
    def held_out_nll(vq):
        q = vq.codebook_[_numpy_quantize(X[test], vq.codebook_, 8)]
        z = q.reshape(len(q), -1) @ vq.head_coef_.T + vq.head_intercept_
        return -np.mean(log_softmax(z, axis=1)[np.arange(len(z)), y[test]])

    assert held_out_nll(tuned) < held_out_nll(frozen) - 0.03
    with pytest.raises(ValueError, match="head='finetune' .* pass it as coef"):
        _vq(device=device, head="finetune").fit(X, y)


@pytest.mark.filterwarnings("ignore::skcal.exceptions.AccuracyDropWarning")
@pytest.mark.parametrize("backbone", ["good", "bad"])
def test_auto_head_keeps_the_candidate_of_lower_validation_loss(data, backbone, device):
    # issue 36: with coef, head="auto" fits stage 1 with the fine-tuned and
    # with a new head on the same split and seed, and keeps the one whose
    # held-out cross-entropy (early stopping's) is lower
    X, y, coef, intercept = data
    if backbone == "bad":  # points away from the classes: fine-tuning is
        coef, intercept = -3.0 * coef, -3.0 * intercept  # far from a new head
    params = dict(coef=coef, intercept=intercept, device=device)
    fits = {mode: _vq(head=mode, **params).fit(X, y) for mode in ("finetune", "train")}
    auto = _vq(**params).fit(X, y)
    expected = {"good": "finetune", "bad": "train"}[backbone]
    assert auto.head_mode_ == expected
    chosen = fits[expected]
    for name in ("codebook_", "head_coef_", "head_intercept_", "receivers_"):
        np.testing.assert_array_equal(getattr(auto, name), getattr(chosen, name))
    assert auto.n_iter_ == chosen.n_iter_ and auto.best_iter_ == chosen.best_iter_
    np.testing.assert_array_equal(auto.predict_proba(X), chosen.predict_proba(X))
    # the losses are those of the separate fits, and the kept one is the min
    losses = auto.head_validation_losses_
    assert set(losses) == {"finetune", "train"}
    for mode, fit in fits.items():
        assert losses[mode] == fit.head_validation_losses_[mode]
    assert losses[expected] == min(losses.values())

    # an independent check of the losses: the cross-entropy, in numpy, of
    # each fitted codebook and head on the validation rows the fit drew
    # (random_state=0 seeds the split first)
    split_seed = np.random.RandomState(0).randint(np.iinfo(np.int32).max, size=3)[0]
    val, _ = stratified_split(y, 0.1, len(X), split_seed, "VQLocalCalibrator")
    for mode, fit in fits.items():
        q = fit.codebook_[_numpy_quantize(X[val], fit.codebook_, 8)]
        z = q.reshape(len(q), -1) @ fit.head_coef_.T + fit.head_intercept_
        nll = -np.mean(log_softmax(z, axis=1)[np.arange(len(z)), y[val]])
        np.testing.assert_allclose(losses[mode], nll, rtol=1e-10)


def test_auto_head_without_coef_trains_a_new_head(data, capsys):
    X, y, _, _ = data
    auto = _vq(max_iter=2).fit(X, y)
    train = _vq(max_iter=2, head="train").fit(X, y)
    assert auto.head_mode_ == "train"
    assert list(auto.head_validation_losses_) == ["train"]
    np.testing.assert_array_equal(auto.head_coef_, train.head_coef_)
    assert capsys.readouterr().err == ""


@pytest.mark.filterwarnings("ignore::skcal.exceptions.AccuracyDropWarning")
def test_auto_head_reports_its_choice_in_verbose_output(data, capsys):
    X, y, coef, intercept = data
    auto = _vq(max_iter=2, coef=coef, intercept=intercept, verbose=1).fit(X, y)
    err = capsys.readouterr().err
    kept = auto.head_mode_
    assert f"head='auto' kept head={kept!r}" in err
    # one stage-1 bar per candidate head
    assert err.count("VQ stage 1: codebook and head:   0%") == 2
