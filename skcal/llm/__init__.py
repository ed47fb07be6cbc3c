"""Language-model outputs: readers of ``top_logprobs`` records, the top-k
score type, prompt-level corrections and P(correct) from a scalar confidence.

:func:`read_option_logprobs` turns the responses of an OpenAI-compatible API
(OpenAI, vLLM, llama.cpp, MLX servers) into log-probabilities over declared
options (``["A", "B", "C", "D"]``, ``["Yes", "No"]``), usable as logits by
the calibrators. :func:`read_top_logprobs` and :class:`TopKScores` keep the
top-k of a next-token distribution over a vocabulary of 32k to 256k tokens
without ever building the n x vocabulary matrix.
:class:`ContextualCalibrator` and :class:`BatchCalibrator` correct a
prompt's bias without labels, :class:`GroupedTemperatureScaling` fits one
temperature per task or prompt template, and :class:`CorrectnessCalibrator`
maps one confidence score per answer to P(correct).
"""

from ._correctness import CorrectnessCalibrator
from ._corrections import (
    BatchCalibrator,
    ContextualCalibrator,
    GroupedTemperatureScaling,
)
from ._readers import OptionLogprobs, read_option_logprobs, read_top_logprobs
from ._records import normalize_token
from ._topk import TopKScores

__all__ = [
    "BatchCalibrator",
    "ContextualCalibrator",
    "CorrectnessCalibrator",
    "GroupedTemperatureScaling",
    "OptionLogprobs",
    "TopKScores",
    "normalize_token",
    "read_option_logprobs",
    "read_top_logprobs",
]
