"""Each chunk's context: what it is searched by besides its own words.

- `needs`: which outputs a note needs from the chat model, and the cache key of each; the
  build id that says how a stored note was built;
- `summaries`: the summaries core (file and chunk summaries, the first-person rewrite),
  and the structural context that asks no model;
- `writers`: the voice of each note, each chunk's statements, and the passages made of them;
- `passage_texts`: what a chunk's passages say (its paragraphs in their writer's voice, the
  lines the model wrote of it), each embedded as a vector of its own;
- `driver`: runs a core's prompts on the chat model, through the pool;
- `layout`: the texts full-text search and the embedder read, laid out from the parts;
- `contextualizer`: the cores joined to the model, as the indexer and enrichment use them;
- `voices`: whose "I" a note is, asked of the model and checked;
- `chunk_writes`: the lines the model writes of each chunk (statements, questions), checked;
- `embedding`: a note's built context as chunk rows with vectors.

The cores are generators that yield prompts and read answers: what a note needs, and what
is made of the answers, is decided without waiting on a model.
"""

from kb.context.contextualizer import Contextualizer
from kb.context.layout import LAYOUT_VERSION, fit, full_context, header_line, summaries_start
from kb.context.needs import ContextBuild
from kb.context.records import ContextChunk, FileContext, NoteFacts

__all__ = [
    "LAYOUT_VERSION",
    "ContextBuild",
    "ContextChunk",
    "Contextualizer",
    "FileContext",
    "NoteFacts",
    "fit",
    "full_context",
    "header_line",
    "summaries_start",
]
