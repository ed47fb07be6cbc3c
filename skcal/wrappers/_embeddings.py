"""Embeddings and linear head of a fitted classifier, for the local calibrators."""

from __future__ import annotations

import numpy as np
from sklearn.frozen import FrozenEstimator
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from .._torch._modules import has_linear, is_module, module_embeddings

__all__ = ["extract_embeddings", "supports_embeddings"]

_MLP_ACTIVATIONS = {
    "identity": lambda a: a,
    "logistic": lambda a: 1.0 / (1.0 + np.exp(-a)),
    "tanh": np.tanh,
    "relu": lambda a: np.maximum(a, 0.0),
}


def _two_class_head(coef: np.ndarray, intercept: np.ndarray):
    """A binary head's single logit ``d`` as two columns ``(-d/2, d/2)``.

    Their softmax is ``(1 - sigmoid(d), sigmoid(d))``, the binary model's
    probabilities; the split is symmetric so neither class is the reference.
    """
    coef, intercept = np.atleast_2d(coef), np.ravel(intercept)
    return np.vstack([-coef / 2, coef / 2]), np.concatenate(
        [-intercept / 2, intercept / 2]
    )


def _unwrap(estimator):
    while isinstance(estimator, FrozenEstimator):
        estimator = estimator.estimator
    return estimator


def final_step(estimator):
    """The model at the end of any nesting of ``FrozenEstimator`` and ``Pipeline``."""
    while True:
        estimator = _unwrap(estimator)
        if not isinstance(estimator, Pipeline):
            return estimator
        estimator = estimator.steps[-1][1]


def _is_linear_model(obj) -> bool:
    return hasattr(obj, "coef_") and hasattr(obj, "intercept_")


def supports_embeddings(estimator) -> bool:
    """Whether :func:`extract_embeddings` knows how to read ``estimator``.

    True for an ``MLPClassifier``, a linear classifier (``coef_`` and
    ``intercept_``), a ``Pipeline`` ending in one of these, any of them in a
    ``FrozenEstimator``, and a torch ``nn.Module`` containing an
    ``nn.Linear``. The estimator need not be fitted yet.
    """
    estimator = _unwrap(estimator)
    if is_module(estimator):
        return has_linear(estimator)
    estimator = final_step(estimator)
    if isinstance(estimator, MLPClassifier):
        return True
    # a linear classifier before or after fitting
    params = getattr(estimator, "get_params", dict)()
    return _is_linear_model(estimator) or (
        "fit_intercept" in params and hasattr(estimator, "decision_function")
    )


def _mlp(mlp: MLPClassifier, X):
    check_is_fitted(mlp)
    if mlp.out_activation_ not in ("softmax", "logistic") or (
        mlp.out_activation_ == "logistic" and mlp.n_outputs_ != 1
    ):
        raise ValueError(
            f"extract_embeddings reads single-label classifiers; this "
            f"MLPClassifier has output activation {mlp.out_activation_!r} with "
            f"{mlp.n_outputs_} outputs (a multi-label model). Calibrate each "
            f"label as a binary problem instead."
        )
    hidden = _MLP_ACTIVATIONS[mlp.activation]
    a = np.asarray(X, dtype=np.float64)
    for W, b in zip(mlp.coefs_[:-1], mlp.intercepts_[:-1]):
        a = hidden(a @ W + b)
    coef, intercept = mlp.coefs_[-1].T.copy(), mlp.intercepts_[-1].copy()
    if mlp.out_activation_ == "logistic":
        coef, intercept = _two_class_head(coef, intercept)
    return a, coef, intercept


def _linear(model, embeddings):
    check_is_fitted(model)
    coef = np.asarray(model.coef_, dtype=np.float64)
    intercept = np.broadcast_to(
        np.asarray(model.intercept_, dtype=np.float64), (coef.shape[0],)
    ).copy()
    if coef.ndim != 2:
        raise ValueError(
            f"expected a linear classifier with coef_ of shape (n_classes, "
            f"n_features), got coef_ of shape {coef.shape}."
        )
    if coef.shape[0] == 1:
        coef, intercept = _two_class_head(coef, intercept)
    else:
        coef = coef.copy()
    E = np.asarray(embeddings, dtype=np.float64)
    if E.ndim != 2 or E.shape[1] != coef.shape[1]:
        raise ValueError(
            f"the features reaching the linear model have shape {E.shape}, but "
            f"its coef_ expects {coef.shape[1]} columns."
        )
    return E, coef, intercept


def _torch_module(module, X, batch_size: int, device):
    E, weight, bias = module_embeddings(module, X, batch_size, device)
    if weight.shape[0] == 1:
        weight, bias = _two_class_head(weight, bias)
    return E, weight, bias


def extract_embeddings(estimator, X, *, batch_size: int = 4096, device="auto"):
    """Embeddings of ``X`` and the linear head of a fitted classifier.

    The local calibrators (:class:`~skcal.VQLocalCalibrator`,
    :class:`~skcal.KCalCalibrator`, ...) are fitted on the features that
    reach a classifier's last, linear layer, and take that layer as their
    frozen head. This function reads both, so that ``embeddings @ coef.T +
    intercept`` are the classifier's logits.

    Supported:

    * ``MLPClassifier``: the activations of the last hidden layer, and the
      output layer.
    * a linear classifier (``coef_`` and ``intercept_``: ``LogisticRegression``,
      ``LinearSVC``, ``RidgeClassifier``, ``SGDClassifier``, ...): ``X`` itself,
      and the model.
    * a ``Pipeline`` whose last step is one of these: the output of the
      steps before it (``pipeline[:-1].transform(X)``), then as above.
    * a torch ``nn.Module`` whose output layer is an ``nn.Linear``: the input
      of its last ``nn.Linear``, captured by a forward hook in eval mode
      without gradients, in batches of ``batch_size``. It is an error if the
      module's output is not that layer's output.
    * any of these inside ``sklearn.frozen.FrozenEstimator``.

    A binary head with one output ``d`` (logistic MLP, binary linear models)
    is returned as two classes with logits ``(-d/2, d/2)``, whose softmax is
    the model's ``(1 - sigmoid(d), sigmoid(d))``.

    Parameters
    ----------
    estimator : fitted classifier or torch.nn.Module
        The classifier to read.
    X : array-like or torch.Tensor
        Input of the classifier.
    batch_size : int, default=4096
        Rows per forward pass (torch modules only).
    device : str or torch.device, default="auto"
        Where a torch module runs ("auto": a CUDA device when one is
        available, else the CPU); its device and train/eval mode are
        restored afterwards. Ignored for scikit-learn models.

    Returns
    -------
    embeddings : ndarray of shape (n_samples, n_features)
        Float64 features entering the head.
    coef : ndarray of shape (n_classes, n_features)
        Weights of the head.
    intercept : ndarray of shape (n_classes,)
        Its bias (zeros when the layer has none).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.neural_network import MLPClassifier
    >>> from skcal.wrappers import extract_embeddings
    >>> X, y = load_iris(return_X_y=True)
    >>> mlp = MLPClassifier(hidden_layer_sizes=(8,), max_iter=2000, random_state=0)
    >>> mlp = mlp.fit(X, y)
    >>> emb, coef, intercept = extract_embeddings(mlp, X)
    >>> emb.shape, coef.shape, intercept.shape
    ((150, 8), (3, 8), (3,))
    >>> logits = emb @ coef.T + intercept
    >>> proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    >>> bool(np.allclose(proba, mlp.predict_proba(X)))
    True
    """
    estimator = _unwrap(estimator)
    if is_module(estimator):
        return _torch_module(estimator, X, batch_size, device)
    if isinstance(estimator, Pipeline):
        head = _unwrap(estimator.steps[-1][1])
        if isinstance(head, MLPClassifier | Pipeline) or _is_linear_model(head):
            features = estimator[:-1].transform(X) if len(estimator) > 1 else X
            return extract_embeddings(head, features)
        raise TypeError(
            f"extract_embeddings reads a Pipeline whose last step is an "
            f"MLPClassifier or a linear classifier (with coef_ and intercept_), "
            f"but its last step is {type(head).__name__}."
        )
    if isinstance(estimator, MLPClassifier):
        return _mlp(estimator, X)
    if _is_linear_model(estimator):
        return _linear(estimator, X)
    raise TypeError(
        f"extract_embeddings reads an MLPClassifier, a linear classifier (coef_ "
        f"and intercept_), a Pipeline ending in one, or a torch nn.Module whose "
        f"output layer is an nn.Linear; got {type(estimator).__name__}. For "
        f"another model, compute the embeddings and the head yourself and fit "
        f"the local calibrator on them directly."
    )
