"""Deterministic full-batch solvers used by the convex calibrators.

Three solvers, each deterministic for a given input and device:

* :func:`newton_root_1d`, a safeguarded Newton iteration for the root of a
  monotone 1-D function (the derivative of a convex 1-D objective), used by
  temperature scaling;
* :func:`minimize_lbfgs`, full-batch L-BFGS with a strong-Wolfe line search
  and a gradient-norm stopping rule, used by vector and matrix scaling;
* :func:`minimize_adam`, full-batch Adam with early stopping on the training
  loss, for small non-convex networks (SMART).

:func:`train_adam` is the mini-batch counterpart with a validation loss.

The first two report convergence in an :class:`OptimResult`, which callers
turn into a ``ConvergenceWarning`` on failure; the Adam loops return their
best epoch (or step) instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch


@dataclass
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

    After evaluating ``x0``, the bound on the side of the root is evaluated:
    if the function has the same sign there, the root lies outside the
    interval and that bound is returned with ``at_bound`` set. Otherwise the
    root is bracketed and found by Newton steps, falling back to a geometric
    bisection of the bracket whenever a step leaves it, or is still large and
    does not at least halve the previous one (the ``rtsafe`` safeguard), so
    convergence is guaranteed and quadratic near the root. Once steps are
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
        Maximum number of evaluations of ``fun``.
    """
    if not 0 < lower <= x0 <= upper:
        raise ValueError(f"need 0 < lower <= x0 <= upper, got {lower}, {x0}, {upper}")
    g, h = fun(x0)
    if g == 0.0:
        return OptimResult(x=x0, n_iter=1, converged=True)
    if g < 0:
        a, b = x0, upper
        if fun(upper)[0] <= 0:
            return OptimResult(x=upper, n_iter=2, converged=True, at_bound="upper")
    else:
        a, b = lower, x0
        if fun(lower)[0] >= 0:
            return OptimResult(x=lower, n_iter=2, converged=True, at_bound="lower")
    x, dx_old = x0, math.inf
    for n_iter in range(3, max_iter + 1):
        newton = x - g / h if h > 0 and math.isfinite(h) else math.nan
        if abs(newton - x) <= xtol * x:  # includes a step lost to rounding
            return OptimResult(x=newton, n_iter=n_iter - 1, converged=True)
        slow = abs(2.0 * g) > abs(dx_old * h) and abs(newton - x) > 1e-6 * x
        if not a < newton < b or slow:
            x_new = math.sqrt(a * b)
        else:
            x_new = newton
        dx_old = x_new - x
        if abs(dx_old) <= xtol * x:
            return OptimResult(x=x_new, n_iter=n_iter - 1, converged=True)
        x = x_new
        g, h = fun(x)
        if g == 0.0:
            return OptimResult(x=x, n_iter=n_iter, converged=True)
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
) -> OptimResult:
    """Minimise ``loss_fn()`` over ``params`` with full-batch L-BFGS.

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
        Number of correction pairs kept by L-BFGS.

    Returns
    -------
    OptimResult
    """
    params = list(params)
    optimizer = torch.optim.LBFGS(
        params,
        lr=1.0,
        max_iter=max_iter,
        max_eval=int(max_iter * 1.25) + 1,
        tolerance_grad=tol,
        tolerance_change=1e-15,
        history_size=history_size,
        line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    # torch's L-BFGS also stops when the loss or the step stalls; restart it
    # (keeping its history) until the gradient rule holds, the iteration
    # budget is spent, or a restart no longer lowers the loss (in float64 the
    # gradient cannot be pushed much below sqrt(eps) times the loss scale).
    state = optimizer.state[params[0]]
    n_iter, grad_max, previous_loss = 0, math.inf, math.inf
    while True:
        optimizer.param_groups[0]["max_iter"] = max_iter - n_iter
        optimizer.param_groups[0]["max_eval"] = int((max_iter - n_iter) * 1.25) + 1
        optimizer.step(closure)
        previous, n_iter = n_iter, int(state.get("n_iter", 0))
        loss = closure()
        grad_max = max(float(p.grad.abs().max()) for p in params)
        converged = bool(math.isfinite(grad_max) and grad_max <= tol)
        stalled = n_iter == previous or not loss.item() < previous_loss
        if converged or n_iter >= max_iter or stalled:
            break
        previous_loss = loss.item()
    for p in params:
        p.grad = None
    return OptimResult(
        x=None,
        n_iter=n_iter,
        converged=converged,
        loss=float(loss.detach()),
        grad_max=grad_max,
    )


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
    batch_size: int,
    max_epochs: int,
    lr: float,
    weight_decay: float = 0.0,
    patience: int = 10,
    generator: torch.Generator,
    device: torch.device,
    verbose: int = 0,
) -> tuple[int, int, float]:
    """Mini-batch Adam with early stopping that restores the best parameters.

    Each epoch shuffles ``range(n_samples)`` with ``generator`` and calls
    ``loss_fn(batch_indices)`` per mini-batch; after each epoch
    ``val_loss_fn()`` is evaluated (without gradients). Training stops after
    ``patience`` epochs without improvement, and the parameters of the best
    epoch (a deep copy, not an alias of the live tensors) are put back.
    ``params`` may include buffers without gradient that ``loss_fn`` updates
    itself (e.g. an EMA codebook): Adam skips them, but they are saved and
    restored with the rest.

    Returns
    -------
    best_epoch, n_epochs, best_val_loss
    """
    params = list(params)
    optimizer = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    with torch.no_grad():
        best_val = float(val_loss_fn())
    best_state = _snapshot(params)
    best_epoch, waited, epoch = 0, 0, 0
    for epoch in range(1, max_epochs + 1):
        order = torch.randperm(n_samples, generator=generator, device=generator.device)
        order = order.to(device)
        for start in range(0, n_samples, batch_size):
            optimizer.zero_grad()
            loss = loss_fn(order[start : start + batch_size])
            if loss.requires_grad:  # a step may only update buffers (EMA)
                loss.backward()
                optimizer.step()
        with torch.no_grad():
            val = float(val_loss_fn())
        if verbose:
            print(f"epoch {epoch}: validation loss {val:.6g}")
        if val < best_val:
            best_val, best_epoch, waited = val, epoch, 0
            best_state = _snapshot(params)
        else:
            waited += 1
            if waited >= patience:
                break
    _restore(params, best_state)
    return best_epoch, epoch, best_val


def minimize_adam(
    loss_fn: Callable[[], torch.Tensor],
    params: Sequence[torch.Tensor],
    *,
    max_epochs: int,
    lr: float,
    patience: int,
    tol: float = 0.0,
    verbose: int = 0,
) -> tuple[int, int, list[float]]:
    """Full-batch Adam with early stopping on the training loss.

    Each epoch evaluates ``loss_fn()`` at the current parameters, records it,
    and takes one Adam step. The parameters with the lowest recorded loss are
    kept as a deep copy (``clone``, never an alias of the live tensors) and
    restored at the end. Training stops after ``patience`` epochs without a
    drop of more than ``tol`` below the loss of the last such drop (Keras'
    ``min_delta`` rule). One loss
    evaluation per epoch: the loss of the final parameters is evaluated only
    if training ran out of epochs.

    Returns
    -------
    best_epoch : int
        Number of Adam steps taken before the kept parameters (0: initial).
    n_epochs : int
        Adam steps taken.
    loss_curve : list of float
        Loss at the parameters of each epoch (before its step).
    """
    params = list(params)
    optimizer = torch.optim.Adam(params, lr=lr)
    best_loss = ref_loss = math.inf
    best_state = _snapshot(params)
    best_epoch, waited, n_steps = 0, 0, 0
    curve: list[float] = []
    for epoch in range(max_epochs + 1):
        optimizer.zero_grad()
        loss = loss_fn()
        value = float(loss.detach())
        curve.append(value)
        if verbose:
            print(f"epoch {epoch}: loss {value:.6g}")
        if not math.isfinite(value):
            break
        # patience counts from the last improvement larger than tol; the
        # state kept is the best one seen, however small its improvement
        if value < ref_loss - tol:
            ref_loss, waited = value, 0
        else:
            waited += 1
        if value < best_loss:
            best_loss, best_epoch = value, epoch
            best_state = _snapshot(params)
        if waited >= patience:
            break
        if epoch == max_epochs:
            break
        loss.backward()
        optimizer.step()
        n_steps += 1
    _restore(params, best_state)
    return best_epoch, n_steps, curve
