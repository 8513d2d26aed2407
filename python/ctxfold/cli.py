"""The `ctxfold` command: fit a conversation to a budget, analyse where its
tokens go, count tokens of files. Bad input exits with code 2 and one line;
long work shows progress on stderr when it is a terminal."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ctxfold.engine.config import STRATEGIES, EngineConfig
from ctxfold.engine.messages import parse_messages
from ctxfold.engine.context_engine import ContextEngine
from ctxfold.errors import CtxFoldError
from ctxfold.progress import ProgressBar, Spinner
from ctxfold.tokens import count_messages, get_tokenizer
from ctxfold.engine.results import ContextResult, Item

__all__ = ["main"]


class UsageError(Exception):
    """Bad input from the command line: reported in one line, exit code 2."""


def _version() -> str:
    try:
        return importlib.metadata.version("ctxfold")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        import ctxfold

        return str(getattr(ctxfold, "__version__", "unknown"))


def _reason(error: OSError) -> str:
    return (error.strerror or str(error)).lower()


def _read_text(path: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text ({e})") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read ({_reason(e)})") from None


def _read_json(path: str) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not valid UTF-8 JSON ({e})") from None


def _conversation(path: str) -> tuple[list[dict[str, Any]], str | None]:
    """A JSON list of messages, or an object with "messages" (and maybe "query")."""
    data = _read_json(path)
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return data["messages"], data.get("query")
    if isinstance(data, list):
        return data, None
    raise UsageError(f'{path}: expected a list of messages or {{"messages": [...]}}')


def _engine(args: argparse.Namespace) -> ContextEngine:
    strategy = {} if args.strategy is None else {"strategy": args.strategy}
    config = EngineConfig(budget=args.budget, **strategy)
    return ContextEngine(model=args.model, encoding=args.encoding, config=config)


def _check_writable(path: str | None) -> None:
    """Refuse an output path that cannot be written before the work, not after it."""
    if path is None:
        return
    file = Path(path)
    parent = file.parent
    if file.is_dir():
        raise UsageError(f"{path}: cannot write (is a directory)")
    if not parent.is_dir():
        raise UsageError(f"{path}: cannot write (no such directory: {parent})")
    if not os.access(file if file.exists() else parent, os.W_OK):
        raise UsageError(f"{path}: cannot write (permission denied)")


def _write(path: str | None, data: Any) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=2)
    if path is None:
        print(text)
        return
    try:
        Path(path).write_text(text + "\n", encoding="utf-8")
    except OSError as e:
        raise UsageError(f"{path}: cannot write ({_reason(e)})") from None


def _optimize(
    engine: ContextEngine, messages: list[dict[str, Any]], args: argparse.Namespace, query: str | None
) -> ContextResult:
    # optimize reports no steps while it runs, so a long fit shows a spinner with the time spent.
    with Spinner(f"ctxfold {args.command}", f"fitting {len(messages)} messages to {args.budget} tokens"):
        return engine.optimize(messages, query=args.query or query, budget=args.budget)


def cmd_fit(args: argparse.Namespace) -> int:
    _check_writable(args.out)
    _check_writable(args.report)
    messages, query = _conversation(args.conversation)
    result = _optimize(_engine(args), messages, args, query)
    _write(args.out, result.messages)
    if args.report:
        _write(args.report, {"report": result.report.to_dict(), "items": [json.loads(_dumps(i)) for i in result.items]})
    print(result.report.to_text(), file=sys.stderr)
    return 0


def _dumps(obj: Any) -> str:
    import msgspec

    return msgspec.json.encode(obj).decode("utf-8")


def cmd_analyze(args: argparse.Namespace) -> int:
    messages, query = _conversation(args.conversation)
    engine = _engine(args)
    # Sizes of the messages as passed: long tool output shows its true share, not what a fit cut it to.
    items = parse_messages(messages, engine.tokenizer, cache=engine.cache)
    original = {it.id: it.tokens for it in items}
    whole = max(sum(original.values()), 1)
    result = _optimize(engine, messages, args, query)
    print(f"{len(items)} messages, {engine.count(messages)} tokens ({engine.tokenizer.name})")
    keys: tuple[tuple[str, Callable[[Item], str]], ...] = (("role", lambda it: it.role), ("kind", lambda it: it.kind or "-"))
    for title, key in keys:
        n: Counter[str] = Counter()
        tokens: Counter[str] = Counter()
        for it in items:
            n[key(it)] += 1
            tokens[key(it)] += it.tokens
        print(f"\nby {title:<14} {'messages':>9} {'tokens':>10}  share")
        for name, size in tokens.most_common():
            print(f"  {name:<16} {n[name]:>9} {size:>10} {100 * size / whole:5.1f}%")
    report = result.report
    status_n: Counter[str] = Counter()
    status_in: Counter[str] = Counter()
    status_out: Counter[str] = Counter()
    for r in result.items:
        status_n[r.status] += 1
        status_in[r.status] += original.get(r.id, r.tokens_in)
        status_out[r.status] += r.tokens_out
    print(f"\nfit to {report.budget} ({report.strategy}): {report.tokens_in} -> {report.tokens_out} tokens")
    print(f"  {'status':<16} {'messages':>9} {'tokens':>10}  share {'-> tokens':>10}")
    for name, size in status_in.most_common():
        print(f"  {name:<16} {status_n[name]:>9} {size:>10} {100 * size / whole:5.1f}% {status_out[name]:>10}")
    if report.layers:
        print("layers: " + ", ".join(f"{k} {v}" for k, v in report.layers.items()))
    print("timings: " + ", ".join(f"{k} {v:.1f} ms" for k, v in report.timings_ms.items()))
    for warning in report.warnings:
        print(f"warning: {warning}")
    return 0


def cmd_count(args: argparse.Namespace) -> int:
    tokenizer = get_tokenizer(args.model, args.encoding)
    for path in args.files:  # a typo in the last of many paths fails before the work, not after
        if not Path(path).is_file():
            raise UsageError(f"{path}: no such file")
    total = 0
    rows: list[str] = []
    try:
        with ProgressBar(len(args.files), f"ctxfold {args.command}", unit="files") as bar:
            for path in args.files:
                text = _read_text(path)
                n = int(tokenizer.count(text))
                if Path(path).suffix == ".json":
                    try:
                        data = json.loads(text)
                    except json.JSONDecodeError as e:
                        raise UsageError(f"{path}: not valid JSON ({e})") from None
                    if isinstance(data, list) and all(isinstance(m, dict) and "role" in m for m in data):
                        n = count_messages(data, tokenizer=tokenizer)
                total += n
                rows.append(f"{n:>10}  {path}")
                bar.update()
        if len(args.files) > 1:
            rows.append(f"{total:>10}  total")
    finally:
        # Printed after the bar has ended its line, so a terminal shows each on its own lines.
        for row in rows:
            print(row)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxfold", description="Fit LLM agent context into a token budget.")
    parser.add_argument("--version", action="version", version=f"ctxfold {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add_counter(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", help="OpenAI model name, e.g. gpt-4o (picks its encoding)")
        p.add_argument("--encoding", help="cl100k_base or o200k_base (default o200k_base)")

    fit = sub.add_parser("fit", help="fit a conversation (JSON) into a token budget")
    fit.add_argument("conversation", help='JSON file: a list of messages or {"messages": [...], "query": ...}')
    fit.add_argument("--budget", type=int, required=True, help="token budget of the output")
    fit.add_argument("--query", help="what the next answer is about (default: the last user message)")
    fit.add_argument("--out", help="write the fitted messages here (default: stdout)")
    fit.add_argument("--report", help="write the report and per-message results here")
    fit.add_argument("--strategy", choices=STRATEGIES, help="how to fit (default optimal)")
    add_counter(fit)
    fit.set_defaults(run=cmd_fit)

    analyze = sub.add_parser("analyze", help="tokens by role, kind and what a fit would do")
    analyze.add_argument("conversation")
    analyze.add_argument("--budget", type=int, default=8000)
    analyze.add_argument("--query")
    analyze.add_argument("--strategy", choices=STRATEGIES, help="the strategy of the fit shown (default optimal)")
    add_counter(analyze)
    analyze.set_defaults(run=cmd_analyze)

    count = sub.add_parser("count", help="count tokens of files (a JSON message list counts as chat)")
    count.add_argument("files", nargs="+")
    add_counter(count)
    count.set_defaults(run=cmd_count)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ctxfold`` command with ``argv`` (default: ``sys.argv[1:]``);
    returns the exit code, 2 with a one-line reason on stderr for bad input."""
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (UsageError, CtxFoldError, UnicodeDecodeError, json.JSONDecodeError) as e:
        print(f"ctxfold {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ctxfold {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
