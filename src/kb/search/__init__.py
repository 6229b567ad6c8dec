"""Queries over the index: one search resolved (`plan`) and run (`query`), the time a
question names (`when`), the chat model's re-ranking (`rerank`) and answers with citations
(`answer`)."""
