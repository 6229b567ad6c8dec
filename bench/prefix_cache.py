"""How many prompt tokens does a chunk-summary call really make the server evaluate?

kb puts everything a note's chunk prompts share (instructions, worked example, file
summary) first, so llama.cpp (and Ollama) re-use the evaluated prefix of the previous
prompt and only evaluate the chunk. This benchmark sends the chunk prompts of a few notes
to a real llama.cpp server twice, in kb's layout and with the chunk placed before the file
summary, and reads from the server's log how many tokens each call evaluated.

    scripts/test-models install
    .venv/bin/python bench/prefix_cache.py [--model 0.5b|1.5b] [--notes 4]

Only output tokens = 1 are asked for: generation does not depend on the layout.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import modelstack  # noqa: E402
from kb.context import header_line  # noqa: E402
from kb.llm.openai import OpenAIChat  # noqa: E402
from kb.models.base import Prompt  # noqa: E402
from kb.prompting import prompts  # noqa: E402
from kb.vault.chunking import chunk_body  # noqa: E402
from kb.vault.parsing import decode, parse_note  # noqa: E402

_EVALUATED = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_PREFIX = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")


@dataclass
class Measured:
    prompt_tokens: int  # what the prompt holds
    evaluated: int  # what the server had to compute
    eval_ms: float


class ServerLog:
    """Reads the lines a llama.cpp server appends to its log after each request."""

    def __init__(self, path: Path) -> None:
        self.file = path.open()
        self.file.seek(0, 2)

    def next_measure(self, timeout: float = 30) -> Measured:
        deadline = time.monotonic() + timeout
        reused = None
        while time.monotonic() < deadline:
            line = self.file.readline()
            if not line:
                time.sleep(0.05)
                continue
            if match := _PREFIX.search(line):
                reused = int(match.group(1))
            if match := _EVALUATED.search(line):
                evaluated = int(match.group(2))
                total = evaluated + (reused or 0)
                return Measured(total, evaluated, float(match.group(1)))
        raise SystemExit("prefix_cache: the server log shows no prompt evaluation")


def chunk_first(prompt: Prompt) -> Prompt:
    """The same prompt with the chunk before the file summary: nothing note-wide leads."""
    summary_block, _, rest = prompt.user.partition("\n\n<chunk_headers>")
    chunk_part, _, question = ("<chunk_headers>" + rest).rpartition("\n\n")
    user = f"{chunk_part}\n\n{summary_block}\n\n{question}"
    return Prompt(
        task=prompt.task,
        system=prompt.system,
        user=user,
        max_tokens=prompt.max_tokens,
        num_ctx=prompt.num_ctx,
        inputs=prompt.inputs,
        examples=prompt.examples,
    )


def note_prompts(path: Path, chat: OpenAIChat) -> list[Prompt]:
    note = parse_note(decode(path.read_bytes()))
    chunks = chunk_body(note.body, max_chars=1600, first_line=note.body_start_line)
    excerpt = [c.content for c in chunks[:2] + chunks[-2:]]
    summary = chat.complete(
        prompts.file_summary_prompt(
            excerpt, owner=None, max_tokens=120, context_window=modelstack.CHAT_CONTEXT
        )
    )
    return [
        prompts.chunk_summary_prompt(
            " ".join(summary.split()),
            header_line(c.header_path),
            c.content,
            owner=None,
            max_tokens=1,
            context_window=modelstack.CHAT_CONTEXT,
        )
        for c in chunks
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("0.5b", "1.5b"), default="0.5b")
    parser.add_argument("--notes", type=int, default=4, help="the N notes with most chunks")
    parser.add_argument("--vault", type=Path, default=ROOT / "examples" / "vault")
    args = parser.parse_args()

    stack = modelstack.Stack(modelstack.cache_dir())
    model = modelstack.SMALL if args.model == "0.5b" else modelstack.LARGE
    server = modelstack.spawn(stack, model)
    try:
        chat = OpenAIChat(server.url, model, api_key="", timeout=600, retries=0)
        notes = sorted(
            (p for p in args.vault.rglob("*.md") if not any(x.startswith(".") for x in p.parts)),
            key=lambda p: -len(p.read_text()),
        )[: args.notes]
        by_note = {p.relative_to(args.vault).as_posix(): note_prompts(p, chat) for p in notes}
        log = ServerLog(Path(server.log))
        results: dict[str, list[Measured]] = {}
        for layout, shape in (
            ("kb layout (shared prefix first)", None),
            ("chunk first", chunk_first),
        ):
            measured = results.setdefault(layout, [])
            for note_prompts_ in by_note.values():
                for prompt in note_prompts_:
                    chat.complete(shape(prompt) if shape else prompt)
                    measured.append(log.next_measure())
        chunks = sum(len(p) for p in by_note.values())
        print(f"model {model}; {len(by_note)} notes, {chunks} chunk prompts: {', '.join(by_note)}")
        print(
            f"{'layout':34} {'prompt tok/chunk':>17} {'evaluated/chunk':>16} {'eval ms/chunk':>14}"
        )
        for layout, measured in results.items():
            print(
                f"{layout:34} {statistics.mean(m.prompt_tokens for m in measured):17.1f} "
                f"{statistics.mean(m.evaluated for m in measured):16.1f} "
                f"{statistics.mean(m.eval_ms for m in measured):14.0f}"
            )
    finally:
        modelstack.kill(server.pid)


if __name__ == "__main__":
    main()
