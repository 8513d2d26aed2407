"""The `ctxfold` command: fit a conversation to a budget, analyse where its
tokens go, count tokens of files. Bad input exits with code 2 and one line."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxfold.config import EngineConfig
from ctxfold.engine import ContextEngine
from ctxfold.errors import CtxFoldError
from ctxfold.tokens import count_messages, get_tokenizer

__all__ = ["main"]


class UsageError(Exception):
    """Bad input from the command line: reported in one line, exit code 2."""


def _read_json(path: str) -> Any:
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
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
    return ContextEngine(model=args.model, encoding=args.encoding, config=EngineConfig(budget=args.budget))


def _write(path: str | None, data: Any) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=2)
    if path is None:
        print(text)
    else:
        Path(path).write_text(text + "\n", encoding="utf-8")


def cmd_fit(args: argparse.Namespace) -> int:
    messages, query = _conversation(args.conversation)
    result = _engine(args).optimize(messages, query=args.query or query, budget=args.budget)
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
    result = engine.optimize(messages, query=args.query or query, budget=args.budget)
    by_role: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    by_status: Counter[str] = Counter()
    for message, item in zip(messages, result.items):
        by_role[item.role] += item.tokens_in
        by_kind[str(message.get("kind") or ("tool_result" if item.role == "tool" else "-"))] += item.tokens_in
        by_status[item.status] += item.tokens_in
    total = result.report.tokens_in
    print(f"{len(messages)} messages, {total} tokens ({engine.tokenizer.name})")
    for title, table in (("role", by_role), ("kind", by_kind), (f"fit to {args.budget}", by_status)):
        print(f"\nby {title}:")
        for key, tokens in table.most_common():
            print(f"  {key:<16} {tokens:>9}  {100 * tokens / max(total, 1):5.1f}%")
    print(f"\n{result.report.to_text()}")
    return 0


def cmd_count(args: argparse.Namespace) -> int:
    tokenizer = get_tokenizer(args.model, args.encoding)
    total = 0
    for path in args.files:
        file = Path(path)
        if not file.is_file():
            raise UsageError(f"{path}: no such file")
        text = file.read_text(encoding="utf-8", errors="strict")
        n = int(tokenizer.count(text))
        if file.suffix == ".json":
            data = json.loads(text)
            if isinstance(data, list) and all(isinstance(m, dict) and "role" in m for m in data):
                n = count_messages(data, tokenizer=tokenizer)
        total += n
        print(f"{n:>10}  {path}")
    if len(args.files) > 1:
        print(f"{total:>10}  total")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxfold", description="Fit LLM agent context into a token budget.")
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
    add_counter(fit)
    fit.set_defaults(run=cmd_fit)

    analyze = sub.add_parser("analyze", help="tokens by role, kind and what a fit would do")
    analyze.add_argument("conversation")
    analyze.add_argument("--budget", type=int, default=8000)
    analyze.add_argument("--query")
    add_counter(analyze)
    analyze.set_defaults(run=cmd_analyze)

    count = sub.add_parser("count", help="count tokens of files (a JSON message list counts as chat)")
    count.add_argument("files", nargs="+")
    add_counter(count)
    count.set_defaults(run=cmd_count)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (UsageError, CtxFoldError, UnicodeDecodeError, json.JSONDecodeError) as e:
        print(f"ctxfold {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
