"""Language-model outputs: readers of ``top_logprobs`` records and the top-k
score type.

:func:`read_option_logprobs` turns the responses of an OpenAI-compatible API
(OpenAI, vLLM, llama.cpp, MLX servers) into log-probabilities over declared
options (``["A", "B", "C", "D"]``, ``["Yes", "No"]``), usable as logits by
the calibrators. :func:`read_top_logprobs` and :class:`TopKScores` keep the
top-k of a next-token distribution over a vocabulary of 32k to 256k tokens
without ever building the n x vocabulary matrix.
"""

from ._readers import OptionLogprobs, read_option_logprobs, read_top_logprobs
from ._records import normalize_token
from ._topk import TopKScores

__all__ = [
    "OptionLogprobs",
    "TopKScores",
    "normalize_token",
    "read_option_logprobs",
    "read_top_logprobs",
]
