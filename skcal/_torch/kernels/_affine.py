"""Affine maps of logits followed by a softmax, fitted by penalised NLL.

``q = softmax(z W^T + b)`` where ``W`` is

* ``"full"``: ``I + Delta`` (matrix scaling, Dirichlet calibration on
  log-probabilities, structured matrix scaling);
* ``"diagonal"``: ``diag(1 + delta)`` (vector scaling);
* ``"scalar"``: ``(1 + s) I`` (temperature scaling on log-probabilities).

The features may be pre-multiplied by a ``scale`` (the inverse temperature of
temperature scaling): the map is then ``scale * W``, so that the solver works
on well-scaled features whatever the logits' units, and the penalties act on
the relative map ``W``. All parameters start at zero, i.e. at ``W = I``: the
identity map, or temperature scaling when ``scale`` is its inverse
temperature. With ``ref_row`` the map is expressed, for the penalties and the
returned parameters, relative to its last row (``W - 1 w_C^T``, ``b - b_C``):
the softmax is unchanged, and this is the identifiable parametrisation of the
``dirichletcal`` package.

Without penalties a full map is fitted in whitened coordinates: the NLL then
depends on ``[W, b]`` only through the outputs ``x [W, b]^T`` with ``x = [z,
1]``, so the solver works on ``V = [W, b] L`` and the features ``x L^{-T}``,
where ``L L^T = sum_i w_i x_i x_i^T``. The minimiser is the same; the
problem's Hessian loses the features' correlations, and L-BFGS needs 4-20
times fewer iterations (10,000 x 100 synthetic logits: 34 instead of 765).

With penalties, a full map of at least ``_FLOAT32_MIN_CLASSES`` classes is
first solved in float32 (the loss still summed in float64, so that the line
search resolves small decreases), then in float64 from that point and with
its L-BFGS correction pairs, until the float64 gradient meets ``tol``: the
stopping rule, and so the solution, are those of a float64 solve, at about
half the cost (structured matrix scaling on real 45-66-class sets: 2x
faster).

With ``precondition`` (structured matrix scaling, Dirichlet-CV's fold
fits) a penalised full map is solved in coordinates whitened by an
approximate Hessian per row (see ``_preconditioner``): the same minimiser,
and half the iterations of structured matrix scaling at 53 and 92 classes
(12,000 synthetic rows: 25 instead of 52, 23 instead of 50).

A class without calibration weight keeps its starting row (``W_k = I_k``,
``b_k = 0``: its logit is that of temperature scaling): the likelihood would
push its logit down without bound (it is never the label), which with a
weak or no penalty on its row (ODIR leaves the diagonal free) gave its test
rows a log loss of 19 against 0.23.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import torch

from .._convert import to_numpy, to_tensor
from .._device import resolve_device
from .._optim import LBFGSMemory, OptimResult, minimize_lbfgs, minimize_lbfgs_flat


@dataclass(frozen=True)
class AffineFit:
    """Fitted parameters (numpy, CPU) and the solver outcome.

    Attributes
    ----------
    coef : ndarray
        The full ``(C, C)`` matrix ``scale * W`` applied to the logits (for
        ``"diagonal"`` without ``ref_row``: the vector of its diagonal).
    intercept : ndarray of shape (C,)
        ``b``.
    result : OptimResult
        The L-BFGS outcome (iterations, convergence, final loss).
    raw : tuple of ndarray
        The solver's own parameters, to warm-start another fit (``init``).
    """

    coef: np.ndarray
    intercept: np.ndarray
    result: OptimResult
    raw: tuple = ()


def fit_affine_softmax(
    logits: np.ndarray,
    y_index: np.ndarray,
    sample_weight: np.ndarray,
    *,
    kind: str = "full",
    fit_intercept: bool = True,
    l2_diag: float = 0.0,
    l2_off: float = 0.0,
    l2_bias: float = 0.0,
    diag_target: float = 1.0,
    scale: float = 1.0,
    ref_row: bool = False,
    init: tuple = (),
    device: str | torch.device,
    tol: float,
    max_iter: int,
    verbose: int = 0,
    desc: str = "L-BFGS",
    precondition: bool = False,
    centre_bias: bool = False,
    float32_only: bool = False,
) -> AffineFit:
    """Minimise weighted mean NLL plus ridge penalties with L-BFGS.

    The objective is ``sum_i w_i CE(scale z_i W^T + b, y_i) / sum_i w_i
    + l2_diag ||diag(W) - diag_target||^2 + l2_off ||offdiag(W)||^2
    + l2_bias ||b||^2``, with ``W`` and ``b`` taken relative to their last
    row when ``ref_row`` is set, starting from ``W = I``, ``b = 0``, or from
    ``init`` (the ``raw`` parameters of an earlier fit of the same shape).
    The rows of classes whose weight is 0 keep their starting values (see
    the module notes). Non-finite parameters at the end (a diverged solve)
    raise a ValueError: a fit never returns them. ``verbose`` shows each
    solve as a progress bar named ``desc`` (see
    :func:`~skcal._torch.minimize_lbfgs`). ``device``: {"auto", "cpu",
    "cuda", "cuda:N"} or a ``torch.device``. ``centre_bias`` (with a zero
    ``init`` bias) keeps the fitted classes' biases summing to 0 (their
    gradient is centred; the softmax is blind to a common shift), so that
    a held class's bias, 0, is their mean: without it an unpenalised fit
    would push the held class down by raising all the others without bound.
    ``float32_only`` (fits that only rank candidates): a map that starts in
    float32 is solved in float32 alone, to ``tol``.
    """
    if kind not in ("full", "diagonal", "scalar"):
        raise ValueError(f"unknown kind {kind!r}")
    device = resolve_device(device)
    n_classes = logits.shape[1]
    z = to_tensor(logits, device, torch.float64) * scale
    y = to_tensor(y_index, device, torch.int64)
    w = to_tensor(sample_weight / sample_weight.sum(), device, torch.float64)
    fitted = _fitted_rows(y_index, sample_weight, n_classes, device)
    if kind == "full" and fit_intercept and not (l2_diag or l2_off or l2_bias):
        fit = _fit_whitened(
            z, y, w, init, fitted, tol=tol, max_iter=max_iter, verbose=verbose,
            desc=desc,
        )  # fmt: skip
        if fit is not None:
            return _affine_result(*fit, scale=scale, ref_row=ref_row)
    delta, bias = _start(kind, n_classes, init, device)
    problem = _PenalisedProblem(
        kind=kind,
        fit_intercept=fit_intercept,
        ref_row=ref_row,
        penalties=(l2_diag, l2_off, l2_bias),
        diag_target=diag_target,
        fitted=fitted,
        centre_bias=centre_bias,
    )
    if precondition and kind == "full" and fit_intercept:
        problem = replace(problem, precond=_preconditioner(z, w, problem.penalties))
    float32_start = kind == "full" and n_classes >= _FLOAT32_MIN_CLASSES
    fit = _solve_penalised(
        problem, z, y, w, delta, bias, float32_start=float32_start, tol=tol,
        max_iter=max_iter, verbose=verbose, desc=desc, float32_only=float32_only,
    )  # fmt: skip
    return _penalised_result(problem, fit, scale)


def _penalised_result(problem, fit, scale) -> AffineFit:
    """The :class:`AffineFit` of a penalised solve: the effective ``W * scale``
    and ``b`` (finite, or a ValueError) and the raw parameters."""
    with torch.no_grad():
        W, b = problem.effective(fit.delta, fit.bias)
    return AffineFit(
        coef=_finite_or_raise(W * scale),
        intercept=_finite_or_raise(b),
        result=fit.result,
        raw=(to_numpy(fit.delta), to_numpy(fit.bias)),
    )


def _start(kind, n_classes, init, device):
    """The raw parameters ``(delta, bias)`` to start from: zeros, or ``init``."""
    f64 = dict(dtype=torch.float64, device=device)
    shape = {"full": (n_classes, n_classes), "diagonal": (n_classes,), "scalar": (1,)}
    delta = torch.zeros(shape[kind], **f64)
    bias = torch.zeros(n_classes, **f64)
    if init:
        delta.copy_(to_tensor(init[0], device)), bias.copy_(to_tensor(init[1], device))
    return delta, bias


def _solve_penalised(
    problem, z, y, w, delta, bias, *, float32_start, tol, max_iter, verbose, desc,
    float32_only=False,
) -> _Solved:  # fmt: skip
    """The penalised solve from ``(delta, bias)`` (updated in place), with a
    float32 start when ``float32_start`` (and nothing else with
    ``float32_only``); ``n_iter`` counts both runs."""
    n_iter, memory = 0, None
    if float32_start and float32_only:
        f32 = problem.solve(
            z.float(), y, w.float(), delta.float(), bias.float(), tol=tol,
            max_iter=max_iter, ftol=_ftol(tol), verbose=verbose,
            desc=f"{desc} (float32)",
        )  # fmt: skip
        delta.copy_(f32.delta), bias.copy_(f32.bias)
        return replace(f32, delta=delta, bias=bias)
    if float32_start:
        # float32 first, at half the cost per iteration, to 10 tol (short of
        # its rounding floor, where line searches fail at a high price); the
        # float64 run continues from its point and its correction pairs, and
        # applies the stopping rule to the float64 objective
        f32 = problem.solve(
            z.float(), y, w.float(), delta.float(), bias.float(),
            tol=10 * tol, max_iter=max_iter, ftol=_ftol(tol),
            verbose=verbose, desc=f"{desc} (float32 start)",
        )  # fmt: skip
        delta.copy_(f32.delta), bias.copy_(f32.bias)
        n_iter, memory = f32.result.n_iter, f32.memory.to(torch.float64)
    fit = problem.solve(
        z, y, w, delta, bias, tol=tol, max_iter=max(max_iter - n_iter, 1),
        memory=memory, ftol=_ftol(tol), verbose=verbose, desc=desc,
    )  # fmt: skip
    return replace(fit, result=replace(fit.result, n_iter=fit.result.n_iter + n_iter))


def _ftol(tol: float) -> float:
    """Relative loss decrease per iteration below which a solve stops.

    scipy's L-BFGS-B stops there too (``factr * eps = 2.2e-9`` by default);
    here it is ``2.2e-9`` at the default ``tol = 1e-5`` and scales with
    ``tol ** 2`` (the loss gap of a gradient of size ``tol``), so that a
    tighter ``tol`` tightens both tests.
    """
    return 2.2e-9 * (tol / 1e-5) ** 2


#: Full maps of at least this many classes start with a float32 solve.
_FLOAT32_MIN_CLASSES = 20


def _fitted_rows(y_index, sample_weight, n_classes, device):
    """1.0 for the classes with positive weight, 0.0 for the others; None
    when every class has weight (nothing to hold)."""
    present = np.bincount(y_index, weights=sample_weight, minlength=n_classes) > 0
    if present.all():
        return None
    return to_tensor(present.astype(np.float64), device, torch.float64)


@dataclass(frozen=True)
class _Solved:
    delta: torch.Tensor
    bias: torch.Tensor
    result: OptimResult
    memory: LBFGSMemory


@dataclass(frozen=True)
class _PenalisedProblem:
    """The penalised NLL of :func:`fit_affine_softmax` in any float dtype."""

    kind: str
    fit_intercept: bool
    ref_row: bool
    penalties: tuple  # l2_diag, l2_off, l2_bias
    diag_target: float
    fitted: torch.Tensor | None = None  # 0.0 for the rows that are held
    precond: torch.Tensor | None = None  # factors of _preconditioner, or None
    centre_bias: bool = False  # the fitted rows' bias gradient centred

    @property
    def full_matrix(self) -> bool:
        return self.kind == "full" or self.ref_row

    def effective(self, delta, bias):
        """The map ``(W, b)`` of the raw parameters."""
        n_classes = len(bias)
        if self.kind == "full":
            W = torch.eye(n_classes, dtype=delta.dtype, device=delta.device) + delta
        elif self.full_matrix:
            W = torch.diag(1.0 + delta.expand(n_classes))
        else:
            W = 1.0 + delta.expand(n_classes)  # diagonal as a vector
        b = bias
        if self.ref_row:
            W = W - W[-1:]
            b = b - b[-1]
        return W, b

    def solve(
        self, z, y, w, delta, bias, *, tol, max_iter, memory=None, ftol=0.0,
        verbose=0, desc="L-BFGS",
    ) -> _Solved:  # fmt: skip
        """L-BFGS from ``(delta, bias)`` on ``z``'s dtype.

        The gradient is in closed form (the data term's, then the penalties'
        and the chain rule of :meth:`effective`), without autograd.
        ``memory``: correction pairs to start from (in ``z``'s dtype).
        """
        fixed_bias = bias.detach().clone()
        evaluate, split = self.objective(z, y, w, delta.shape, fixed_bias)
        x0 = delta.detach().reshape(-1).clone()
        if self.fit_intercept:
            x0 = torch.cat([x0, fixed_bias])
        to_raw, from_raw = self._coordinates(len(fixed_bias), z.dtype)
        u0 = from_raw(x0)
        if memory is None:
            memory = LBFGSMemory(_history(u0.numel()), u0)

        def evaluate_u(u):
            loss, grad = evaluate(to_raw(u))
            return loss, to_raw(grad, adjoint=True)

        u, result = minimize_lbfgs_flat(
            evaluate_u, u0, max_iter=max_iter, tol=tol, memory=memory, ftol=ftol,
            verbose=verbose, desc=desc,
        )  # fmt: skip
        delta, bias = split(to_raw(u))
        return _Solved(delta.clone(), bias.clone(), result, memory)

    def _coordinates(self, n_classes: int, dtype):
        """``(to_raw, from_raw)``: the solver's coordinates ``u`` to the raw
        parameters ``x`` and back; ``to_raw(g, adjoint=True)`` maps a raw
        gradient to ``u``'s. With a preconditioner the raw ``[delta |
        bias]`` (C x (C + 1)) has rows ``u_k L_k^{-1}`` (``L_k`` each row's
        factor, or one ``L`` shared by all); without, ``u`` is ``x``."""
        if self.precond is None:
            return (lambda x, adjoint=False: x), (lambda x: x)
        L = self.precond.to(dtype)
        n = n_classes

        def as_matrix(x):
            return torch.cat([x[: n * n].view(n, n), x[n * n :, None]], dim=1)

        def as_flat(X):
            return torch.cat([X[:, :n].reshape(-1), X[:, n]])

        if L.dim() == 2:  # one L shared by the rows

            def to_raw(u, adjoint=False):
                U = as_matrix(u)
                if adjoint:  # G L^{-T}: L G'^T = G^T
                    G = torch.linalg.solve_triangular(L, U.T, upper=False).T
                    return as_flat(G)
                # U L^{-1}: L^T X^T = U^T
                return as_flat(torch.linalg.solve_triangular(L.T, U.T, upper=True).T)

            return to_raw, lambda x: as_flat(as_matrix(x) @ L)

        def to_raw_rows(u, adjoint=False):
            U = as_matrix(u)[:, None, :]  # row k: 1 x (C + 1), with its L_k
            if adjoint:  # g_k L_k^{-T}: X L_k^T = g_k
                X = torch.linalg.solve_triangular(L.mT, U, upper=True, left=False)
            else:  # u_k L_k^{-1}: X L_k = u_k
                X = torch.linalg.solve_triangular(L, U, upper=False, left=False)
            return as_flat(X[:, 0])

        return to_raw_rows, lambda x: as_flat((as_matrix(x)[:, None, :] @ L)[:, 0])

    def objective(self, z, y, w, shape, fixed_bias):
        """``evaluate(x)``: the loss (a float) and its flat gradient at the
        raw parameters ``x = [delta.ravel(), bias]`` (``bias`` only with an
        intercept, else ``fixed_bias``); ``split(x)``: ``(delta, bias)``."""
        n_delta = math.prod(shape)
        data_term = _SoftmaxNLL(z, y, w, self.full_matrix)

        def split(x):
            bias = x[n_delta:] if self.fit_intercept else fixed_bias
            return x[:n_delta].view(shape), bias

        def evaluate(x):
            W, b = self.effective(*split(x))
            data, grad_W, grad_b = data_term(W, b)
            penalty, grad_W, grad_b = self._penalty(W, b, grad_W, grad_b)
            return float(data) + penalty, self._raw_gradient(grad_W, grad_b)

        return evaluate, split

    def _penalty(self, W, b, grad_W, grad_b):
        """The ridge terms (a float, summed in float64) added to the loss,
        and their gradients added to the data term's ``grad_W``, ``grad_b``
        (both fresh tensors, updated in place)."""
        l2_diag, l2_off, l2_bias = self.penalties
        penalty = 0.0
        if l2_diag:
            diag = torch.diagonal(W) if self.full_matrix else W
            r = diag - self.diag_target
            penalty += l2_diag * float(torch.dot(r.double(), r.double()))
            grad_diag = torch.diagonal(grad_W) if self.full_matrix else grad_W
            grad_diag.add_(r, alpha=2 * l2_diag)
        if l2_off and self.full_matrix:
            off = W - torch.diag(torch.diagonal(W))
            penalty += l2_off * float(off.double().square().sum())
            grad_W.add_(off, alpha=2 * l2_off)
        if l2_bias and self.fit_intercept:
            penalty += l2_bias * float(torch.dot(b.double(), b.double()))
            grad_b.add_(b, alpha=2 * l2_bias)
        return penalty, grad_W, grad_b

    def _raw_gradient(self, grad_W, grad_b) -> torch.Tensor:
        """The flat gradient of the raw parameters, from that of ``(W, b)``
        (the chain rule of :meth:`effective`), 0 on the held rows."""
        if self.ref_row:  # W_i = W0_i - W0_C for every row i
            grad_W = torch.cat([grad_W[:-1], (grad_W[-1] - grad_W.sum(0))[None]])
            grad_b = torch.cat([grad_b[:-1], (grad_b[-1] - grad_b.sum())[None]])
        if self.centre_bias:
            grad_b = _centred(grad_b, self.fitted)
        if self.fitted is not None:  # rows of classes without weight stay put
            fitted = self.fitted.to(grad_b.dtype)
            if self.kind != "scalar":  # a shared scale is no row's own
                grad_W = grad_W * (fitted[:, None] if grad_W.dim() == 2 else fitted)
            grad_b = grad_b * fitted
        if self.kind == "full":
            grad = grad_W
        else:
            grad = torch.diagonal(grad_W) if self.full_matrix else grad_W
            if self.kind == "scalar":
                grad = grad.sum()
        grad = grad.reshape(-1)
        return torch.cat([grad, grad_b]) if self.fit_intercept else grad


def _centred(grad_b, fitted):
    """``grad_b`` minus its mean over the fitted rows (all without ``fitted``)."""
    if fitted is None:
        return grad_b - grad_b.mean()
    fitted = fitted.to(grad_b.dtype)
    return grad_b - (grad_b * fitted).sum() / fitted.sum()


def _preconditioner(z, w, penalties) -> torch.Tensor | None:
    """The Cholesky factors ``L_k`` of approximate Hessians of a full map with
    intercept, one per row ``k``: ``h S + 2 diag(lambda_k)``, where ``S`` is
    the weighted second-moment matrix of the features ``[z, 1]``, ``h`` the
    mean softmax curvature ``p (1 - p)`` at the start, and ``lambda_k`` the
    penalties of row ``k``'s entries (``l2_diag`` on its diagonal entry,
    ``l2_off`` on the others, ``l2_bias`` on its bias). In ``u_k = [delta |
    bias]_k L_k`` the correlated log-probability features are whitened and
    the penalties scaled with them: at weak penalties L-BFGS then needs
    several times fewer iterations (see the module notes). One factor per
    row rather than one with each column's mean penalty: structured matrix
    scaling's off-diagonal ridge is ``C - 1`` times its diagonal one, and
    at 92 classes its solve took 26 evaluations instead of 32 (10 of them
    in float64 instead of 4). Above ``_ROW_FACTORS_MAX_CLASSES`` classes
    (where the factors would take ``8 C^3`` bytes) one factor, with each
    column's mean penalty, is shared by the rows. None when a factor does
    not exist."""
    n = z.shape[1]
    _, moments = _second_moments(z, w)
    p = torch.softmax(z, dim=1)
    with _serial():
        curvature = float(w @ (p * (1 - p)).sum(dim=1)) / n
    l2_diag, l2_off, l2_bias = penalties
    if n > _ROW_FACTORS_MAX_CLASSES:
        cols = torch.full((n + 1,), (l2_diag + (n - 1) * l2_off) / n, dtype=z.dtype)
        cols[n] = l2_bias
        return _cholesky(curvature * moments + torch.diag(2 * cols.to(z.device)))
    M = (curvature * moments).expand(n, n + 1, n + 1).clone()
    ridge = torch.full((n, n + 1), 2.0 * l2_off, dtype=z.dtype, device=z.device)
    ridge.diagonal().fill_(2.0 * l2_diag)
    ridge[:, n] = 2.0 * l2_bias
    M.diagonal(dim1=1, dim2=2).add_(ridge)
    return _cholesky(M)


#: Up to this many classes each row of a preconditioned map has its own
#: factor (at most 67 MB of factors).
_ROW_FACTORS_MAX_CLASSES = 200


def _second_moments(z, w):
    """The features ``x = [z, 1]`` and their weighted second moments
    ``x^T diag(w) x``."""
    x = torch.cat([z, torch.ones(len(z), 1, dtype=z.dtype, device=z.device)], 1)
    with _serial():
        return x, x.T @ (w[:, None] * x)


def _cholesky(M):
    """The lower Cholesky factor of ``M`` (or of each matrix of a batch) after
    a 1e-12 relative jitter of its diagonal (in place), or None when there is
    none."""
    d = M.diagonal(dim1=-2, dim2=-1)
    d.add_(1e-12 * d.mean(dim=-1, keepdim=True))
    L, info = torch.linalg.cholesky_ex(M)
    if bool((info != 0).any()) or not bool(torch.isfinite(L).all()):
        return None
    return L


def _history(n_params: int) -> int:
    """L-BFGS memory: 100 correction pairs (as torchmin's default), which
    saves 20-60% of the iterations of structured matrix scaling against 20,
    while the pairs take at most 160 MB (more parameters: 20 pairs)."""
    return 100 if n_params <= 100_000 else 20


def _finite_or_raise(t: torch.Tensor) -> np.ndarray:
    if not bool(torch.isfinite(t).all()):
        raise ValueError(
            "The affine calibration map diverged to non-finite values on these "
            "scores. Check them for extreme or degenerate values, or add "
            "regularisation."
        )
    return to_numpy(t)


def _affine_result(W, b, result, *, scale, ref_row) -> AffineFit:
    """The fit of a full map ``[W, b]`` (the raw parameters ``W - I``, ``b``)."""
    raw = (to_numpy(W - torch.eye(len(W), dtype=W.dtype, device=W.device)), to_numpy(b))
    if ref_row:
        W, b = W - W[-1:], b - b[-1]
    return AffineFit(
        coef=_finite_or_raise(W * scale),
        intercept=_finite_or_raise(b),
        result=result,
        raw=raw,
    )


@contextmanager
def _serial():
    """One torch thread for the block: its sums over rows (``dot``, ``A.T @
    B``, ``sum(dim=0)``) are then added in one order whatever the thread
    count (split over threads, their partial sums are added in another, and
    fits on 1 and 2 threads were 1e-15 to 6e-12 apart)."""
    n = torch.get_num_threads()
    if n == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


class _SoftmaxNLL:
    """Weighted mean NLL of ``softmax(z W^T + b)`` and its gradient in closed form.

    ``W`` is a ``(C, d)`` matrix, or with ``full=False`` the vector of a
    diagonal map (``d = C``). The softmax takes one exp pass over a buffer
    that is then reused for the gradient (no autograd over ``n x C``
    tensors); the true-class terms are gathered and scattered per row, so
    the loss is a sum of non-negative per-row terms ``lse_i - out[i, y_i]``
    (no cancellation between large sums when the logits are large). ``w``
    sums to one.
    """

    def __init__(self, z, y, w, full: bool):
        self.z, self.y, self.w, self.full = z, y[:, None], w, full

    def __call__(self, W, b):
        z, w, y = self.z, self.w, self.y
        with torch.no_grad():
            out = torch.addmm(b, z, W.T) if self.full else torch.addcmul(b, z, W)
            out_true = out.gather(1, y).squeeze(1)
            top = out.amax(dim=1, keepdim=True)
            proba = out.sub_(top).exp_()  # in place: out is not needed again
            total = proba.sum(dim=1, keepdim=True)
            lse = top.squeeze(1) + total.log().squeeze(1)
            # summed in float64 whatever the dtype: in a float32 solve the
            # loss then resolves the small decreases of the last iterations
            proba.mul_(w[:, None] / total)  # w_i softmax(out_i)
            proba.scatter_add_(1, y, -w[:, None])  # w_i (softmax - onehot)
            with _serial():  # the sums over rows
                data = torch.dot(w.double(), (lse - out_true).double())
                grad_W = proba.T @ z if self.full else (proba * z).sum(dim=0)
                grad_b = proba.sum(dim=0)
        return data, grad_W, grad_b


def _fit_whitened(
    z, y, w, init, fitted=None, *, tol, max_iter, verbose=0, desc="L-BFGS"
):
    """Unpenalised full map fitted on whitened features (see the module notes).

    Returns ``(W, b, result)`` of the original coordinates, or None when the
    features' second-moment matrix has no Cholesky factor (then the caller
    fits in the original coordinates). Rows with ``fitted`` 0 stay put: row
    ``k`` of ``V = [W, b] L`` is row ``k`` of ``[W, b]`` times ``L``.
    """
    n_classes = z.shape[1]
    f64 = dict(dtype=torch.float64, device=z.device)
    x, moments = _second_moments(z, w)
    L = _cholesky(moments)
    if L is None:
        return None
    x = torch.linalg.solve_triangular(L, x.T, upper=False).T  # x L^{-T}
    start = torch.eye(n_classes, n_classes + 1, **f64)
    if init:
        start[:, :n_classes] += to_tensor(init[0], z.device)
        start[:, n_classes] += to_tensor(init[1], z.device)
    V = (start @ L).requires_grad_(True)
    data_term = _SoftmaxNLL(x, y, w, full=True)
    no_bias = torch.zeros(n_classes, **f64)

    def loss_fn() -> torch.Tensor:
        data, grad_V, _ = data_term(V, no_bias)
        if fitted is not None:
            grad_V = grad_V * fitted[:, None]
        linear = (V * grad_V).sum()
        return linear - linear.detach() + data

    result = minimize_lbfgs(
        loss_fn,
        [V],
        max_iter=max_iter,
        tol=tol,
        history_size=_history(V.numel()),
        ftol=_ftol(tol),
        verbose=verbose,
        desc=desc,
    )
    with torch.no_grad():
        # [W, b] = V L^{-1}, i.e. the solution of L^T [W, b]^T = V^T
        Wb = torch.linalg.solve_triangular(L.T, V.T, upper=True).T
    return Wb[:, :n_classes], Wb[:, n_classes], result
