"""One test file per module, named after it: the tests of
``python/ctxfold/<package>/<module>.py`` are in ``tests/<package>/test_<module>.py``
(``tests/test_<module>.py`` for a top-level module), so a module's tests are
found from its name alone."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "python" / "ctxfold"
TESTS = REPO / "tests"

# Modules whose tests are elsewhere, and why (paths relative to python/ctxfold and tests).
TESTED_ELSEWHERE = {
    "engine/context_engine.py": "test_engine.py",  # the engine end to end: its promises over every strategy
    "engine/results.py": "test_engine.py",  # the result and report types, read from real runs
    "memory/protocol.py": "memory/test_store.py",  # protocols only: both stores satisfy them
    "memory/schema.py": "memory/test_scope.py",  # the schema's checks are that every table is scoped
    "summarize/seq2seq_model.py": "summarize/test_seq2seq.py",  # the decoder behind the seq2seq summarizer
    "text/entity_patterns.py": "text/test_entities.py",  # the scanner behind extract_mentions
}


def has_public_code(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_")
        for node in tree.body
    )


def expected_test(module: Path) -> Path:
    relative = module.relative_to(PACKAGE)
    if relative.as_posix() in TESTED_ELSEWHERE:
        return TESTS / TESTED_ELSEWHERE[relative.as_posix()]
    return TESTS / relative.parent / f"test_{relative.stem}.py"


def modules() -> list[Path]:
    return sorted(
        p for p in PACKAGE.rglob("*.py")
        # a private module (leading underscore) is tested through the modules that use it
        if p.name != "__init__.py" and not any(part.startswith("_") for part in p.relative_to(PACKAGE).parts)
    )


def test_every_module_with_public_code_has_its_test_file() -> None:
    found = modules()
    assert len(found) > 50, "the package's modules were not found"
    missing = [
        f"{m.relative_to(PACKAGE).as_posix()} -> {expected_test(m).relative_to(REPO).as_posix()}"
        for m in found if has_public_code(m) and not expected_test(m).is_file()
    ]
    assert not missing, "modules without their test file:\n" + "\n".join(missing)


def test_the_exceptions_name_real_files() -> None:
    for module, test in TESTED_ELSEWHERE.items():
        assert (PACKAGE / module).is_file(), f"{module} no longer exists: drop it from TESTED_ELSEWHERE"
        assert (TESTS / test).is_file(), f"{test} does not exist"
        assert not (TESTS / Path(module).parent / f"test_{Path(module).stem}.py").is_file(), (
            f"{module} has its own test file now: drop it from TESTED_ELSEWHERE"
        )


def test_every_test_package_mirrors_a_package() -> None:
    for folder in TESTS.iterdir():
        if folder.is_dir() and (folder / "__init__.py").is_file():
            assert (PACKAGE / folder.name).is_dir(), f"tests/{folder.name}/ mirrors no package of ctxfold"
