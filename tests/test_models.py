"""Locating and verifying model files: the shipped MiniLM, CTXFOLD_MODELS,
an explicit directory, the wheel layout, and clear errors for missing or
corrupt files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import ctxfold
import pytest
from ctxfold import models
from ctxfold.errors import CtxFoldError, MissingFileError, ModelError, ModelNotFoundError

NAME = models.DEFAULT_EMBEDDING_MODEL
SPEC = models.KNOWN_MODELS[NAME]
REPO = Path(__file__).resolve().parent.parent


def copy_model(root: Path, name: str = NAME) -> Path:
    """A copy of the shipped model under ``root/<name>``."""
    source = models.locate_model(NAME)
    target = root / name
    target.mkdir(parents=True)
    for f in SPEC.files:
        shutil.copyfile(source / f.name, target / f.name)
    return target


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(models.MODELS_ENV, raising=False)


def test_error_classes_fit_the_hierarchy() -> None:
    assert issubclass(ModelError, CtxFoldError) and issubclass(ModelError, RuntimeError)
    assert issubclass(ModelNotFoundError, ModelError)
    assert issubclass(ModelNotFoundError, FileNotFoundError) and issubclass(ModelNotFoundError, MissingFileError)
    assert str(ModelNotFoundError("a message")) == "a message"
    assert {"ModelError", "ModelNotFoundError"} <= set(ctxfold.__all__)


def test_shipped_model_is_found_and_intact(no_env: None) -> None:
    directory = models.locate_model()
    assert directory in (models.PACKAGE_MODELS_DIR / NAME, models.CHECKOUT_MODELS_DIR / NAME)
    for f in SPEC.files:
        assert models.verify_file(directory / f.name, f.sha256, f.size) == f.sha256


def test_readme_states_the_pinned_checksums() -> None:
    readme = (REPO / "models" / NAME / "README.md").read_text(encoding="utf-8")
    for f in SPEC.files:
        assert f.sha256 in readme and f.name in readme
    assert "Apache-2.0" in readme


def test_env_var_is_searched_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = copy_model(tmp_path / "mine")
    monkeypatch.setenv(models.MODELS_ENV, str(tmp_path / "mine"))
    assert models.locate_model() == copy
    assert models.model_search_path()[0] == tmp_path / "mine"


def test_env_var_holds_several_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty").mkdir()
    copy = copy_model(tmp_path / "second")
    monkeypatch.setenv(models.MODELS_ENV, os.pathsep.join([str(tmp_path / "empty"), str(tmp_path / "second")]))
    assert models.locate_model() == copy


def test_env_var_falls_back_to_the_shipped_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(models.MODELS_ENV, str(tmp_path))  # holds other models only
    assert models.locate_model().parent in (models.PACKAGE_MODELS_DIR, models.CHECKOUT_MODELS_DIR)


def test_env_var_naming_a_missing_directory_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(models.MODELS_ENV, str(tmp_path / "nope"))
    with pytest.raises(ModelNotFoundError, match=models.MODELS_ENV) as e:
        models.locate_model()
    assert str(tmp_path / "nope") in str(e.value)


def test_models_dir_argument_is_the_only_place_searched(tmp_path: Path, no_env: None) -> None:
    with pytest.raises(ModelNotFoundError) as e:
        models.locate_model(models_dir=tmp_path)
    message = str(e.value)
    assert str(tmp_path / NAME) in message and "Fix" in message and models.MODELS_ENV in message
    assert isinstance(e.value, FileNotFoundError)
    copy = copy_model(tmp_path)
    assert models.locate_model(models_dir=tmp_path) == copy


def test_wheel_layout_is_found_before_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_env: None
) -> None:
    # In a wheel the files live in ctxfold/models_data/<name>/ (see models/README.md).
    package_dir = tmp_path / "site-packages" / "ctxfold" / "models_data"
    copy = copy_model(package_dir)
    monkeypatch.setattr(models, "PACKAGE_MODELS_DIR", package_dir)
    monkeypatch.setattr(models, "CHECKOUT_MODELS_DIR", tmp_path / "no-checkout")
    assert models.locate_model() == copy


def test_editable_install_layout_uses_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_env: None
) -> None:
    package = Path(models.__file__).resolve().parent
    assert models.CHECKOUT_MODELS_DIR == package.parent.parent / "models"
    if package != REPO / "python" / "ctxfold":
        pytest.skip(f"ctxfold is installed from a wheel ({package}), not run from the checkout")
    monkeypatch.setattr(models, "PACKAGE_MODELS_DIR", tmp_path / "absent")
    assert models.locate_model() == REPO / "models" / NAME


def test_a_partial_directory_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_env: None) -> None:
    partial = tmp_path / "pkg" / NAME
    partial.mkdir(parents=True)
    (partial / "model.onnx").write_bytes(b"")  # tokenizer.json missing
    monkeypatch.setattr(models, "PACKAGE_MODELS_DIR", tmp_path / "pkg")
    monkeypatch.setattr(models, "CHECKOUT_MODELS_DIR", tmp_path / "none")
    with pytest.raises(ModelNotFoundError, match="tokenizer.json"):
        models.locate_model()


def test_missing_file_names_the_path_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError) as e:
        models.verify_file(tmp_path / "model.onnx", "0" * 64)
    assert str(tmp_path / "model.onnx") in str(e.value) and "Fix" in str(e.value)
    with pytest.raises(ModelNotFoundError, match="not a file"):
        models.verify_file(tmp_path, None)


def test_truncated_file_is_reported_by_size(tmp_path: Path) -> None:
    f = SPEC.file("tokenizer.json")
    source = models.locate_model() / f.name
    broken = tmp_path / f.name
    broken.write_bytes(source.read_bytes()[:1000])
    with pytest.raises(ModelError, match="1000 bytes, expected") as e:
        models.verify_file(broken, f.sha256, f.size)
    assert str(broken) in str(e.value) and not isinstance(e.value, FileNotFoundError)


def test_corrupt_file_is_reported_by_checksum(tmp_path: Path) -> None:
    f = SPEC.file("tokenizer.json")
    data = bytearray((models.locate_model() / f.name).read_bytes())
    data[500] ^= 0xFF
    broken = tmp_path / f.name
    broken.write_bytes(bytes(data))
    with pytest.raises(ModelError, match="corrupt or a different version") as e:
        models.verify_file(broken, f.sha256, f.size)
    assert str(broken) in str(e.value) and f.sha256 in str(e.value) and "Fix" in str(e.value)


def test_a_file_changed_after_verification_is_checked_again(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"one")
    digest = models.verify_file(path)
    assert models.verify_file(path, digest) == digest
    path.write_bytes(b"two")
    os.utime(path, ns=(1, 1))  # a new mtime even on coarse clocks
    with pytest.raises(ModelError):
        models.verify_file(path, digest)


def test_sha256sums_file(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"weights")
    digest = models.sha256_file(tmp_path / "model.onnx")
    (tmp_path / "SHA256SUMS").write_text(f"# comment\n{digest}  model.onnx\n{'a' * 64} *other.bin\n", encoding="utf-8")
    assert models.read_checksums(tmp_path) == {"model.onnx": digest, "other.bin": "a" * 64}
    path, sha = models.verified_path(tmp_path, "model.onnx", None)
    assert path == tmp_path / "model.onnx" and sha == digest
    (tmp_path / "SHA256SUMS").write_text(f"{'b' * 64}  model.onnx\n", encoding="utf-8")
    with pytest.raises(ModelError, match="SHA256SUMS"):
        models.verified_path(tmp_path, "model.onnx", None)
    (tmp_path / "SHA256SUMS").write_text("not a checksum line\n", encoding="utf-8")
    with pytest.raises(ModelError, match=r"SHA256SUMS:1"):
        models.read_checksums(tmp_path)


def test_no_checksums_means_existence_only(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"anything")
    assert models.expected_checksum(tmp_path, "model.onnx", None) == (None, None)
    models.verified_path(tmp_path, "model.onnx", None)


def test_bad_arguments() -> None:
    with pytest.raises(ctxfold.InvalidTypeError, match="models_dir"):
        models.locate_model(models_dir=3)  # type: ignore[arg-type]
    with pytest.raises(ctxfold.InvalidTypeError, match="name"):
        models.locate_model("")


def test_an_onnx_session_does_not_spin_between_runs(no_env: None) -> None:
    pytest.importorskip("onnxruntime", reason="sessions need onnxruntime")
    session = models.onnx_session(models.locate_model("all-MiniLM-L6-v2") / "model.onnx", None)
    # The engine runs numpy right after the question's run: spinning threads would slow it.
    assert session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    # A decoder runs once per token: its threads keep spinning between the steps.
    decoder = models.onnx_session(models.locate_model("all-MiniLM-L6-v2") / "model.onnx", None, spin=True)
    with pytest.raises(RuntimeError, match="does not have configuration"):
        decoder.get_session_options().get_session_config_entry("session.intra_op.allow_spinning")
