"""VQLocalCalibrator: Divide et Calibra (vector-quantized local calibration)."""

from __future__ import annotations

import sys
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._torch import check_device
from .._torch.kernels import (
    CompositionalMap,
    GlobalDirichletMap,
    fit_compositional_map,
    fit_divide,
    fit_global_dirichlet_map,
    vq_calibrated_proba,
    vq_head_log_proba,
)
from ..base import BaseLocalCalibrator
from ..exceptions import AccuracyDropWarning, CodebookWarning
from ..utils._constraints import MINIBATCH_CONSTRAINTS, TRAINING_CONSTRAINTS
from ..utils._sklearn import Interval, StrOptions
from ..utils._split import stratified_split
from ..utils._training import training_options
from ..utils._validation import paired_mean_difference
from ..utils._warnings import warn

__all__ = ["VQLocalCalibrator"]

#: Largest n_classes^2 * n_codewords fitted on the CPU (about 300 classes with
#: 64 codewords, where one epoch over 10,000 samples takes minutes).
_MAX_CPU_MAP_WORK = 6e6
#: An accuracy drop is material above this many points (a fraction) and
#: ``_ACCURACY_DROP_SE`` standard errors of the paired difference.
_ACCURACY_DROP_MIN = 0.01
_ACCURACY_DROP_SE = 2.0


def warn_accuracy_drop(name, y_index, proba, head_logits, sample_weight, advice):
    """:class:`AccuracyDropWarning` when ``proba`` is materially less accurate.

    Compares, on the same rows (a calibrator's internal validation split),
    the accuracy of the calibrated probabilities ``proba`` with that of the
    frozen head's logits ``head_logits`` (argmax of each, first maximum on
    ties). With ``d_i = [head right] - [calibrator right]``, the drop is the
    weighted mean of ``d_i`` and its standard error is the spread of
    ``d_i`` over the square root of Kish's effective number of rows minus
    one (the paired difference of CalibratorSearchCV's guard). The drop is
    material when it exceeds both ``_ACCURACY_DROP_MIN`` (one point) and
    ``_ACCURACY_DROP_SE`` (two) standard errors.

    Parameters
    ----------
    name : str
        The calibrator, as the message names it.
    y_index : ndarray of shape (n_rows,)
        Column index of each row's label.
    proba : ndarray of shape (n_rows, n_classes)
        Calibrated probabilities of the rows.
    head_logits : ndarray of shape (n_rows, n_classes)
        The frozen head's logits of the same rows.
    sample_weight : ndarray of shape (n_rows,)
        Weights of the rows.
    advice : str
        What to change, appended to the message.
    """
    weights = np.asarray(sample_weight, dtype=np.float64)
    if weights.sum() <= 0:
        return
    right_new = np.argmax(proba, axis=1) == y_index
    right_head = np.argmax(head_logits, axis=1) == y_index
    diff = right_head.astype(np.float64) - right_new
    drop, se = paired_mean_difference(diff, weights)
    if not drop > max(_ACCURACY_DROP_MIN, _ACCURACY_DROP_SE * se):
        return
    acc_new = np.average(right_new, weights=weights)
    acc_head = np.average(right_head, weights=weights)
    warn(
        f"{name}: on its internal validation split ({len(y_index)} rows) its "
        f"accuracy is {acc_new:.3f}, against {acc_head:.3f} for the frozen head "
        f"(coef, intercept) on the same rows: a drop of {drop:.3f} (standard "
        f"error {se:.3f}). {advice}",
        AccuracyDropWarning,
    )


class VQLocalCalibrator(BaseLocalCalibrator):
    """Local calibration by vector quantization ("Divide et Calibra").

    **Divide.** Each embedding of ``n_features = n_slots * d`` dimensions is
    cut into ``n_slots`` contiguous slots of ``d`` dimensions, and every slot
    is replaced by its nearest codeword of one codebook of ``n_codewords``
    vectors shared by all slots. The codebook starts from random calibration
    slot vectors and follows the slots assigned to it by exponential moving
    averages (``decay``) while a linear head is trained on the quantized
    embedding (Adam, cross-entropy, early stopping on a held-out
    ``validation_fraction``): the backbone's head ``coef`` / ``intercept``
    trained further, or a new one (``head``; by default, when ``coef`` is
    given, both are fitted and the one of lower validation loss is kept). A
    sample's *cell* is its sequence of codeword indices; :meth:`quantize`
    returns it.

    **Calibra.** With the head's probabilities ``p`` and ``n_k`` the number of
    the sample's slots that use codeword ``k``, receiver and sender codebooks
    ``A, B`` (``n_codewords x n_classes``) and a global prior ``pi`` define the
    cell's Dirichlet map

    ``M = sum_k n_k a_k b_k^T``, ``alpha = softplus(M) + 1e-8``,
    ``logit_j = sum_k (alpha_kj - 1 + [k = j]) log p_k + log pi_j - log B(alpha_.j)``,

    ``log B(a) = sum_k lgamma(a_k) - lgamma(sum_k a_k)``, and the calibrated
    probabilities are ``softmax(logit)``. At initialisation ``alpha = 1``, so
    the map is the identity (up to the prior, ~uniform). ``A``, ``B`` and
    ``pi`` are fitted by Adam on the cross-entropy with the same split and
    early stopping. Parameters: ``2 n_codewords n_classes + n_classes``.

    Parameters
    ----------
    n_slots : int, default=64
        Number of slots ``w``; must divide the number of features.
    n_codewords : int, default=64
        Codebook size ``K``.
    decay : float, default=0.99
        EMA decay of the codebook.
    ema_init : {"robust", "zeros"}, default="robust"
        EMA state at the start: ``"robust"`` counts every initial codeword
        once (``N_k = 1``, ``m_k = c_k``); ``"zeros"`` is the paper's
        ``N_k = m_k = 0``, which sends every codeword unused in the first
        batch to the origin.
    codebook : {"ema", "data", "normal"}, default="ema"
        EMA codebook, or a fixed one: random calibration slot vectors
        (``"data"``) or ``N(0, I)`` draws (``"normal"``) (paper C.11).
    head : {"auto", "finetune", "train", "frozen"}, default="auto"
        The head on the quantized embeddings. ``"finetune"``: the backbone's
        head ``coef`` / ``intercept``, trained further on them (its start,
        epoch 0, is a candidate of early stopping). ``"train"``: a new head
        from ``torch.nn.Linear``'s random start (the paper's VQ).
        ``"frozen"``: the backbone's head applied to them unchanged (VQ_frz,
        paper C.10). ``"auto"``, when ``coef`` is given, fits stage 1 (the
        codebook and the head) with ``"finetune"`` and with ``"train"`` on
        the same split and seed, and keeps the one of lower held-out
        cross-entropy (the loss early stopping minimises; ``"finetune"`` on
        ties), which costs one more stage 1; without ``coef`` it is
        ``"train"`` (see Notes for the evidence).
    coef : array-like of shape (n_classes, n_features), default=None
        The backbone's head, required by ``head="finetune"`` and
        ``head="frozen"``. Row ``j`` is class ``classes_[j]`` (integer
        labels ``j`` without ``classes``), so the calibrator has one column
        per row even when a class has no calibration sample (a
        ``MissingClassWarning`` names it). With ``head="train"`` only this
        class layout is taken from ``coef``: the head on the quantized
        embeddings is trained anew.
    intercept : array-like of shape (n_classes,), default=None
        Its bias (zeros when None).
    classes : array-like of shape (n_classes,), default=None
        All labels, in column order.
    calibration : {"compositional", "dirichlet", "none"}, default="compositional"
        Stage 2: the map above (VQ), a global Dirichlet calibration of the
        head (VQ-DC, ``logits = W^T log p + b`` from ``N(0, 0.01^2)``), or none
        (VQ-NC).
    learn_variance : bool, default=False
        Learn a scale ``sigma_i^2`` per slot (``M = sum_i sigma_i^2 a_s(i)
        b_s(i)^T``, initialised at 1) with the paper's C.9 regulariser;
        False fixes ``sigma^2 = 1`` (outputs then depend only on codeword
        counts).
    reg_lambda : float, default=1e-4
        ``lambda_A = lambda_B = lambda_sigma`` of the C.9 regulariser (used
        with ``learn_variance``).
    identity_shift : bool, default=True
        Add the identity to ``alpha - 1`` in the linear term (the reference
        code; it makes the initial map the identity).
    learning_rate : float, default=1e-3
        Adam step size of both stages.
    weight_decay : float, default=1e-3
        Adam's (coupled) L2 weight decay of both stages.
    batch_size : int, default=128
        Mini-batch size.
    max_iter : int, default=100
        Maximum epochs of each stage.
    n_iter_no_change : int, default=10
        Epochs without improvement of the validation cross-entropy before a
        stage stops; its best epoch is restored (codebook included).
    validation_fraction : float, default=0.1
        Held-out part of the calibration set, shared by both stages.
    n_init_batches : int, default=50
        The initial codewords are drawn (without replacement, among distinct
        vectors) from the slots of this many shuffled batches.
    random_state : int, RandomState instance or None, default=None
        Seeds the split, the codebook, the initialisations and the batches.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where both stages are trained and evaluated.
    verbose : int, default=0
        0: silent. 1: a progress bar on stderr for each training phase (its
        name, epoch k of ``max_iter``, elapsed and remaining time, the
        validation loss). 2: also one line per epoch.

    Attributes
    ----------
    codebook_ : ndarray of shape (n_codewords, d)
        The codebook.
    codeword_usage_ : ndarray of shape (n_codewords,)
        Number of slots of the calibration embeddings assigned to each
        codeword.
    head_mode_ : {"finetune", "train", "frozen"}
        The head used (``head`` with ``"auto"`` resolved).
    head_validation_losses_ : dict
        Validation cross-entropy of stage 1 (at its restored epoch) for each
        head fitted: ``{"finetune": ..., "train": ...}`` with ``head="auto"``
        and ``coef``, one entry otherwise.
    head_coef_ : ndarray of shape (n_classes, n_features)
        Head on the quantized embeddings.
    head_intercept_ : ndarray of shape (n_classes,)
        Its bias.
    receivers_, senders_ : ndarray of shape (n_codewords, n_classes)
        ``A`` and ``B`` (``calibration="compositional"``).
    prior_logits_ : ndarray of shape (n_classes,)
        ``log pi`` up to a constant (``calibration="compositional"``).
    slot_scales_ : ndarray of shape (n_slots,)
        ``sigma^2`` per slot (ones unless ``learn_variance``).
    dirichlet_coef_, dirichlet_intercept_ : ndarray
        ``W`` and ``b`` (``calibration="dirichlet"``).
    n_iter_ : tuple of int
        Epochs run by stage 1 and stage 2.
    best_iter_ : tuple of int
        Epochs restored in each stage (0: the initial state).
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of embedding dimensions.

    Notes
    -----
    Implemented from the reference code (the paper's lost Eq. 7-8): the
    identity shift enters the linear term only, ``sigma^2`` is an
    unconstrained per-slot scalar, and there is no regulariser unless
    ``learn_variance``. Departures: the early-stopping split is taken from
    the calibration set (the paper's protocol; the code takes it from the
    evaluation data), the default EMA initialisation is the robust one, the
    head's log-probabilities come from ``log_softmax`` (the code clamps
    ``p`` at 1e-8). Sample weights weight both cross-entropies and the EMA
    statistics. The predicted class is the argmax of the calibrated
    probabilities: the head is retrained, so it can differ from the
    backbone's.

    **The head** (``benchmarks/bench_papers.py``, the "Reproducing the
    papers" page of the documentation). The paper trains a new head on the
    quantized embeddings (``head="train"``) and reports the backbone's head
    applied to them (VQ_frz, ``head="frozen"``) as an ablation. On seven
    real tasks (2,000 calibration rows, 5 seeds), the backbone's head
    trained further (``head="finetune"``) had a higher test accuracy than
    the new head on six (letter 0.9432 against 0.9219, portal_rodents
    0.8375 against 0.8203; satimage 0.8797 against 0.8808) and a lower LCE
    and NLL on five (letter NLL 0.190 against 0.270; on fashion_mnist and
    wordnet_supersenses, whose networks are badly over-confident, the new
    head had the lower NLL, 0.357 against 0.415 and 1.57 against 1.96). A
    new head from a random start has only the calibration set to learn
    from, far less than the backbone had. But on three other held-out tasks
    (6, 26 and 10 classes, 128- to 256-d embeddings) the new head had the
    lower LCE on all three (e.g. 0.00417 against 0.00864) and the better
    accuracy on the 10-class image task (0.908 against 0.9011). Neither wins
    everywhere, so when ``coef`` is given the default (``head="auto"``)
    fits both on the same split and seed and keeps the one of lower
    validation cross-entropy: its fitted attributes are exactly those of a
    fit with that ``head`` and the same ``random_state``. The choice is
    ``head_mode_``, the two losses ``head_validation_losses_``, and
    ``verbose`` prints them (after the two stage-1 bars, fine-tuned head
    first). Without ``coef``, the paper's new head is the only option.

    **The paper's LCE claim did not carry over** to those tasks: VQ did not
    have the lowest LCE on any of them (a global, one-vs-rest or other
    local method did), and its accuracy was within 0.2 points of the
    network's on four of seven (3.9 points below on wordnet_supersenses).
    Two causes were found. The embeddings are 64- or 128-dimensional, so
    the default 64 slots are 1- or 2-dimensional (the paper's defaults are
    for 512- to 2048-d backbones), and fewer, wider slots lose accuracy in
    the quantization (letter: 16 slots 0.882, 8 slots 0.778, against
    0.947). And on accurate networks the compositional map (``2 K C``
    parameters, 3,328 on letter) over-fits from the first epoch: the
    validation NLL rose from 0.134 at the identity start to 0.179 after one
    epoch (learning rate 1e-3, and likewise at 1e-4), so early stopping
    keeps the identity and VQ equals its head. Where the network is less
    accurate (satimage) the map trains and VQ's LCE is below temperature
    scaling's (0.0078 against 0.0103).

    When the backbone's head is given (``coef``), the accuracy of the
    calibrated probabilities on the validation split is compared with that
    of ``coef`` and ``intercept`` on the unquantized embeddings of the same
    rows, and a drop of more than one point and two standard errors of the
    paired difference raises an
    :class:`~skcal.exceptions.AccuracyDropWarning` (quantization lost what
    the head needs: raise ``n_slots`` or ``n_codewords``). Without ``coef``
    there is no head to compare with.

    **Cost in the number of classes.** ``softplus`` acts on every entry of
    each sample's ``C x C`` matrix ``M`` and ``log B`` sums ``lgamma`` over
    all of them, so the compositional map costs ``O(C^2 K)`` multiply-adds
    and ``O(C^2)`` softplus and lgamma (digamma in training) per sample and
    pass, whatever the rank of ``M``. Memory is bounded: the map is computed
    in blocks of rows and columns (about 4M numbers each) in the forward and
    backward passes, so it holds ``O(n (C + K))`` numbers and a few blocks.
    At 1,000 classes that is about 1e6 lgamma per sample and pass: on one
    CPU core an epoch takes about 0.1 s per sample and a prediction 0.05 s
    (``benchmarks/bench_many_classes.py``), so a fit on thousands of samples
    takes hours; use ``device="cuda"``, or ``calibration="dirichlet"``
    (``O(C^2)`` multiply-adds per sample) when no GPU is at hand.

    References
    ----------
    L. Barbera, L. Perini, G. De Toni, A. Passerini, A. Pugnana. "Divide et
    Calibra: multiclass local calibration by vector quantization".
    arXiv:2605.21060, 2026.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import VQLocalCalibrator
    >>> from skcal.utils._testing import make_region_miscalibrated_embeddings
    >>> X, y, _, _, _ = make_region_miscalibrated_embeddings(1000, 3, random_state=0)
    >>> vq = VQLocalCalibrator(n_slots=8, n_codewords=16, random_state=0,
    ...                        device="cpu").fit(X, y)
    >>> vq.quantize(X[:2]).shape
    (2, 8)
    >>> vq.receivers_.size + vq.senders_.size + vq.prior_logits_.size  # 2KC + C
    99
    >>> bool(np.allclose(vq.predict_proba(X).sum(axis=1), 1.0))
    True
    """

    _parameter_constraints: dict = {
        **BaseLocalCalibrator._parameter_constraints,
        "n_slots": [Interval(Integral, 1, None, closed="left")],
        "n_codewords": [Interval(Integral, 1, None, closed="left")],
        "decay": [Interval(Real, 0, 1, closed="left")],
        "ema_init": [StrOptions({"robust", "zeros"})],
        "codebook": [StrOptions({"ema", "data", "normal"})],
        "head": [StrOptions({"auto", "train", "frozen", "finetune"})],
        "coef": ["array-like", None],
        "intercept": ["array-like", None],
        "calibration": [StrOptions({"compositional", "dirichlet", "none"})],
        "learn_variance": ["boolean"],
        "reg_lambda": [Interval(Real, 0, None, closed="left")],
        "identity_shift": ["boolean"],
        **TRAINING_CONSTRAINTS,
        **MINIBATCH_CONSTRAINTS,
        "n_init_batches": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        *,
        n_slots=64,
        n_codewords=64,
        decay=0.99,
        ema_init="robust",
        codebook="ema",
        head="auto",
        coef=None,
        intercept=None,
        classes=None,
        calibration="compositional",
        learn_variance=False,
        reg_lambda=1e-4,
        identity_shift=True,
        learning_rate=1e-3,
        weight_decay=1e-3,
        batch_size=128,
        max_iter=100,
        n_iter_no_change=10,
        validation_fraction=0.1,
        n_init_batches=50,
        random_state=None,
        device="auto",
        verbose=0,
    ):
        self.n_slots = n_slots
        self.n_codewords = n_codewords
        self.decay = decay
        self.ema_init = ema_init
        self.codebook = codebook
        self.head = head
        self.coef = coef
        self.intercept = intercept
        self.classes = classes
        self.calibration = calibration
        self.learn_variance = learn_variance
        self.reg_lambda = reg_lambda
        self.identity_shift = identity_shift
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.n_iter_no_change = n_iter_no_change
        self.validation_fraction = validation_fraction
        self.n_init_batches = n_init_batches
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """The codebook ``K d``, the head ``C (w d + 1)`` it trains (unless
        ``head="frozen"``) and the map: ``2 K C + C`` (plus ``w`` variances)
        for the compositional one, ``C^2 + C`` for a Dirichlet map."""
        n_features = n_classes if n_features is None else int(n_features)
        K = int(self.n_codewords)
        count = K * max(n_features // int(self.n_slots), 1)
        if self.head != "frozen":
            count += n_classes * (n_features + 1)
        if self.calibration == "compositional":
            count += 2 * K * n_classes + n_classes
            count += int(self.n_slots) if self.learn_variance else 0
        elif self.calibration == "dirichlet":
            count += n_classes * (n_classes + 1)
        return count

    @property
    def _uses_head(self):
        # a given coef fixes the classes (row j is class j) in both modes, so
        # that a class absent from y keeps its column instead of vanishing
        return self.head in ("frozen", "finetune") or self.coef is not None

    def _candidate_heads(self):
        """The heads stage 1 fits: ``head``, or with ``"auto"`` both
        ``"finetune"`` and ``"train"`` when ``coef`` is given (``"train"``
        otherwise)."""
        if self.head != "auto":
            return (self.head,)
        return ("train",) if self.coef is None else ("finetune", "train")

    def _fit_head(self, X, y_index, sample_weight):
        raise ValueError(
            f"head={self.head!r} starts from the backbone's head (head='frozen' "
            "applies it to the quantized embeddings, head='finetune' trains it "
            "further on them): pass it as coef (n_classes, n_features) and "
            "intercept, or use head='train' (a new head)."
        )

    def _fit(self, X, y_index, sample_weight):
        self._check_slots(X.shape[1])
        rng = check_random_state(self.random_state)
        split_seed, seed1, seed2 = rng.randint(np.iinfo(np.int32).max, size=3)
        val, train = stratified_split(
            y_index,
            self.validation_fraction,
            X.shape[0],
            split_seed,
            "VQLocalCalibrator",
        )
        self._check_cost(check_device(self.device))
        split = dict(train_idx=train, val_idx=val)
        stage1 = self._stage1(
            X, y_index, sample_weight, options=training_options(self, seed1), **split
        )
        self.codebook_ = stage1.codebook
        self.head_coef_ = stage1.coef
        self.head_intercept_ = stage1.intercept
        head = self._head_outputs(X)
        self._count_codewords(head.index)
        self.slot_scales_ = np.ones(self.n_slots)
        stage2 = None
        if self.calibration != "none":
            stage2 = self._calibra(
                head,
                y_index,
                sample_weight,
                options=training_options(self, seed2),
                **split,
            )
        self.best_iter_ = (stage1.best_epoch, stage2.best_epoch if stage2 else 0)
        self.n_iter_ = (stage1.n_epochs, stage2.n_epochs if stage2 else 0)
        if self.coef is not None:
            self._check_accuracy(X[val], y_index[val], sample_weight[val])

    def _check_accuracy(self, X, y_index, sample_weight):
        """:func:`warn_accuracy_drop` on the validation rows."""
        d = X.shape[1] // self.n_slots
        head = {
            "frozen": "the backbone's head reads the quantized embeddings",
            "finetune": "the backbone's head is trained further on the "
            "quantized embeddings (head='finetune')",
            "train": "a new head is trained on the quantized embeddings "
            "(head='train'; a head stopped early by max_iter or n_iter_no_change "
            "loses accuracy too, and head='finetune' starts from the "
            "backbone's)",
        }[self.head_mode_]
        warn_accuracy_drop(
            "VQLocalCalibrator",
            y_index,
            self._predict_proba(X),
            self._logits(X),
            sample_weight,
            f"Each slot of {d} dimension(s) is replaced by one of "
            f"{self.n_codewords} codewords and {head}. Quantize more finely "
            f"(more slots than n_slots={self.n_slots}, so fewer dimensions "
            f"per slot, or more codewords than n_codewords="
            f"{self.n_codewords}), or use a global calibrator of the head's "
            f"logits if accuracy matters.",
        )

    def _check_slots(self, n_features):
        if n_features % self.n_slots:
            raise ValueError(
                f"n_slots={self.n_slots} must divide the number of features, "
                f"{n_features}: each slot is a contiguous block of "
                f"n_features / n_slots dimensions. Choose a divisor of "
                f"{n_features} (e.g. {np.gcd(n_features, self.n_slots)}) or pad "
                "the embeddings with zero columns."
            )

    def _check_cost(self, device_type):
        n_classes = len(self.classes_)
        work = n_classes * n_classes * self.n_codewords
        if (
            self.calibration == "compositional"
            and device_type == "cpu"
            and work > _MAX_CPU_MAP_WORK
        ):
            raise ValueError(
                f"VQLocalCalibrator's region map costs n_classes^2 * n_codewords "
                f"= {work:.3g} operations per sample and epoch ({n_classes} "
                f"classes): on the CPU the fit would take hours (about 0.1 s per "
                f"sample and epoch at 1,000 classes). Fit on a GPU "
                f"(device='cuda'), use calibration='dirichlet' (a global map on "
                f"the quantized head), or a global calibrator such as "
                f"TemperatureScaling on the head's logits."
            )

    def _stage1(self, X, y_index, sample_weight, **kwargs):
        """Stage 1 for every candidate head (same split and seed); keeps the
        one of lowest validation loss (the first on ties), as ``head_mode_``."""
        fits = {
            mode: self._divide(mode, X, y_index, sample_weight, **kwargs)
            for mode in self._candidate_heads()
        }
        losses = {mode: float(fit.val_loss) for mode, fit in fits.items()}
        # a NaN loss (diverged head) never wins
        self.head_mode_ = min(
            losses, key=lambda m: np.inf if np.isnan(losses[m]) else losses[m]
        )
        self.head_validation_losses_ = losses
        if len(fits) > 1 and self.verbose:
            other = next(mode for mode in losses if mode != self.head_mode_)
            print(
                f"VQLocalCalibrator: head='auto' kept head={self.head_mode_!r}: "
                f"validation loss {losses[self.head_mode_]:.6g}, against "
                f"{losses[other]:.6g} for head={other!r}",
                file=sys.stderr,
            )
        return fits[self.head_mode_]

    def _divide(self, mode, X, y_index, sample_weight, **kwargs):
        """Stage 1 with head ``mode``: the codebook and the head
        (:func:`fit_divide`)."""
        given = mode in ("frozen", "finetune")
        return fit_divide(
            X,
            y_index,
            sample_weight,
            n_classes=len(self.classes_),
            n_slots=self.n_slots,
            n_codewords=self.n_codewords,
            codebook_mode=self.codebook,
            ema_init=self.ema_init,
            decay=float(self.decay),
            head_coef=self.coef_ if given else None,
            head_intercept=self.intercept_ if given else None,
            train_head=mode != "frozen",
            n_init_batches=self.n_init_batches,
            **kwargs,
        )

    def _count_codewords(self, index):
        """``codeword_usage_``, and a warning about the unused codewords."""
        self.codeword_usage_ = np.bincount(index.ravel(), minlength=self.n_codewords)
        dead = np.flatnonzero(self.codeword_usage_ == 0)
        if dead.size:
            warn(
                f"{dead.size} of {self.n_codewords} codewords are used by no slot "
                f"of the calibration embeddings (e.g. {dead[:5].tolist()}); they "
                "waste parameters. Lower n_codewords, or use ema_init='robust'.",
                CodebookWarning,
            )

    def _calibra(self, head, y_index, sample_weight, **kwargs):
        """Stage 2: the calibration map, stored as fitted attributes."""
        if self.calibration == "dirichlet":
            fit = fit_global_dirichlet_map(
                head.log_proba, y_index, sample_weight, **kwargs
            )
            self.dirichlet_coef_ = fit.map.coef
            self.dirichlet_intercept_ = fit.map.intercept
            return fit
        fit = fit_compositional_map(
            head.index,
            head.log_proba,
            y_index,
            sample_weight,
            n_codewords=self.n_codewords,
            learn_variance=bool(self.learn_variance),
            reg=float(self.reg_lambda),
            identity_shift=bool(self.identity_shift),
            **kwargs,
        )
        self.receivers_ = fit.map.receivers
        self.senders_ = fit.map.senders
        self.prior_logits_ = fit.map.prior_logits
        if self.learn_variance:
            self.slot_scales_ = fit.map.slot_scales
        return fit

    def _head_outputs(self, X):
        return vq_head_log_proba(
            X,
            self.codebook_,
            self.head_coef_,
            self.head_intercept_,
            self.n_slots,
            self.device,
        )

    def _calibration_map(self):
        """The fitted stage-2 map, or None with ``calibration="none"``."""
        if self.calibration == "none":
            return None
        if self.calibration == "dirichlet":
            return GlobalDirichletMap(self.dirichlet_coef_, self.dirichlet_intercept_)
        return CompositionalMap(
            self.receivers_,
            self.senders_,
            self.prior_logits_,
            self.slot_scales_ if self.learn_variance else None,
            identity_shift=bool(self.identity_shift),
        )

    def _predict_proba(self, X):
        head = self._head_outputs(X)
        return vq_calibrated_proba(
            head.index, head.log_proba, self._calibration_map(), self.device
        )

    def to_torch(self):
        """The fitted calibrator as a torch module: embeddings to calibrated
        probabilities.

        The quantization of the slots by ``codebook_``, the head
        ``head_coef_``, ``head_intercept_``, the calibration map (none,
        the global Dirichlet map, or the compositional map of the codeword
        counts), a softmax: state of a fixed size, whatever the size of the
        calibration set. See :func:`skcal.export.to_torch`.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> from skcal import VQLocalCalibrator
        >>> from skcal.export import check_export
        >>> from skcal.utils._testing import make_region_miscalibrated_embeddings
        >>> X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        ...     300, 3, random_state=0)
        >>> cal = VQLocalCalibrator(n_slots=4, n_codewords=8, max_iter=5,
        ...                         random_state=0).fit(X, y)
        >>> bool(check_export(cal, X, cal.to_torch()) < 1e-10)
        True
        """
        from .._torch._export import Chain, Softmax, VQLogits

        check_is_fitted(self)
        params = None
        if self.calibration == "dirichlet":
            params = (self.dirichlet_coef_.T, self.dirichlet_intercept_)
        elif self.calibration != "none":
            prior = np.asarray(self.prior_logits_, dtype=np.float64)
            top = prior.max()
            log_prior = prior - (top + np.log(np.exp(prior - top).sum()))
            scales = self.slot_scales_ if self.learn_variance else np.ones(self.n_slots)
            params = (self.receivers_, self.senders_, log_prior, scales,
                      self.identity_shift)  # fmt: skip
        logits = VQLogits(self.codebook_, self.head_coef_, self.head_intercept_,
                          self.n_slots, self.calibration, params)  # fmt: skip
        return Chain(logits, Softmax())

    def quantize(self, X) -> np.ndarray:
        """Codeword index of every slot: the cell of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        ndarray of shape (n_samples, n_slots)
            Indices into ``codebook_``.
        """
        check_is_fitted(self)
        X = self._validate_embeddings(X, reset=False)
        return self._head_outputs(X).index
