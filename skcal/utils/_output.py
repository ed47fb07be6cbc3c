"""``set_output`` for calibrators: probabilities as a DataFrame named by class.

scikit-learn's ``_SetOutputMixin`` wraps ``transform`` only; a calibrator's
output is ``predict_proba`` (and its log, and the calibrated logits), so this
mixin wraps those three methods in the same way: it stores the choice where
sklearn does (``_sklearn_output_config``, which :func:`sklearn.base.clone`
copies), and turns the array into a :class:`pandas.DataFrame` whose columns
are ``classes_`` and whose index is the input's when the input is a pandas
object. Only the outermost skcal call converts: calls a calibrator makes
inside its own methods (``predict`` reading ``predict_proba``, a search
scoring its candidates, a wrapper calling its inner calibrator) keep arrays.
"""

from __future__ import annotations

import contextvars
import functools

import numpy as np

__all__ = ["ProbaOutputMixin"]

#: the methods whose array output ``set_output(transform="pandas")`` wraps
_WRAPPED = ("predict_proba", "predict_log_proba", "decision_function")
#: methods that only mark their inner calls as internal (arrays kept)
_INTERNAL = ("fit", "predict", "score", "head_logits")
_OUTPUTS = ("default", "pandas")
#: True while a skcal method runs: nested calls return arrays
_INSIDE = contextvars.ContextVar("skcal_inside_output_method", default=False)


def _wrap_output(method, convert: bool):
    @functools.wraps(method)
    def wrapped(self, X, *args, **kwargs):
        if _INSIDE.get():
            return method(self, X, *args, **kwargs)
        token = _INSIDE.set(True)
        try:
            out = method(self, X, *args, **kwargs)
        finally:
            _INSIDE.reset(token)
        if not convert or not isinstance(out, np.ndarray):
            return out  # labels, scores, self, or a lazy dask array
        return self._wrap_proba_output(out, X)

    wrapped._skcal_output_wrapped = True
    return wrapped


class ProbaOutputMixin:
    """Adds :meth:`set_output` to calibrators (see the module docstring)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in _WRAPPED + _INTERNAL:
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "_skcal_output_wrapped", 0):
                setattr(cls, name, _wrap_output(method, name in _WRAPPED))

    def set_output(self, *, transform=None):
        """Choose the container of the calibrated probabilities.

        With ``transform="pandas"``, :meth:`predict_proba`,
        :meth:`predict_log_proba` and :meth:`decision_function` return a
        :class:`pandas.DataFrame` whose columns are ``classes_`` and whose
        index is that of ``X`` when ``X`` is a pandas DataFrame or Series
        (a ``RangeIndex`` otherwise); the values are those of the array
        output. ``predict`` keeps returning an array of labels.

        The keyword is sklearn's (``transform``), so that code written for
        transformers works unchanged: for a calibrator the "transform" is the
        map from scores to probabilities. The choice is stored as sklearn
        stores it, so :func:`~sklearn.base.clone` keeps it. The global
        ``sklearn.set_config(transform_output="pandas")`` is deliberately not
        followed: sklearn applies it to ``transform`` only, never to a
        classifier's ``predict_proba``, and code that reads the
        probabilities of any classifier as an array would break under it.
        Calls made inside skcal (``predict``, ``score``, a search scoring its
        candidates) always get arrays.

        Parameters
        ----------
        transform : {"default", "pandas"} or None, default=None
            ``"pandas"``: DataFrame output; ``"default"``: NumPy arrays;
            ``None``: leave the choice unchanged.

        Returns
        -------
        self : estimator instance
            The calibrator.

        Examples
        --------
        >>> import numpy as np
        >>> import pandas as pd
        >>> from skcal import TemperatureScaling
        >>> X = pd.DataFrame([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 3.0]],
        ...                  index=["a", "b", "c", "d"])
        >>> y = np.array(["cat", "dog", "cat", "dog"])
        >>> cal = TemperatureScaling().set_output(transform="pandas").fit(X, y)
        >>> P = cal.predict_proba(X)
        >>> list(P.columns), list(P.index)
        (['cat', 'dog'], ['a', 'b', 'c', 'd'])
        """
        if transform is None:
            return self
        if transform not in _OUTPUTS:
            raise ValueError(
                f"set_output: transform must be one of {list(_OUTPUTS)} or "
                f"None, got {transform!r}. Use 'pandas' for a DataFrame "
                "named by class, 'default' for NumPy arrays."
            )
        if not hasattr(self, "_sklearn_output_config"):
            self._sklearn_output_config = {}
        self._sklearn_output_config["transform"] = transform
        return self

    def _wrap_proba_output(self, out: np.ndarray, X):
        """``out`` as the container :meth:`set_output` chose."""
        config = getattr(self, "_sklearn_output_config", {})
        if config.get("transform", "default") != "pandas" or out.ndim != 2:
            return out
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - pandas is optional
            raise ImportError(
                "set_output(transform='pandas') needs pandas, which is not "
                "installed: pip install pandas, or call "
                "set_output(transform='default') for arrays."
            ) from exc
        index = X.index if isinstance(X, (pd.DataFrame, pd.Series)) else None
        columns = pd.Index(self.classes_)
        return pd.DataFrame(out, columns=columns, index=index, copy=False)
