"""The models a config names, each made when first used and kept: the chat model, the one
that answers questions, the embedder, the cross-encoder, and the re-ranker over them."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from kb.config import Config
from kb.llm import make_chat, make_cross_encoder, make_embedder
from kb.models.base import ChatModel, CrossEncoder, Embedder
from kb.store.caches import Caches

if TYPE_CHECKING:
    from kb.search.rerank import HitReranker


class Models:
    """A config's models. `chat` and `embedder` may be given or set (tests use counting or
    failing fakes); otherwise they are made from `config.llm` when first used."""

    def __init__(
        self,
        config: Config,
        caches: Caches,
        *,
        chat: ChatModel | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.config = config
        self.caches = caches  # where the re-rankers keep their judgements
        self._chat = chat
        self._embedder = embedder
        self._answer_chat: ChatModel | None = None
        # Kept once made: a local cross-encoder loads its model on its first use, once for
        # all the searches of a daemon or a web page.
        self._cross_encoder: CrossEncoder | None = None
        self._making = threading.Lock()

    @property
    def chat(self) -> ChatModel:
        if self._chat is None:
            self._chat = make_chat(self.config.llm)
        return self._chat

    @chat.setter
    def chat(self, model: ChatModel) -> None:
        self._chat = model

    @property
    def answer_chat(self) -> ChatModel:
        """The chat model that answers questions: `[ask]`'s when it names one of its own
        (made when first used), else `chat`."""
        if not self.config.ask.own_model():
            return self.chat
        if self._answer_chat is None:
            self._answer_chat = make_chat(self.config.ask.llm(self.config.llm), section="ask")
        return self._answer_chat

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = make_embedder(self.config.llm)
        return self._embedder

    @embedder.setter
    def embedder(self, model: Embedder) -> None:
        self._embedder = model

    def cross_encoder(self) -> CrossEncoder:
        """The cross-encoder of `[rerank]`: a /rerank server's client, or a local ONNX model
        (loaded when it first scores)."""
        with self._making:
            if self._cross_encoder is None:
                self._cross_encoder = make_cross_encoder(self.config.rerank)
            return self._cross_encoder

    def reranker(self) -> HitReranker:
        """The re-ranker `rerank.backend` names: the chat model's judge, or a cross-encoder."""
        candidates, chars = self.config.rerank.bounds(self.config.query)
        if self.config.rerank.backend != "chat":
            from kb.search.crossencoder import CrossEncoderReranker

            return CrossEncoderReranker(
                self.cross_encoder(), self.caches, candidates=candidates, chars=chars
            )
        from kb.search.rerank import Reranker

        return Reranker(
            self.chat,
            self.caches,
            candidates=candidates,
            chars=chars,
            context_window=self.config.llm.context_window,
            concurrency=self.config.llm.concurrency,
        )

    def close(self) -> None:
        with self._making:
            if self._cross_encoder is not None:
                self._cross_encoder.close()
