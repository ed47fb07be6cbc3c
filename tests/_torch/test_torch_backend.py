"""The private torch back end: devices, conversion, randomness, solvers."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from skcal._torch import (
    TrainingOptions,
    check_device,
    make_generator,
    minimize_lbfgs,
    newton_root_1d,
    resolve_device,
    to_numpy,
    to_tensor,
)


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device(None).type == expected
    for bad in ("gpu", "cuda:x", "CPU", 3):
        with pytest.raises(ValueError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
            resolve_device(bad)
    if not torch.cuda.is_available():
        for name in ("cuda", "cuda:0"):
            with pytest.raises(ValueError, match="CUDA is not available"):
                resolve_device(name)
    else:
        n = torch.cuda.device_count()
        with pytest.raises(ValueError, match="CUDA device"):
            resolve_device(f"cuda:{n}")


def test_check_device_validates_and_names_the_type():
    assert check_device("cpu") == "cpu"
    assert check_device(torch.device("cpu")) == "cpu"
    assert check_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
        check_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            check_device("cuda")


def test_training_options_are_frozen_and_resolve_their_device():
    options = TrainingOptions(
        learning_rate=0.1, max_iter=5, n_iter_no_change=2, seed=0, device="cpu"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_iter = 0
    assert options.replace(max_iter=0).max_iter == 0 and options.max_iter == 5
    assert options.resolved().device == torch.device("cpu")
    assert options.batch_size is None and options.weight_decay == 0.0
    with pytest.raises(ValueError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
        options.replace(device="gpu").resolved()


def test_kernels_take_a_device_string_and_resolve_it():
    # the same fit from "cpu" and from a resolved device; an unknown device is
    # the clear error of resolve_device, raised by the kernel itself
    from skcal._torch.kernels import fit_pts

    rng = np.random.default_rng(0)
    logits, y = rng.normal(size=(40, 3)), rng.integers(0, 3, 40)
    args = (logits, y, np.ones(40))
    kw = dict(k=3, hidden=(4,), initial_temperature=1.0)
    kw |= dict(train_idx=np.arange(30), val_idx=np.arange(30, 40))
    options = TrainingOptions(
        learning_rate=0.01, max_iter=3, n_iter_no_change=2, seed=0, batch_size=8
    )
    by_name = fit_pts(*args, **kw, options=options.replace(device="cpu"))
    resolved = fit_pts(*args, **kw, options=options.replace(device=torch.device("cpu")))
    for a, b in zip(by_name.coefs, resolved.coefs):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
        fit_pts(*args, **kw, options=options.replace(device="tpu"))


def test_kernel_results_are_frozen():
    from skcal._torch import OptimResult
    from skcal._torch.kernels import fit_affine_softmax, rff_group_sums

    result = OptimResult(x=1.0, n_iter=1, converged=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.x = 2.0
    rng = np.random.default_rng(0)
    logits, y = rng.normal(size=(30, 3)), rng.integers(0, 3, 30)
    fit = fit_affine_softmax(
        logits, y, np.ones(30), device="cpu", tol=1e-6, max_iter=50
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        fit.coef = None
    sums = rff_group_sums(
        rng.normal(size=(30, 2)),
        rng.normal(size=(30, 3)),
        np.ones(30),
        rng.integers(0, 2, (30, 3)),
        rng.normal(size=(2, 4)),
        2,
    )
    assert sums.S.shape == sums.T.shape == (3, 2, 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sums.S = None


def test_conversion_round_trip(device):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = to_tensor(a, device)
    assert t.device.type == device and t.dtype == torch.float32
    back = to_numpy(t * 2)
    np.testing.assert_array_equal(back, 2 * a)
    assert isinstance(back, np.ndarray)
    ro = a.copy()
    ro.flags.writeable = False
    assert to_tensor(ro[:, ::2], device, torch.float64).shape == (3, 2)


def test_generator_is_local_and_reproducible(device):
    state = torch.random.get_rng_state()
    a = torch.rand(5, generator=make_generator(7, device), device=device)
    b = torch.rand(5, generator=make_generator(7, device), device=device)
    assert torch.equal(a, b)
    assert torch.equal(state, torch.random.get_rng_state())


def test_newton_root_1d_finds_roots_and_bounds():
    # g(x) = log(x) - log(3): increasing, root 3
    res = newton_root_1d(
        lambda x: (math.log(x) - math.log(3.0), 1.0 / x), 1.0, 1e-6, 1e6
    )
    assert res.converged and res.at_bound is None
    assert res.x == pytest.approx(3.0, rel=1e-12)
    # a root below the interval: g > 0 everywhere in it
    res = newton_root_1d(lambda x: (x + 1.0, 1.0), 1.0, 0.5, 10.0)
    assert res.at_bound == "lower" and res.x == 0.5
    # a root above: g < 0 everywhere, flattening out (Newton alone would crawl)
    res = newton_root_1d(lambda x: (-math.exp(-x), math.exp(-x)), 1.0, 1e-3, 50.0)
    assert res.at_bound == "upper" and res.x == 50.0
    # a far root where Newton steps are poor: bisection safeguard kicks in
    res = newton_root_1d(
        lambda x: (math.atan(x - 1e4), 1 / (1 + (x - 1e4) ** 2)), 1.0, 1e-3, 1e7
    )
    assert res.converged and res.x == pytest.approx(1e4, rel=1e-10)
    res = newton_root_1d(
        lambda x: (math.atan(x - 1e4), 1 / (1 + (x - 1e4) ** 2)),
        1.0,
        1e-3,
        1e7,
        max_iter=4,
    )
    assert not res.converged


def test_minimize_lbfgs_on_a_quadratic(device):
    A = torch.tensor([[3.0, 1.0], [1.0, 2.0]], dtype=torch.float64, device=device)
    b = torch.tensor([1.0, -1.0], dtype=torch.float64, device=device)
    x = torch.zeros(2, dtype=torch.float64, device=device, requires_grad=True)
    res = minimize_lbfgs(lambda: 0.5 * x @ A @ x - b @ x, [x], tol=1e-7)
    assert res.converged and res.grad_max <= 1e-7
    np.testing.assert_allclose(
        to_numpy(x), np.linalg.solve(A.cpu().numpy(), b.cpu().numpy())
    )
    y = torch.zeros(2, dtype=torch.float64, device=device, requires_grad=True)
    rosen = lambda: (1 - y[0]) ** 2 + 100 * (y[1] - y[0] ** 2) ** 2  # noqa: E731
    assert not minimize_lbfgs(rosen, [y], max_iter=2, tol=1e-10).converged
    # a tolerance below float64 resolution: reported as not converged, and the
    # solver stops once it stalls instead of burning the whole budget
    z = torch.zeros(2, dtype=torch.float64, device=device, requires_grad=True)
    res = minimize_lbfgs(lambda: 0.5 * z @ A @ z - b @ z, [z], tol=1e-14, max_iter=500)
    assert not res.converged and res.n_iter < 100


def test_softmax_inplace_matches_scipy():
    from scipy.special import log_softmax, softmax

    from skcal._torch.kernels import softmax_inplace

    rng = np.random.default_rng(0)
    a = rng.normal(size=(50, 7)) * np.array([[1.0], [1e4]] * 25)  # huge rows too
    expected, expected_log = softmax(a, axis=1), log_softmax(a, axis=1)
    b, c = a.copy(), a.copy()
    assert softmax_inplace(b) is b
    np.testing.assert_allclose(b, expected, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(softmax_inplace(c, log=True), expected_log, rtol=1e-12)
    assert softmax_inplace(np.empty((0, 3))).shape == (0, 3)


def test_softmax_inplace_over_several_blocks_matches_scipy():
    from scipy.special import log_softmax, softmax

    from skcal._torch.kernels import softmax_inplace
    from skcal._torch.kernels._softmax import _BLOCK_ENTRIES

    rng = np.random.default_rng(1)
    n = 2 * (_BLOCK_ENTRIES // 7) + 123  # two full blocks and a partial one
    a = rng.normal(size=(n, 7)) * rng.choice([1.0, 50.0, 1e4], size=(n, 1))
    np.testing.assert_allclose(
        softmax_inplace(a.copy()), softmax(a, axis=1), rtol=1e-12, atol=1e-300
    )
    np.testing.assert_allclose(
        softmax_inplace(a.copy(), log=True),
        log_softmax(a, axis=1),
        rtol=1e-12,
        atol=1e-12,
    )


@pytest.mark.parametrize("n_classes", [1, 3, 40])
def test_affine_rows_matches_the_formulas(n_classes):
    from scipy.special import log_softmax, softmax

    from skcal._torch.kernels import affine_rows
    from skcal._torch.kernels._softmax import _BLOCK_ENTRIES

    rng = np.random.default_rng(n_classes)
    n = 2 * (_BLOCK_ENTRIES // n_classes) + 57  # several blocks
    a = rng.normal(size=(n, n_classes)) * 5
    W, b = rng.normal(size=(n_classes, n_classes)), rng.normal(size=n_classes)
    w = rng.normal(size=n_classes)
    lin, log_lin = a @ W.T + b, log_softmax(a, axis=1) @ W.T + b
    a_ro = a.copy()
    a_ro.setflags(write=False)  # read, never written
    cases = [
        ({}, W, lin),
        ({"softmax": True}, W, softmax(lin, axis=1)),
        ({"log_softmax": True}, W, log_lin),
        ({"log_softmax": True, "softmax": True}, W, softmax(log_lin, axis=1)),
        ({}, w, a * w + b),
        ({"softmax": True}, w, softmax(a * w + b, axis=1)),
    ]
    P = softmax(a, axis=1)
    log_cases = [
        ({"log": True, "softmax": True}, W, softmax(np.log(P) @ W.T + b, axis=1)),
        ({"log": True}, w, np.log(P) * w + b),
    ]
    for kwargs, coef, expected in cases:
        scale = np.abs(expected).max()
        got = affine_rows(a_ro, coef, b, **kwargs)
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12 * scale)
        inplace = a.copy()
        assert affine_rows(inplace, coef, b, out=inplace, **kwargs) is inplace
        np.testing.assert_array_equal(inplace, got)  # same operations
    for kwargs, coef, expected in log_cases:
        got = affine_rows(P, coef, b, **kwargs)
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
        inplace = P.copy()
        assert affine_rows(inplace, coef, b, out=inplace, **kwargs) is inplace
        np.testing.assert_array_equal(inplace, got)
    with pytest.raises(ValueError, match="not both"):
        affine_rows(P, W, b, log=True, log_softmax=True)
    assert affine_rows(np.empty((0, 3)), np.eye(3), np.zeros(3)).shape == (0, 3)


def test_affine_rows_without_a_map_is_the_affine_formula():
    from skcal._torch.kernels import affine_rows

    rng = np.random.default_rng(0)
    a, coef, b = rng.normal(size=(57, 6)), rng.normal(size=(4, 6)), rng.normal(size=4)
    expected = a @ coef.T + b
    a_ro = a.copy()
    a_ro.setflags(write=False)  # read, never written
    for x in (a, a_ro, np.asfortranarray(a), a.astype(np.float32)):
        got = affine_rows(x, coef, b)
        assert got.dtype == np.float64 and got.flags.c_contiguous
        tol = 1e-6 if x.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, x.astype(np.float64) @ coef.T + b, rtol=tol)
    np.testing.assert_array_equal(a, a_ro)  # the input is not modified
    out = np.empty((57, 4))
    assert affine_rows(a, coef, b, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    # a read-only coef (a loaded model), no rows, no features
    coef_ro = coef.copy()
    coef_ro.setflags(write=False)
    np.testing.assert_allclose(affine_rows(a, coef_ro, b), expected, rtol=1e-12)
    assert affine_rows(np.empty((0, 6)), coef, b).shape == (0, 4)
    np.testing.assert_array_equal(
        affine_rows(np.empty((3, 0)), np.empty((4, 0)), b), [b] * 3
    )


def test_train_adam_restores_the_best_epoch():
    from skcal._torch import train_adam

    # training pushes x to 3; the validation loss prefers x = 1, so the best
    # epoch is early and must be restored (as a copy, not an alias)
    x = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    history = []

    def val():
        v = float((x - 1.0) ** 2)
        history.append((v, float(x)))
        return v

    gen = torch.Generator().manual_seed(0)
    options = TrainingOptions(
        learning_rate=0.1,
        max_iter=200,
        n_iter_no_change=5,
        seed=0,
        batch_size=4,
        device=torch.device("cpu"),
    )
    run = train_adam(
        lambda idx: ((x - 3.0) ** 2).sum(),
        val,
        [x],
        n_samples=4,
        options=options,
        generator=gen,
    )
    assert run.n_epochs < 200 and run.best_epoch < run.n_epochs
    best_value, best_x = min(history)
    assert run.best_loss == best_value
    assert run.loss_curve == [v for v, _ in history]
    assert run.loss_curve[run.best_epoch] == best_value
    assert float(x.detach()) == best_x


def test_minimize_adam_patience_tol_and_restore():
    from skcal._torch import minimize_adam

    # a loss whose values are scripted: the best value comes at epoch 3,
    # later values only improve by less than tol, so n_iter_no_change runs out and
    # the parameters of the best epoch (not the last) are restored
    x = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    scripted = [5.0, 4.0, 3.0, 1.0, 1.5, 0.99999, 2.0, 1.2, 3.0, 3.0, 0.5]
    seen_x = []

    def loss():
        seen_x.append(float(x.detach()))
        value = scripted[len(seen_x) - 1]
        # Adam steps by ~lr whatever the gradient's size: x moves every epoch
        return value + 1e-9 * x.sum()

    run = minimize_adam(loss, [x], options=_options(100, 0.1, 4), tol=1e-3)
    best_epoch, n_steps, curve = run.best_epoch, run.n_epochs, run.loss_curve
    # epoch 3 (1.0) is the last drop larger than tol; epochs 4-7 wait, so
    # training stops after evaluating epoch 7 and never sees the 0.5; the
    # kept state is epoch 5's (0.99999, a drop smaller than tol)
    assert len(curve) == 8 and n_steps == 7
    assert curve == pytest.approx(scripted[:8], abs=1e-6)
    assert best_epoch == 5
    assert float(x.detach()) == seen_x[5] != seen_x[7]


def _options(max_iter, learning_rate, n_iter_no_change, **more):
    return TrainingOptions(
        learning_rate=learning_rate,
        max_iter=max_iter,
        n_iter_no_change=n_iter_no_change,
        seed=0,
        device="cpu",
        **more,
    )


def _scripted(values, params, seen):
    """A loss of value ``values[k]`` at its k-th call, of gradient 1 in every entry.

    ``(p - p.detach())`` is exactly 0 with gradient 1, so the value is the
    script's, whatever rounding does to the trajectory, and every Adam step
    moves every entry; ``seen`` records the parameters at each call.
    """

    def loss(*_):
        seen.append([p.detach().clone() for p in params])
        value = values[len(seen) - 1]
        return value + sum((p - p.detach()).sum() for p in params)

    return loss


def test_minimize_adam_restores_the_scripted_best_epoch_in_every_tensor():
    # the restore itself, independent of rounding: the scripted best epoch 3
    # is neither the first nor the last, and a snapshot that aliased the live
    # tensors (calibench's shallow state_dict().copy()) or no restore at all
    # would leave the last epoch's values
    from skcal._torch import minimize_adam

    params = [
        torch.zeros(3, dtype=torch.float64, requires_grad=True),
        torch.ones(2, 2, dtype=torch.float64, requires_grad=True),
    ]
    script = [5.0, 4.0, 3.0, 1.0, 2.0, 1.5, 1.25, 9.0]
    seen = []
    run = minimize_adam(
        _scripted(script, params, seen), params, options=_options(50, 0.1, 3)
    )
    best_epoch, n_steps, curve = run.best_epoch, run.n_epochs, run.loss_curve
    assert run.best_loss == 1.0
    # epochs 4-6 do not improve on epoch 3: stop after evaluating epoch 6
    assert (best_epoch, n_steps) == (3, 6)
    assert curve == script[:7]
    assert len(seen) == 7
    for p, best, last in zip(params, seen[3], seen[-1]):
        assert torch.equal(p.detach(), best)
        assert not torch.equal(best, last)


def test_train_adam_restores_the_scripted_best_epoch_and_buffers():
    # the same with a scripted validation loss, over mini-batches, and with a
    # buffer without gradient that the loss updates itself (an EMA codebook)
    from skcal._torch import train_adam

    w = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    buffer = torch.zeros(4, dtype=torch.float64)
    params = [w, buffer]

    def loss_fn(idx):
        with torch.no_grad():
            buffer.add_(1.0)
        return (w - w.detach()).sum()

    script = [5.0, 4.0, 2.0, 3.0, 1.5, 2.0, 1.5, 1.75]
    seen = []
    run = train_adam(
        loss_fn,
        _scripted(script, [w, buffer], seen),
        params,
        n_samples=4,
        options=_options(50, 0.1, 3, batch_size=2),
        generator=torch.Generator().manual_seed(0),
    )
    # call 0 is before training; epochs 5-7 do not improve strictly on 1.5
    assert (run.best_epoch, run.n_epochs, run.best_loss) == (4, 7, 1.5)
    assert run.loss_curve == script
    assert len(seen) == 8
    for p, best, last in zip(params, seen[4], seen[-1]):
        assert torch.equal(p.detach(), best)
        assert not torch.equal(best, last)
    assert torch.equal(buffer, torch.full((4,), 8.0, dtype=torch.float64))


def test_minimize_adam_reaches_a_quadratic_minimum():
    from skcal._torch import minimize_adam

    x = torch.tensor([4.0, -2.0], dtype=torch.float64, requires_grad=True)
    run = minimize_adam(
        lambda: ((x - torch.tensor([1.0, 0.5], dtype=torch.float64)) ** 2).sum(),
        [x],
        options=_options(3000, 0.05, 50),
        tol=1e-12,
    )
    np.testing.assert_allclose(x.detach().numpy(), [1.0, 0.5], atol=1e-3)
    assert run.loss_curve[run.best_epoch] == min(run.loss_curve) == run.best_loss


@pytest.mark.parametrize("n_classes", [2, 3, 50])
def test_top_two_matches_topk(device, n_classes):
    # several blocks of rows on the CPU, tied maxima and ties below them
    from skcal._torch.kernels._softmax import top_two

    rng = np.random.default_rng(3)
    n = 3 * (1 << 17) // n_classes + 7
    z = np.round(rng.normal(size=(n, n_classes)) * 3, 1)  # many ties
    z[0] = 1.0  # a constant row
    z[1, :2] = z[1].max() + 1.0  # a tied maximum
    t = torch.as_tensor(z, device=device)
    first, second = top_two(t)
    expected = torch.topk(t, 2, dim=1).values
    torch.testing.assert_close(first, expected[:, 0], rtol=0, atol=0)
    torch.testing.assert_close(second, expected[:, 1], rtol=0, atol=0)
    assert second[1] == first[1] and first[0] == second[0] == 1.0


def test_tempered_softmax_matches_scipy():
    from scipy.special import softmax

    from skcal._torch.kernels._softmax import tempered_softmax_into

    rng = np.random.default_rng(4)
    for n, c in [(0, 4), (5, 2), ((1 << 17) // 7 * 3 + 11, 7)]:  # 0, 1, 4 blocks
        a = rng.normal(size=(n, c)) * 30
        temperature = rng.uniform(0.05, 20, size=n)
        before = a.copy()
        got = tempered_softmax_into(a, a.max(axis=1), temperature, np.empty(a.shape))
        expected = softmax(a / temperature[:, None], axis=1)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-300)
        np.testing.assert_array_equal(a, before)
    a32 = a.astype(np.float32)  # float32 input is read as float64
    got = tempered_softmax_into(
        a32, a32.max(axis=1).astype(np.float64), temperature, np.empty(a.shape)
    )
    expected = softmax(a32.astype(np.float64) / temperature[:, None], axis=1)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-300)


def test_minimize_lbfgs_on_rosenbrock_and_a_convex_exponential():
    # a curved valley (the line search must bracket and zoom), from the
    # classical start; the minimiser is (1, 1)
    x = torch.tensor([-1.2, 1.0], dtype=torch.float64, requires_grad=True)
    res = minimize_lbfgs(
        lambda: (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2, [x], tol=1e-9
    )
    assert res.converged and res.grad_max <= 1e-9
    np.testing.assert_allclose(to_numpy(x), [1.0, 1.0], rtol=1e-7)
    # a smooth convex objective from a far start; the reference minimiser
    # solves 3 exp(3 v) - exp(-v) = c coordinate by coordinate (scipy's brentq)
    from scipy.optimize import brentq

    c = np.array([3.0, -2.0])
    expected = [
        brentq(
            lambda v, ci=ci: 3 * np.exp(3 * v) - np.exp(-v) - ci, -10, 10, xtol=1e-15
        )
        for ci in c
    ]
    a = torch.tensor([-5.0, 6.0], dtype=torch.float64, requires_grad=True)
    ct = torch.as_tensor(c)
    res = minimize_lbfgs(
        lambda: (torch.exp(3 * a) + torch.exp(-a)).sum() - ct @ a, [a], tol=1e-10
    )
    assert res.converged
    np.testing.assert_allclose(to_numpy(a), expected, rtol=1e-9)


def test_the_line_search_shortens_a_step_whose_loss_is_not_finite():
    from skcal._torch._optim import _FlatProblem, _strong_wolfe

    # (x - 3)^2, but inf beyond x = 4: a first trial step of 10 lands there
    x = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    inf = torch.tensor(math.inf, dtype=torch.float64)
    problem = _FlatProblem(lambda: torch.where(x > 4, inf, (x - 3) ** 2).sum(), [x])
    start = problem.flat_params()
    loss0, grad0 = problem.evaluate(start)
    direction = -grad0  # +6
    step, loss, grad = _strong_wolfe(
        problem.evaluate, start, loss0, float(grad0 @ direction), direction, 10.0
    )
    assert math.isfinite(loss) and loss < loss0
    assert 0 < step * 6 < 4  # inside the finite region
    # the strong Wolfe conditions
    assert loss <= loss0 + 1e-4 * step * float(grad0 @ direction)
    assert abs(float(grad @ direction)) <= 0.9 * abs(float(grad0 @ direction))


def test_fitting_an_affine_calibrator_does_not_import_dynamo():
    # torch.optim's optimisers import torch._dynamo (over a second) when
    # they are constructed; skcal's L-BFGS does not use them
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from skcal import VectorScaling\n"
        "from skcal.utils._testing import make_miscalibrated_logits\n"
        "X, y = make_miscalibrated_logits(200, 3, random_state=0)\n"
        "VectorScaling().fit(X, y)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("n_pairs", [1, 3, 7])
def test_lbfgs_compact_direction_is_the_two_loop_recursion(n_pairs):
    # the compact form's -H g equals the textbook two-loop recursion
    # (Nocedal & Wright, Algorithm 7.4) over the latest `size` pairs, here
    # written in numpy; 7 pairs into 5 slots reuse the oldest slots
    from skcal._torch._optim import LBFGSMemory as _Memory

    rng = np.random.default_rng(n_pairs)
    n, size = 12, 5
    B = rng.normal(size=(n, n))
    A = B @ B.T + n * np.eye(n)  # curvature pairs y = A s, s'y > 0
    pairs = [(s, A @ s) for s in rng.normal(size=(n_pairs, n))]
    memory = _Memory(size, torch.zeros(n, dtype=torch.float64))
    for s, y in pairs:
        memory.add(torch.as_tensor(s), torch.as_tensor(y))
    g = rng.normal(size=n)
    got = memory.direction(torch.as_tensor(g)).numpy()

    kept = pairs[-size:]
    q, alphas = g.copy(), []
    for s, y in reversed(kept):
        alpha = (s @ q) / (s @ y)
        alphas.append(alpha)
        q -= alpha * y
    s, y = kept[-1]
    r = (s @ y) / (y @ y) * q
    for (s, y), alpha in zip(kept, reversed(alphas)):
        r += (alpha - (y @ r) / (s @ y)) * s
    np.testing.assert_allclose(got, -r, rtol=1e-10, atol=1e-12)
    memory.clear()
    np.testing.assert_array_equal(memory.direction(torch.as_tensor(g)).numpy(), -g)


def test_minimize_lbfgs_stops_on_a_small_relative_decrease(device):
    # Rosenbrock from (-1.2, 1) with a gradient tolerance it only meets at the
    # exact minimum: with scipy's factr * eps the run stops earlier, reports
    # convergence with the gradient still above tol, and is at the minimum 0
    # to within ftol of the loss scale (max(|f|, 1) = 1)
    runs = {}
    for ftol in (0.0, 2.2e-9):
        y = torch.tensor([-1.2, 1.0], dtype=torch.float64, device=device)
        y.requires_grad_(True)
        rosen = lambda y=y: (1 - y[0]) ** 2 + 100 * (y[1] - y[0] ** 2) ** 2  # noqa: E731
        runs[ftol] = minimize_lbfgs(rosen, [y], tol=1e-15, ftol=ftol)
    stopped = runs[2.2e-9]
    assert stopped.converged and stopped.grad_max > 1e-15
    assert stopped.n_iter < runs[0.0].n_iter
    assert 0 <= stopped.loss <= 1e-8


@pytest.mark.parametrize("kind", ["full", "diagonal", "scalar"])
@pytest.mark.parametrize("ref_row", [False, True])
@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_penalised_affine_gradient_is_autograds(kind, ref_row, fit_intercept, dtype):
    # the closed-form loss and gradient of the penalised affine problem against
    # torch autograd of the objective written out plainly (fit_affine_softmax's
    # docstring), at a random point, for every parametrisation
    from skcal._torch.kernels._affine import _PenalisedProblem

    rng = np.random.default_rng(0)
    n, C = 40, 5
    z = torch.tensor(rng.normal(0, 3, (n, C)), dtype=dtype)
    y = torch.tensor(rng.integers(0, C, n))
    w = torch.tensor(rng.random(n), dtype=dtype)
    w = w / w.sum()
    shape = {"full": (C, C), "diagonal": (C,), "scalar": (1,)}[kind]
    delta = torch.tensor(rng.normal(0, 0.3, shape), dtype=dtype, requires_grad=True)
    bias = torch.tensor(rng.normal(0, 0.3, C), dtype=dtype, requires_grad=True)
    l2_diag, l2_off, l2_bias, target = 0.3, 0.2, 0.1, 0.7
    problem = _PenalisedProblem(
        kind=kind,
        fit_intercept=fit_intercept,
        ref_row=ref_row,
        penalties=(l2_diag, l2_off, l2_bias),
        diag_target=target,
    )
    # the plain objective
    eye = torch.eye(C, dtype=dtype)
    one = torch.ones(C, dtype=dtype)
    W = eye + delta if kind == "full" else torch.diag(one + delta * one)
    b = bias if fit_intercept else bias.detach()
    if ref_row:
        W, b = W - W[-1:], b - b[-1]
    out = z @ W.T + b
    loss = -(w * torch.log_softmax(out, dim=1)[torch.arange(n), y]).sum()
    loss = loss + l2_diag * ((torch.diagonal(W) - target) ** 2).sum()
    if kind == "full" or ref_row:
        loss = loss + l2_off * ((W * (1 - eye)) ** 2).sum()
    if fit_intercept:
        loss = loss + l2_bias * (b**2).sum()
    loss.backward()
    expected = [delta.grad.reshape(-1)] + ([bias.grad] if fit_intercept else [])
    expected = torch.cat(expected)

    evaluate, split = problem.objective(z, y, w, shape, bias.detach())
    x = delta.detach().reshape(-1)
    if fit_intercept:
        x = torch.cat([x, bias.detach()])
    value, grad = evaluate(x)
    rtol = 1e-10 if dtype == torch.float64 else 1e-4
    assert value == pytest.approx(loss.item(), rel=rtol)
    np.testing.assert_allclose(grad.numpy(), expected.numpy(), rtol=rtol, atol=rtol)
    d, bb = split(x)
    assert torch.equal(d, delta.detach()) and torch.equal(bb, bias.detach())
