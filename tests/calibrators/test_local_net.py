"""LocalNetCalibrator and its kernels (Barbera et al., AISTATS 2026).

C. Barbera, L. Perini, G. De Toni, A. Passerini, A. Pugnana. "Multiclass
Local Calibration With the Jensen-Shannon Distance". AISTATS 2026,
arXiv:2510.26566.
"""

import numpy as np
import pytest
import torch
from _local_data import region_data
from scipy.spatial.distance import jensenshannon

from skcal import LocalNetCalibrator
from skcal._torch.kernels._local_net import batch_terms, js_distance, kernel_estimate
from skcal.utils._testing import make_region_miscalibrated_embeddings, softmax_rows


@pytest.fixture(scope="module")
def data():
    return region_data()


def test_local_net_starts_at_the_head(data):
    X, y, coef, intercept = data
    est = LocalNetCalibrator(
        coef=coef, intercept=intercept, max_iter=0, random_state=0, device="cpu"
    ).fit(X, y)
    assert est.best_iter_ == 0
    head = softmax_rows(X @ coef.T + intercept)
    np.testing.assert_allclose(est.predict_proba(X), head, atol=0.02)
    np.testing.assert_allclose(est.embed(X), est.space_.transform(X), atol=0.05)


def test_local_net_affine_terms_are_vectors_beyond_ten_classes():
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        600, 12, n_features=20, random_state=0
    )
    est = LocalNetCalibrator(
        coef=coef, intercept=intercept, max_iter=1, random_state=0, device="cpu"
    ).fit(X, y)
    assert est.network_["a_cls"].shape == (12,)
    assert est.network_["a_sim"].shape == (est.space_.n_components_,)
    small = LocalNetCalibrator(
        coef=coef[:3], intercept=intercept[:3], max_iter=1, device="cpu"
    ).fit(X[y < 3], y[y < 3])
    assert small.network_["a_cls"].shape == (1,)


def test_js_distance_matches_scipy():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4), size=20)
    q = rng.dirichlet(np.ones(4), size=20)
    ours = js_distance(torch.as_tensor(p), torch.as_tensor(q)).numpy()
    pc, qc = np.clip(p, 1e-4, 1 - 1e-4), np.clip(q, 1e-4, 1 - 1e-4)
    ref = np.array(
        [
            [
                max(
                    jensenshannon([pc[i, k], 1 - pc[i, k]], [qc[i, k], 1 - qc[i, k]])
                    ** 2,
                    1e-4,
                )
                ** 0.5
                for k in range(4)
            ]
            for i in range(20)
        ]
    ).mean(axis=1)
    np.testing.assert_allclose(ours, ref, rtol=1e-9)


def test_kernel_estimate_is_leave_one_out():
    rng = np.random.default_rng(1)
    e = rng.normal(size=(30, 5))
    y = rng.integers(0, 3, size=30)
    w = rng.uniform(0.5, 2.0, size=30)
    w[4] = 0.0  # a zero-weight row is nobody's neighbour
    onehot = np.eye(3)[y]
    ours, has_nb = kernel_estimate(
        torch.as_tensor(e), torch.as_tensor(onehot), torch.as_tensor(w), 2.0
    )
    K = np.exp(-((e[:, None] - e[None]) ** 2).sum(-1) / 8.0) * w[None, :]
    np.fill_diagonal(K, 0.0)
    expected = K @ onehot / K.sum(1, keepdims=True)
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-10)
    assert has_nb.all()
    # a one-row batch, or rows whose only other rows weigh 0, have no
    # neighbour: no estimate (in particular not their own label)
    p1, nb1 = kernel_estimate(
        torch.as_tensor(e[:1]), torch.as_tensor(onehot[:1]), torch.ones(1), 2.0
    )
    assert not nb1.any() and (p1 == 0).all()
    p2, nb2 = kernel_estimate(
        torch.as_tensor(e[:3]),
        torch.as_tensor(onehot[:3]),
        torch.as_tensor([1.0, 0.0, 0.0]),
        2.0,
    )
    np.testing.assert_array_equal(nb2.numpy(), [False, True, True])
    np.testing.assert_allclose(p2[1:].numpy(), onehot[[0, 0]])


@pytest.mark.parametrize(
    "absent, layers", [(None, (5,)), (1, (5,)), (None, ()), (1, (5, 3))]
)
def test_local_net_batch_loss_matches_numpy(absent, layers):
    # with an absent class, softmax and JS run over the present classes; the
    # hidden layers (none, the paper's one, or two) feed each other
    rng = np.random.default_rng(2)
    n, d, m, C = 40, 6, 4, 4
    params, width = {}, d
    for k, size in enumerate(layers, start=1):
        params[f"W{k}"] = rng.normal(size=(width, size))
        params[f"b{k}"] = rng.normal(size=size)
        width = size
    params |= {
        "Ws": rng.normal(size=(width, m)),
        "bs": rng.normal(size=m),
        "a_sim": rng.normal(size=1),
        "b_sim": rng.normal(size=1),
        "Wc": rng.normal(size=(width, C)),
        "bc": rng.normal(size=C),
        "a_cls": rng.normal(size=C),
        "b_cls": rng.normal(size=C),
    }
    h, z, pi = rng.normal(size=(n, d)), rng.normal(size=(n, C)), rng.normal(size=(n, m))
    present = np.arange(C) != absent
    y = rng.choice(np.flatnonzero(present), size=n)
    w = rng.uniform(0.2, 1.5, size=n)
    t = torch.as_tensor
    js, ce, total = batch_terms(
        {k: t(v) for k, v in params.items()},
        t(h),
        t(z),
        t(pi),
        t(y),
        t(np.eye(C)[y]),
        t(w),
        1.5,
        present=None if absent is None else t(present),
    )
    u = h
    for k in range(1, len(layers) + 1):
        u = np.maximum(u @ params[f"W{k}"] + params[f"b{k}"], 0)
    e = u @ params["Ws"] + params["bs"] + params["a_sim"] * pi + params["b_sim"]
    logits = u @ params["Wc"] + params["bc"] + params["a_cls"] * z + params["b_cls"]
    p_net = softmax_rows(logits[:, present])
    K = np.exp(-((e[:, None] - e[None]) ** 2).sum(-1) / (2 * 1.5**2)) * w[None, :]
    np.fill_diagonal(K, 0.0)
    p_ker = K @ np.eye(C)[y] / K.sum(1, keepdims=True)
    a = np.clip(p_net, 1e-4, 1 - 1e-4)
    b = np.clip(p_ker[:, present], 1e-4, 1 - 1e-4)
    js_ref = np.array(
        [
            np.mean(
                [
                    max(
                        jensenshannon([a[i, k], 1 - a[i, k]], [b[i, k], 1 - b[i, k]])
                        ** 2,
                        1e-4,
                    )
                    ** 0.5
                    for k in range(a.shape[1])
                ]
            )
            for i in range(n)
        ]
    )
    ce_ref = -np.log(np.maximum(p_ker[np.arange(n), y], 1e-6))
    assert float(js) == pytest.approx(w @ js_ref, rel=1e-9)
    assert float(ce) == pytest.approx(w @ ce_ref, rel=1e-9)
    assert float(total) == pytest.approx(w.sum())
