"""A cross-encoder small enough to build in a test, laid out as a Hugging Face ONNX export
is (`model.onnx`, `tokenizer.json`), so kb loads and runs it for real with nothing
downloaded.

Its tokenizer is a word-level one with BERT's pair template (`[CLS] query [SEP] passage
[SEP]`, the passage's tokens of type 1). Its model looks up one weight per token and adds up
the weights of the passage's tokens (type 1, not padding): a passage scores the sum of the
weights of the words it holds, so the order it gives is known in advance.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import onnx
from onnx import TensorProto, helper
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

SPECIAL = ["[UNK]", "[CLS]", "[SEP]", "[PAD]"]
# ONNX's opset 17 and IR version 8: what every onnxruntime since 1.14 reads.
OPSET = 17
IR_VERSION = 8


def build_tokenizer(words: list[str]) -> Tokenizer:
    """A word-level tokenizer knowing `words` (lower-cased; any other word is [UNK])."""
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=SPECIAL, min_frequency=1)
    tokenizer.train_from_iterator([" ".join(words)], trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tokenizer


def build_model(
    tokenizer: Tokenizer,
    weights: Mapping[str, float],
    *,
    classes: int = 1,
    extra_inputs: tuple[str, ...] = (),
) -> onnx.ModelProto:
    """The scoring graph: each passage token's weight, summed, as `classes` columns (one: the
    sum; two: 0 then the sum, the "relevant" class last; more: the sum repeated). It takes
    BERT's three inputs, and `extra_inputs` it never reads."""
    vocab = tokenizer.get_vocab()
    table = [0.0] * len(vocab)
    for word, weight in weights.items():
        table[vocab[word.lower()]] = weight
    graph_inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
        for name in ("input_ids", "attention_mask", "token_type_ids", *extra_inputs)
    ]
    nodes = [
        helper.make_node("Gather", ["weights", "input_ids"], ["token_weights"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["token_type_ids"], ["second"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["token_weights", "mask"], ["kept"]),
        helper.make_node("Mul", ["kept", "second"], ["passage"]),
        helper.make_node("ReduceSum", ["passage", "axis"], ["sum"], keepdims=1),
    ]
    if classes == 1:
        nodes.append(helper.make_node("Identity", ["sum"], ["logits"]))
    else:
        nodes.append(helper.make_node("Mul", ["sum", "zero"], ["none"]))
        columns = ["none", "sum"] if classes == 2 else ["sum"] * classes
        nodes.append(helper.make_node("Concat", columns, ["logits"], axis=1))
    graph = helper.make_graph(
        nodes,
        "tiny-crossencoder",
        graph_inputs,
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        initializer=[
            helper.make_tensor("weights", TensorProto.FLOAT, [len(table)], table),
            helper.make_tensor("axis", TensorProto.INT64, [1], [1]),
            helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def write_crossencoder(
    folder: Path,
    weights: Mapping[str, float],
    *,
    words: list[str] | None = None,
    classes: int = 1,
    extra_inputs: tuple[str, ...] = (),
) -> Path:
    """A folder holding the tiny cross-encoder's model.onnx and tokenizer.json; its
    tokenizer knows `words` and the weighted ones."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(sorted({*(words or []), *(w.lower() for w in weights)}))
    tokenizer.save(str(folder / "tokenizer.json"))
    built = build_model(tokenizer, weights, classes=classes, extra_inputs=extra_inputs)
    onnx.save(built, folder / "model.onnx")
    return folder
