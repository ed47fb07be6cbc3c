"""Deterministic full-batch solvers used by the convex calibrators.

Three solvers, each deterministic for a given input and device:

* :func:`newton_root_1d`, a safeguarded Newton iteration for the root of a
  monotone 1-D function (the derivative of a convex 1-D objective), used by
  temperature scaling;
* :func:`minimize_lbfgs` (and :func:`minimize_lbfgs_flat`, its form for a
  flat vector with a supplied gradient), full-batch L-BFGS with a
  strong-Wolfe line search and a gradient-norm stopping rule, used by the
  affine calibrators
  (vector, matrix and structured matrix scaling, Dirichlet);
* :func:`minimize_adam`, full-batch Adam with early stopping on the training
  loss, for small non-convex networks (SMART).

:func:`train_adam` is the mini-batch counterpart with a validation loss.

The first two report convergence in an :class:`OptimResult`, which callers
turn into a ``ConvergenceWarning`` on failure; the Adam loops read their
step size, budget and patience from a
:class:`~skcal._torch._options.TrainingOptions` and return an
:class:`AdamResult` (the best epoch, restored, and the loss curve).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ._constants import DIVISOR_FLOOR
from ._device import resolve_device
from ._options import TrainingOptions
from ._progress import Progress


@dataclass(frozen=True)
class OptimResult:
    """Outcome of a solver run.

    Attributes
    ----------
    x : float or None
        Solution of a 1-D solve (None for :func:`minimize_lbfgs`, which
        updates its parameters in place).
    n_iter : int
        Number of iterations run.
    converged : bool
        Whether the stopping rule was met within ``max_iter``.
    at_bound : {"lower", "upper"} or None
        For a bounded 1-D solve: the root lies outside the bounds and ``x``
        was clipped to this bound.
    loss : float or None
        Final objective value, when the solver knows it.
    grad_max : float or None
        Largest absolute gradient entry at the solution (L-BFGS only).
    """

    x: float | None
    n_iter: int
    converged: bool
    at_bound: str | None = None
    loss: float | None = None
    grad_max: float | None = None


@dataclass(frozen=True)
class AdamResult:
    """Outcome of :func:`train_adam` or :func:`minimize_adam`.

    Attributes
    ----------
    best_epoch : int
        Epoch whose parameters were kept and restored (0: the initial ones).
    n_epochs : int
        Epochs run (:func:`minimize_adam`: Adam steps taken).
    best_loss : float
        The monitored loss at the kept parameters (``inf`` when no finite
        loss was seen).
    loss_curve : list of float
        The monitored loss at each epoch's parameters, starting with the
        initial ones (``loss_curve[best_epoch]`` is ``best_loss``).
    """

    best_epoch: int
    n_epochs: int
    best_loss: float
    loss_curve: list


def newton_root_1d(
    fun: Callable[[float], tuple[float, float]],
    x0: float,
    lower: float,
    upper: float,
    *,
    xtol: float = 1e-12,
    max_iter: int = 100,
) -> OptimResult:
    """Root of a non-decreasing function on ``[lower, upper]`` (``lower > 0``).

    The sign of ``g(x0)`` tells on which side of ``x0`` the root lies; the
    root is then found by Newton steps inside ``[x0, upper]`` (or ``[lower,
    x0]``), falling back to a geometric bisection of the bracket whenever a
    step leaves it, or is still large and does not at least halve the
    previous one (the ``rtsafe`` safeguard), so convergence is guaranteed
    and quadratic near the root. The bound on the root's side is evaluated
    the first time a bisection is needed (not before: most solves never
    need it): if the function has the same sign there, the root lies outside
    the interval and that bound is returned with ``at_bound`` set. Once steps are
    below ``1e-6 * x`` Newton is trusted: there, rounding noise in ``g``
    must not trigger a bisection of a possibly wide bracket.

    Parameters
    ----------
    fun : callable
        ``fun(x) -> (g(x), g'(x))`` with ``g`` non-decreasing.
    x0 : float
        Starting point, ``lower <= x0 <= upper``.
    lower, upper : float
        Positive bounds of the search interval.
    xtol : float
        Stop when a step changes ``x`` by at most ``xtol * x``.
    max_iter : int
        Maximum number of evaluations of ``fun`` (``n_iter`` of the result
        counts them).
    """
    if not 0 < lower <= x0 <= upper:
        raise ValueError(f"need 0 < lower <= x0 <= upper, got {lower}, {x0}, {upper}")
    g, h = fun(x0)
    n_evals = 1
    if g == 0.0:
        return OptimResult(x=x0, n_iter=1, converged=True)
    # the root lies on the side of x0 where g changes sign; the bound on that
    # side is only evaluated when a step needs it (a Newton step beyond it,
    # or a bisection), since most solves converge well inside
    a, b = (x0, upper) if g < 0 else (lower, x0)
    unverified = "upper" if g < 0 else "lower"
    x, dx_old = x0, math.inf
    while n_evals < max_iter:
        newton = x - g / h if h > 0 and math.isfinite(h) else math.nan
        if abs(newton - x) <= xtol * x:  # includes a step lost to rounding
            return OptimResult(x=newton, n_iter=n_evals, converged=True)
        slow = abs(2.0 * g) > abs(dx_old * h) and abs(newton - x) > 1e-6 * x
        bisect = not a < newton < b or slow
        if bisect and unverified:
            bound = upper if unverified == "upper" else lower
            n_evals += 1
            outside = fun(bound)[0]
            if (outside <= 0) if unverified == "upper" else (outside >= 0):
                return OptimResult(
                    x=bound, n_iter=n_evals, converged=True, at_bound=unverified
                )
            unverified = None
        x_new = math.sqrt(a * b) if bisect else newton
        dx_old = x_new - x
        if abs(dx_old) <= xtol * x:
            return OptimResult(x=x_new, n_iter=n_evals, converged=True)
        if n_evals >= max_iter:
            break
        x = x_new
        g, h = fun(x)
        n_evals += 1
        if g == 0.0:
            return OptimResult(x=x, n_iter=n_evals, converged=True)
        if g < 0:
            a = x
        else:
            b = x
    return OptimResult(x=x, n_iter=max_iter, converged=False)


def minimize_lbfgs(
    loss_fn: Callable[[], torch.Tensor],
    params: Sequence[torch.Tensor],
    *,
    max_iter: int = 500,
    tol: float = 1e-7,
    history_size: int = 20,
    memory: LBFGSMemory | None = None,
    ftol: float = 0.0,
    verbose: int = 0,
    desc: str = "L-BFGS",
) -> OptimResult:
    """Minimise ``loss_fn()`` over ``params`` with full-batch L-BFGS.

    The inverse-Hessian approximation of the two-loop recursion (Nocedal &
    Wright 2006, Algorithm 7.4, with ``H0 = s'y / y'y`` of the latest pair),
    applied in compact form (:class:`LBFGSMemory`), and a line search
    that satisfies the strong Wolfe conditions (``c1 = 1e-4``, ``c2 =
    0.9``; their Algorithms 3.5 and 3.6, with safeguarded cubic
    interpolation). The first step is ``min(1, 1 / ||g||_1)`` along
    ``-g``, later ones start at 1. The run stops when the largest absolute
    gradient entry is ``<= tol`` or, with ``ftol > 0``, when an iteration
    lowers the loss by at most ``ftol * max(|f_k|, |f_k+1|, 1)`` (both
    reported as converged, as scipy's L-BFGS-B does), after ``max_iter``
    iterations, or when a line search no longer lowers the loss: in float64 the gradient
    cannot be pushed much below ``sqrt(eps)`` times the loss scale, so a
    tolerance below that is reported as not converged instead of spending
    the whole budget.

    Written here rather than taken from ``torch.optim.LBFGS``: constructing
    any ``torch.optim`` optimiser imports ``torch._dynamo`` (1.2-1.8 s, once
    per process), which was most of a first vector scaling fit's time.

    Parameters
    ----------
    loss_fn : callable
        Returns the scalar objective as a differentiable tensor of ``params``.
    params : sequence of tensors
        Leaf tensors with ``requires_grad=True``; updated in place.
    max_iter : int
        Maximum number of L-BFGS iterations.
    tol : float
        Convergence when the largest absolute gradient entry is ``<= tol``.
    history_size : int
        Number of correction pairs kept.
    memory : LBFGSMemory, optional
        Correction pairs to start from and to update in place (e.g. those of
        a float32 run on the same problem, converted with
        :meth:`LBFGSMemory.to`); ``history_size`` is then ignored. A new,
        empty memory by default.
    ftol : float
        Relative decrease per iteration at or below which the run stops
        (scipy L-BFGS-B's ``factr * eps``); ``0`` (the default) disables it.
    verbose : int
        Show the run as a :class:`~skcal._torch._progress.Progress` bar
        named ``desc`` (2: and a line per iteration).
    desc : str
        The bar's name.

    Returns
    -------
    OptimResult
    """
    params = list(params)
    problem = _FlatProblem(loss_fn, params)
    x, result = minimize_lbfgs_flat(
        problem.evaluate,
        problem.flat_params(),
        max_iter=max_iter,
        tol=tol,
        history_size=history_size,
        memory=memory,
        ftol=ftol,
        verbose=verbose,
        desc=desc,
    )
    problem.assign(x)
    for p in params:
        p.grad = None
    return result


def minimize_lbfgs_flat(
    evaluate: Callable[[torch.Tensor], tuple[float, torch.Tensor]],
    x0: torch.Tensor,
    *,
    max_iter: int = 500,
    tol: float = 1e-7,
    history_size: int = 20,
    memory: LBFGSMemory | None = None,
    ftol: float = 0.0,
    verbose: int = 0,
    desc: str = "L-BFGS",
) -> tuple[torch.Tensor, OptimResult]:
    """:func:`minimize_lbfgs` on a flat vector, with the gradient supplied.

    ``evaluate(x)`` returns the loss (a float) and its gradient (a tensor
    like ``x``), e.g. in closed form, without autograd's per-call cost.
    Returns the solution and the :class:`OptimResult`; the other arguments
    are those of :func:`minimize_lbfgs`.
    """
    x = x0
    loss, grad = evaluate(x)
    if memory is None:
        memory = LBFGSMemory(history_size, x)
    n_iter, grad_max = 0, _abs_max(grad)
    converged = grad_max <= tol
    direction = memory.direction(grad)
    step = (
        1.0
        if memory.order
        else min(1.0, 1.0 / max(float(grad.abs().sum()), DIVISOR_FLOOR))
    )
    with Progress(verbose, max_iter, desc, "iter") as progress:
        while not converged and n_iter < max_iter:
            slope = float(grad @ direction)
            if not slope < 0:  # not a descent direction: restart from -g
                memory.clear()
                direction = -grad
                slope = float(grad @ direction)
            found = _strong_wolfe(evaluate, x, loss, slope, direction, step)
            if found is None:  # no decrease along the direction: stalled
                progress.end(f"stalled at iteration {n_iter} (no decrease found)")
                break
            step, new_loss, new_grad = found
            s = step * direction
            y = new_grad - grad
            ys = float(y @ s)
            if ys > 1e-10:
                memory.add(s, y)
            decrease = loss - new_loss
            scale = max(abs(loss), abs(new_loss), 1.0)
            x, loss, grad = x + s, new_loss, new_grad
            n_iter += 1
            grad_max = _abs_max(grad)
            converged = grad_max <= tol or (ftol > 0 and decrease <= ftol * scale)
            direction = memory.direction(grad)
            step = 1.0
            progress.step(
                f"{desc}: iteration {n_iter}: loss {loss:.8g}, largest gradient "
                f"{grad_max:.3g}",
                loss=loss,
                grad=grad_max,
            )
        if converged:
            progress.end(f"converged at iteration {n_iter}")
    return x, OptimResult(
        x=None, n_iter=n_iter, converged=converged, loss=loss, grad_max=grad_max
    )


def _abs_max(t: torch.Tensor) -> float:
    """Largest absolute entry (NaN if any entry is NaN: ``max`` propagates it)."""
    return float(t.abs().max())


class _FlatProblem:
    """``loss_fn`` of ``params`` seen as a function of one flat vector."""

    def __init__(self, loss_fn, params):
        self.loss_fn, self.params = loss_fn, params

    def flat_params(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.params])

    def assign(self, x: torch.Tensor) -> None:
        offset = 0
        with torch.no_grad():
            for p in self.params:
                p.copy_(x[offset : offset + p.numel()].view_as(p))
                offset += p.numel()

    def evaluate(self, x: torch.Tensor) -> tuple[float, torch.Tensor]:
        """Loss (a float) and flat gradient at ``x``."""
        self.assign(x)
        for p in self.params:
            p.grad = None
        loss = self.loss_fn()
        loss.backward()
        grad = torch.cat(
            [
                (torch.zeros_like(p) if p.grad is None else p.grad).reshape(-1)
                for p in self.params
            ]
        )
        return float(loss.detach()), grad


class LBFGSMemory:
    """The L-BFGS correction pairs and ``-H g`` in compact form.

    ``H = gamma I + [S, gamma Y] M [S, gamma Y]^T`` (Byrd, Nocedal & Schnabel
    1994; Nocedal & Wright 2006, eq. 7.24), with ``gamma = s'y / y'y`` of
    the latest pair: the same matrix as the two-loop recursion's, applied
    with four matrix-vector products and two small triangular solves
    instead of a Python loop over the pairs (hundreds of tiny operations
    per iteration with 100 pairs). The pairs live in fixed slots, reused
    oldest first; ``S Y^T`` and ``Y Y^T`` are updated by one row and column
    per new pair.
    """

    def __init__(self, size: int, like: torch.Tensor):
        n = like.numel()
        self.S, self.Y = like.new_zeros(size, n), like.new_zeros(size, n)
        self.SY = like.new_zeros(size, size)  # SY[i, j] = s_i . y_j (slots)
        self.YY = like.new_zeros(size, size)
        self.order: list[int] = []  # slots, oldest pair first
        self.size = size

    def clear(self) -> None:
        self.order = []

    def to(self, dtype: torch.dtype) -> LBFGSMemory:
        """A copy of the pairs in ``dtype``."""
        other = LBFGSMemory.__new__(LBFGSMemory)
        other.S, other.Y = self.S.to(dtype), self.Y.to(dtype)
        other.SY, other.YY = self.SY.to(dtype), self.YY.to(dtype)
        other.order, other.size = list(self.order), self.size
        return other

    def add(self, s: torch.Tensor, y: torch.Tensor) -> None:
        if len(self.order) < self.size:  # slots 0..slot in use
            slot = used = len(self.order)
            used += 1
        else:  # every slot in use: replace the oldest pair
            slot, used = self.order.pop(0), self.size
        S, Y = self.S[:used], self.Y[:used]
        S[slot], Y[slot] = s, y
        self.SY[:used, slot] = S @ y
        self.SY[slot, :used] = Y @ s
        self.YY[:used, slot] = self.YY[slot, :used] = Y @ y
        self.order.append(slot)

    def direction(self, grad: torch.Tensor) -> torch.Tensor:
        """``-H grad``; ``-grad`` without pairs."""
        if not self.order:
            return -grad
        k = len(self.order)
        if k < self.size:  # not wrapped yet: slots 0..k-1, oldest first
            S, Y, SY, YY = self.S[:k], self.Y[:k], self.SY[:k, :k], self.YY[:k, :k]
            idx = None
        else:
            S, Y = self.S, self.Y
            idx = torch.tensor(self.order, device=grad.device)
            SY, YY = self.SY[idx][:, idx], self.YY[idx][:, idx]
        R = torch.triu(SY)
        gamma = SY[-1, -1] / YY[-1, -1]
        a, b = S @ grad, Y @ grad
        if idx is not None:
            a, b = a[idx], b[idx]
        u = torch.linalg.solve_triangular(R, a[:, None], upper=True)[:, 0]
        v = torch.diagonal(SY) * u + gamma * (YY @ u - b)
        top = torch.linalg.solve_triangular(R.T, v[:, None], upper=False)[:, 0]
        coef_s, coef_y = top, -gamma * u
        if idx is not None:  # back to slot order
            coef_s, coef_y = (
                torch.zeros_like(a).index_put_((idx,), coef_s),
                torch.zeros_like(a).index_put_((idx,), coef_y),
            )
        return -(gamma * grad + coef_s @ S + coef_y @ Y)


def _cubic_minimizer(a, fa, ga, b, fb, gb, low, high) -> float:
    """Minimiser of the cubic through ``(a, fa, ga)`` and ``(b, fb, gb)``.

    Clipped to ``[low, high]``; the midpoint of the two when the cubic has
    no minimiser or a value is not finite.
    """
    d1 = ga + gb - 3.0 * (fa - fb) / (a - b)
    radicand = d1 * d1 - ga * gb
    if not (math.isfinite(radicand) and radicand >= 0):
        return 0.5 * (low + high)
    d2 = math.copysign(math.sqrt(radicand), b - a)
    point = b - (b - a) * (gb + d2 - d1) / (gb - ga + 2.0 * d2)
    if not math.isfinite(point):
        return 0.5 * (low + high)
    return min(max(point, low), high)


def _strong_wolfe(evaluate, x, loss0, slope0, direction, step, *, max_evals=25):
    """A step along ``direction`` satisfying the strong Wolfe conditions.

    ``evaluate(x)`` gives the loss (a float) and the gradient at ``x``.
    Returns ``(step, loss, grad)``, or None when no evaluated step lowered
    the loss. A step whose loss is not finite counts as too long. When the
    evaluation budget runs out, the best step with sufficient decrease
    found so far is returned.
    """
    c1, c2 = 1e-4, 0.9
    scale = _abs_max(direction)

    def phi(t):
        loss, grad = evaluate(x + t * direction)
        return loss, grad, float(grad @ direction)

    def sufficient(t, loss):
        return math.isfinite(loss) and loss <= loss0 + c1 * t * slope0

    prev = (0.0, loss0, None, slope0)  # step, loss, gradient, slope
    best = None
    for i in range(max_evals):
        loss, grad, slope = phi(step)
        if not sufficient(step, loss) or (i > 0 and loss >= prev[1]):
            return _zoom(
                phi,
                sufficient,
                prev,
                (step, loss, grad, slope),
                loss0,
                slope0,
                c2,
                scale,
                max_evals - i - 1,
                best,
            )
        best = (step, loss, grad)
        if abs(slope) <= -c2 * slope0:
            return best
        if slope >= 0:
            return _zoom(
                phi,
                sufficient,
                (step, loss, grad, slope),
                prev,
                loss0,
                slope0,
                c2,
                scale,
                max_evals - i - 1,
                best,
            )
        low, high = step * 1.1, step * 10.0
        new = _cubic_minimizer(prev[0], prev[1], prev[3], step, loss, slope, low, high)
        prev, step = (step, loss, grad, slope), new
    return best


def _zoom(phi, sufficient, lo, hi, loss0, slope0, c2, scale, evals, best):
    """Algorithm 3.6: shrink the bracket ``[lo, hi]`` around a Wolfe step.

    ``lo`` has sufficient decrease and the lowest loss so far (its gradient
    is None at step 0); ``hi`` is the other end.
    """
    for _ in range(evals):
        width = abs(hi[0] - lo[0])
        if width * scale <= 1e-15 * max(1.0, abs(lo[0]) * scale):
            break
        low, high = sorted((lo[0], hi[0]))
        low, high = low + 0.1 * width, high - 0.1 * width
        if math.isfinite(hi[1]):
            t = _cubic_minimizer(*lo[:2], lo[3], *hi[:2], hi[3], low, high)
        else:
            t = 0.5 * (low + high)
        loss, grad, slope = phi(t)
        if not sufficient(t, loss) or loss >= lo[1]:
            hi = (t, loss, grad, slope)
            continue
        if abs(slope) <= -c2 * slope0:
            return t, loss, grad
        if slope * (hi[0] - lo[0]) >= 0:
            hi = lo
        lo = (t, loss, grad, slope)
    if lo[2] is not None:
        return lo[0], lo[1], lo[2]
    return best


def _snapshot(params) -> list[torch.Tensor]:
    """A deep copy of the parameters (``clone``, never an alias)."""
    return [p.detach().clone() for p in params]


def _restore(params, state) -> None:
    """Put a :func:`_snapshot` back into the live parameters."""
    with torch.no_grad():
        for p, saved in zip(params, state):
            p.copy_(saved)


def train_adam(
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    val_loss_fn: Callable[[], float],
    params: Sequence[torch.Tensor],
    *,
    n_samples: int,
    options: TrainingOptions,
    generator: torch.Generator,
    desc: str = "training",
) -> AdamResult:
    """Mini-batch Adam with early stopping that restores the best parameters.

    Each epoch shuffles ``range(n_samples)`` with ``generator`` and calls
    ``loss_fn(batch_indices)`` per mini-batch of ``options.batch_size``
    rows (None: one batch of all rows); after each epoch ``val_loss_fn()``
    is evaluated (without gradients). Training stops after
    ``options.n_iter_no_change`` epochs without improvement, and the
    parameters of the best epoch (a deep copy, not an alias of the live
    tensors) are put back. ``params`` may include buffers without gradient
    that ``loss_fn`` updates itself (e.g. an EMA codebook): Adam skips them,
    but they are saved and restored with the rest. ``options.verbose`` shows
    the phase ``desc`` as a :class:`~skcal._torch._progress.Progress` bar
    (2: and a line per epoch).

    Returns
    -------
    AdamResult
        ``loss_curve`` holds the validation loss of the initial parameters,
        then of each epoch.
    """
    params = list(params)
    device = resolve_device(options.device)
    batch_size = n_samples if options.batch_size is None else options.batch_size
    optimizer = torch.optim.Adam(
        params, lr=options.learning_rate, weight_decay=options.weight_decay
    )
    with torch.no_grad():
        best_val = float(val_loss_fn())
    curve = [best_val]
    best_state = _snapshot(params)
    best_epoch, waited, epoch = 0, 0, 0
    with Progress(options.verbose, options.max_iter, desc) as progress:
        for epoch in range(1, options.max_iter + 1):
            order = torch.randperm(
                n_samples, generator=generator, device=generator.device
            )
            order = order.to(device)
            for start in range(0, n_samples, batch_size):
                optimizer.zero_grad()
                loss = loss_fn(order[start : start + batch_size])
                if loss.requires_grad:  # a step may only update buffers (EMA)
                    loss.backward()
                    optimizer.step()
            with torch.no_grad():
                val = float(val_loss_fn())
            curve.append(val)
            progress.step(
                f"{desc}: epoch {epoch}: validation loss {val:.6g}", val_loss=val
            )
            if val < best_val:
                best_val, best_epoch, waited = val, epoch, 0
                best_state = _snapshot(params)
            else:
                waited += 1
                if waited >= options.n_iter_no_change:
                    progress.stopped_early(epoch, options.n_iter_no_change)
                    break
    _restore(params, best_state)
    return AdamResult(
        best_epoch=best_epoch, n_epochs=epoch, best_loss=best_val, loss_curve=curve
    )


def minimize_adam(
    loss_fn: Callable[[], torch.Tensor],
    params: Sequence[torch.Tensor],
    *,
    options: TrainingOptions,
    tol: float = 0.0,
    desc: str = "training",
) -> AdamResult:
    """Full-batch Adam with early stopping on the training loss.

    Each epoch evaluates ``loss_fn()`` at the current parameters, records it,
    and takes one Adam step. The parameters with the lowest recorded loss are
    kept as a deep copy (``clone``, never an alias of the live tensors) and
    restored at the end. Training stops after ``options.n_iter_no_change``
    epochs without a drop of more than ``tol`` below the loss of the last
    such drop (Keras' ``min_delta`` rule). One loss evaluation per epoch:
    the loss of the final parameters is evaluated only if training ran out
    of epochs (``options.max_iter``). ``options.batch_size``, ``seed`` and
    ``device`` are not used (the caller's tensors are the batch).
    ``options.verbose`` shows the phase ``desc`` as a
    :class:`~skcal._torch._progress.Progress` bar (2: and a line per epoch).

    Returns
    -------
    AdamResult
        ``best_epoch`` counts the Adam steps taken before the kept
        parameters (0: the initial ones), ``n_epochs`` the steps taken, and
        ``loss_curve`` holds the loss at the parameters of each epoch
        (before its step).
    """
    params = list(params)
    max_iter, patience = options.max_iter, options.n_iter_no_change
    optimizer = torch.optim.Adam(
        params, lr=options.learning_rate, weight_decay=options.weight_decay
    )
    best_loss = ref_loss = math.inf
    best_state = _snapshot(params)
    best_epoch, waited, n_steps = 0, 0, 0
    curve: list[float] = []
    with Progress(options.verbose, max_iter, desc) as progress:
        for epoch in range(max_iter + 1):
            optimizer.zero_grad()
            loss = loss_fn()
            value = float(loss.detach())
            curve.append(value)
            if not math.isfinite(value):
                progress.end(f"stopped at epoch {epoch}: the loss is not finite")
                break
            # n_iter_no_change counts from the last improvement larger than tol; the
            # state kept is the best one seen, however small its improvement
            if value < ref_loss - tol:
                ref_loss, waited = value, 0
            else:
                waited += 1
            if value < best_loss:
                best_loss, best_epoch = value, epoch
                best_state = _snapshot(params)
            if waited >= patience:
                progress.stopped_early(epoch, patience)
                break
            if epoch == max_iter:
                break
            loss.backward()
            optimizer.step()
            n_steps += 1
            progress.step(f"{desc}: epoch {epoch}: loss {value:.6g}", loss=value)
    _restore(params, best_state)
    return AdamResult(
        best_epoch=best_epoch, n_epochs=n_steps, best_loss=best_loss, loss_curve=curve
    )
