"""Queries over the index: one search (`query`), the time a question names (`when`), the
chat model's re-ranking (`rerank`) and answers with citations (`answer`)."""
