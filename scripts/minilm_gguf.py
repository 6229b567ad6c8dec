"""Convert all-MiniLM-L6-v2 (safetensors + WordPiece tokenizer) to a GGUF file for llama.cpp,
and compute reference embeddings straight from the original weights.

Run by `modelstack.py install` inside the stack's venv (it needs gguf, numpy, safetensors
and tokenizers): `python minilm_gguf.py SOURCE_DIR OUT.gguf REFERENCE.json`.

The reference is an independent implementation (the Hugging Face tokenizer and a NumPy
forward pass of BERT with mean pooling, as sentence-transformers does), so the tests can
check that the converted model, served by llama.cpp, gives the same vectors.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

# Texts whose reference vectors the tests compare against, and pairs whose similarity
# order a working embedding model must get right.
REFERENCE_TEXTS = [
    "Alex Doe climbed Mount Takao with Kenji on a Friday in April.",
    "A bowl of miso ramen with a soft-boiled egg takes thirty minutes on a weeknight.",
    "PostgreSQL VACUUM reclaims storage occupied by dead tuples.",
    "The billing anomaly detector flags invoices that deviate from the monthly baseline.",
    "<chunk_headers>\n# Home Server > ## Backups\n</chunk_headers>\n\nrestic snapshots go to a "
    "second disk every night and to object storage every week.",
]
_UNUSED_TENSORS = ("embeddings.position_ids", "pooler.")
# llama.cpp adds these to activations directly, and its CPU add wants both sides in f32.
_F32_TENSORS = ("position_embd.", "token_types.")


def convert(source: Path, out: Path) -> None:
    config = json.loads((source / "config.json").read_text())
    tokenizer = json.loads((source / "tokenizer.json").read_text())
    writer = gguf.GGUFWriter(str(out), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])

    writer.add_name("all-MiniLM-L6-v2")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)  # 1_Pooling/config.json: mean tokens
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    # WordPiece in llama.cpp's "phantom space" form, as its own converter writes it:
    # word-initial pieces get "▁", continuation pieces lose their "##".
    vocab = tokenizer["model"]["vocab"]
    tokens = [""] * len(vocab)
    for piece, index in vocab.items():
        tokens[index] = piece
    special = {t["content"] for t in tokenizer["added_tokens"] if t["special"]}
    types, pieces = [], []
    for piece in tokens:
        if piece in special:
            types.append(gguf.TokenType.CONTROL)
            pieces.append(piece)
        else:
            types.append(gguf.TokenType.NORMAL)
            pieces.append(piece[2:] if piece.startswith("##") else "\u2581" + piece)
    writer.add_token_type_count(config["type_vocab_size"])
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("bert-bge")  # the same uncased BERT vocabulary as bge-small
    writer.add_token_list(pieces)
    writer.add_token_types(types)
    gguf.SpecialVocab(source, n_vocab=len(pieces)).add_to_gguf(writer)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, config["num_hidden_layers"])
    for name, tensor in load_file(source / "model.safetensors").items():
        if name.startswith(_UNUSED_TENSORS):
            continue
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise SystemExit(f"minilm_gguf: no GGUF name for tensor {name}")
        # Matrices in f16 (matches the original to cosine 1.0000); norms and biases stay f32.
        half = tensor.ndim == 2 and not gguf_name.startswith(_F32_TENSORS)
        data = tensor.astype(np.float16 if half else np.float32)
        writer.add_tensor(gguf_name, data)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


class Bert:
    """BERT encoder + mean pooling in NumPy: the sentence-transformers computation."""

    def __init__(self, source: Path) -> None:
        self.config = json.loads((source / "config.json").read_text())
        self.w = load_file(source / "model.safetensors")
        self.tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
        self.tokenizer.no_padding()  # tokenizer.json pads to 128; pooling must see real tokens only
        self.tokenizer.enable_truncation(256)  # sentence-transformers' max_seq_length

    def _norm(self, x: np.ndarray, prefix: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True)
        x = (x - mean) / np.sqrt(var + self.config["layer_norm_eps"])
        return x * self.w[f"{prefix}.weight"] + self.w[f"{prefix}.bias"]

    def _dense(self, x: np.ndarray, prefix: str) -> np.ndarray:
        return x @ self.w[f"{prefix}.weight"].T + self.w[f"{prefix}.bias"]

    def embed(self, text: str) -> list[float]:
        ids = np.array(self.tokenizer.encode(text).ids)
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: len(ids)]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        heads = self.config["num_attention_heads"]
        size = x.shape[1] // heads
        erf = np.vectorize(math.erf)
        for layer in range(self.config["num_hidden_layers"]):
            p = f"encoder.layer.{layer}"
            q, k, v = (
                self._dense(x, f"{p}.attention.self.{n}").reshape(len(ids), heads, size)
                for n in ("query", "key", "value")
            )
            scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(size)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = np.einsum("hqk,khd->qhd", scores, v).reshape(len(ids), -1)
            x = self._norm(x + self._dense(attended, f"{p}.attention.output.dense"),
                           f"{p}.attention.output.LayerNorm")  # fmt: skip
            hidden = self._dense(x, f"{p}.intermediate.dense")
            hidden = 0.5 * hidden * (1 + erf(hidden / math.sqrt(2)))  # exact GELU
            x = self._norm(x + self._dense(hidden, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        pooled = x.mean(0)
        return (pooled / np.linalg.norm(pooled)).tolist()


def main() -> None:
    source, out, reference = (Path(a) for a in sys.argv[1:4])
    partial = out.with_name(out.name + ".partial")
    convert(source, partial)
    bert = Bert(source)
    reference.write_text(json.dumps({t: bert.embed(t) for t in REFERENCE_TEXTS}))
    partial.replace(out)


if __name__ == "__main__":
    main()
