"""A cross-encoder run in kb's own process, from an ONNX export of a Hugging Face
sequence-classification model (ms-marco-MiniLM-L-6-v2, jina-reranker-v1-tiny-en,
bge-reranker-base…): a folder holding `model.onnx` (or `onnx/model.onnx`, as the Hugging
Face repositories of such exports lay it out) and `tokenizer.json`.

Each (query, passage) pair is tokenized as the model was trained to read it (its tokenizer's
own pair template), cut to the model's window, and all of them are scored in one batch.
onnxruntime and tokenizers (the `rerank` extra) are imported when the model is first needed:
a search with nothing to score, or every score cached, loads neither.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb.errors import KbError, first_line

MODEL_FILES = ("model.onnx", "onnx/model.onnx")
TOKENIZER_FILE = "tokenizer.json"
# Tokens a pair is cut to when the tokenizer names no window: what BERT-sized
# cross-encoders read.
DEFAULT_WINDOW = 512
# A tokenizer_config.json's model_max_length past this is the "no limit" placeholder some
# exports write (1e30), not a window.
_MAX_WINDOW = 100_000
# The inputs a BERT-family export takes; the ids alone are required.
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PAD_TOKENS = ("[PAD]", "<pad>")


@dataclass(frozen=True)
class _Loaded:
    """A model ready to score: its session, its tokenizer (window and padding set), and the
    inputs it takes."""

    session: Any  # onnxruntime.InferenceSession: the library is imported only to load it
    tokenizer: Any  # tokenizers.Tokenizer
    inputs: tuple[str, ...]
    identity: str  # of the files it was read from


class OnnxCrossEncoder:
    """A local cross-encoder (kb.models.base.CrossEncoder), loaded on its first score and kept
    until its files change (a daemon then reads the new model)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.name = f"onnx:{folder.name}"
        self._loaded: _Loaded | None = None
        self._loading = threading.Lock()  # a daemon's searches may all ask at once

    def files(self) -> tuple[Path, Path]:
        """The model and tokenizer files, or a KbError naming the folder and what it lacks."""
        if not self.folder.is_dir():
            raise KbError(
                f"the re-ranking model folder {self.folder} does not exist (rerank.folder)"
            )
        model = next((self.folder / f for f in MODEL_FILES if (self.folder / f).is_file()), None)
        if model is None:
            raise KbError(
                f"no model.onnx in {self.folder}: rerank.folder must hold a cross-encoder "
                "exported to ONNX, with its tokenizer.json"
            )
        tokenizer = self.folder / TOKENIZER_FILE
        if not tokenizer.is_file():
            raise KbError(f"no tokenizer.json in {self.folder}, beside its model.onnx")
        return model, tokenizer

    def identity(self) -> str:
        # The files' sizes and times, not their hash: a hash would read hundreds of
        # megabytes at every `kb query`, and a model replaced in place changes both.
        parts = ["onnx", str(self.folder.resolve())]
        for path in self.files():
            stat = path.stat()
            parts += [path.name, str(stat.st_size), str(stat.st_mtime_ns)]
        return " ".join(parts)

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        loaded = self._load()
        import numpy as np

        encodings = loaded.tokenizer.encode_batch([(query, p) for p in passages])
        columns = {
            "input_ids": [e.ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
        }
        feed = {name: np.array(columns[name], dtype=np.int64) for name in loaded.inputs}
        try:
            outputs = loaded.session.run(None, feed)
        except Exception as exc:  # onnxruntime's errors share no base class but Exception
            raise KbError(
                f"the re-ranking model in {self.folder} failed to run: {first_line(exc)}"
            ) from None
        return self._scores(np.asarray(outputs[0], dtype=np.float64), len(passages))

    def close(self) -> None:
        with self._loading:
            self._loaded = None  # the session's memory goes with it

    def _scores(self, logits: Any, count: int) -> list[float]:
        """One relevance score per pair from the model's first output: its only column, or
        with two classes (not relevant, relevant) the log-odds of the second, which orders
        as its probability does."""
        if logits.ndim == 2 and logits.shape[1] == 1:
            logits = logits[:, 0]
        elif logits.ndim == 2 and logits.shape[1] == 2:
            logits = logits[:, 1] - logits[:, 0]
        if logits.shape != (count,):
            given = (
                f"{logits.shape[1]} numbers a pair"
                if logits.ndim == 2 and logits.shape[0] == count
                else f"an output of shape {list(logits.shape)} for {count} pairs"
            )
            raise KbError(
                f"the model in {self.folder} is not a relevance cross-encoder: it gives "
                f"{given}, where kb reads one (a score) or two (not relevant, relevant)"
            )
        scores = [float(x) for x in logits]
        if not all(math.isfinite(s) for s in scores):
            raise KbError(f"the re-ranking model in {self.folder} gave scores that are not numbers")
        return scores

    def _load(self) -> _Loaded:
        with self._loading:
            identity = self.identity()
            if self._loaded is None or self._loaded.identity != identity:
                self._loaded = self._read(identity)
            return self._loaded

    def _read(self, identity: str) -> _Loaded:
        model, tokenizer_file = self.files()
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError:
            raise KbError(
                'rerank.backend = "onnx" needs onnxruntime and tokenizers: '
                "pip install 'kb[rerank]'"
            ) from None
        try:
            tokenizer = Tokenizer.from_file(str(tokenizer_file))
        except Exception as exc:  # the Rust library raises a bare Exception for every fault
            raise KbError(f"cannot read {tokenizer_file}: {first_line(exc)}") from None
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # errors only: its warnings would break kb's one line
        try:
            session = onnxruntime.InferenceSession(
                str(model), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime's errors share no base class but Exception
            raise KbError(
                f"cannot load the re-ranking model in {self.folder}: {first_line(exc)}"
            ) from None
        inputs = tuple(i.name for i in session.get_inputs())
        if "input_ids" not in inputs or any(name not in _INPUTS for name in inputs):
            raise KbError(
                f"the model in {self.folder} is not a cross-encoder kb can run: it takes "
                f"{', '.join(inputs)}, where kb gives {', '.join(_INPUTS)}"
            )
        if tokenizer.truncation is None:
            tokenizer.enable_truncation(self._window())
        if tokenizer.padding is None:
            token = self._pad_token(tokenizer)
            tokenizer.enable_padding(pad_id=tokenizer.token_to_id(token) or 0, pad_token=token)
        return _Loaded(session, tokenizer, inputs, identity)

    def _config(self) -> dict[str, Any]:
        """tokenizer_config.json, where an export has one: its window and padding token."""
        try:
            config = json.loads((self.folder / "tokenizer_config.json").read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return config if isinstance(config, dict) else {}

    def _window(self) -> int:
        window = self._config().get("model_max_length")
        if isinstance(window, int) and not isinstance(window, bool) and 0 < window <= _MAX_WINDOW:
            return window
        return DEFAULT_WINDOW

    def _pad_token(self, tokenizer: Any) -> str:
        named = self._config().get("pad_token")
        if isinstance(named, dict):
            named = named.get("content")
        known = [named] if isinstance(named, str) else []
        for token in [*known, *_PAD_TOKENS]:
            if tokenizer.token_to_id(token) is not None:
                return str(token)
        return _PAD_TOKENS[0]  # padded positions are masked out: their id only has to exist
