"""ProjectedEmbedder: the static table's embedding of a text mapped into
MiniLM's space lands near MiniLM's own embedding of that text; one shared
model per process; the errors for a table or vectors that do not fit."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from ctxfold import InvalidTypeError, ModelError, StaticEmbedder
from ctxfold.embed.projected import ModelView, ProjectedEmbedder, SharedEncoder, shared_encoder

TEXTS = [
    "I like to play a lot of different games but I dont have that much time.",
    "The invoice for the Lisbon hotel is due on the 3rd of March.",
    "We finally fixed the flaky deploy test by pinning the database image.",
    "My sister moved to Denver last spring and loves the mountains.",
]


@pytest.fixture(scope="module")
def table() -> StaticEmbedder:
    return StaticEmbedder()


def test_the_shipped_table_carries_its_model_projection(table: StaticEmbedder) -> None:
    assert table.model_projection is not None
    assert table.model_projection.shape == (table.dim, 384) and table.model_projection.dtype == np.float32


def test_a_mapped_text_lands_near_the_models_own_embedding_of_it(table: StaticEmbedder) -> None:
    projected = ProjectedEmbedder(table)
    mapped, model = projected.embed(TEXTS), SharedEncoder().embed(TEXTS)
    assert mapped.shape == model.shape == (len(TEXTS), 384) and projected.dim == 384
    np.testing.assert_allclose(np.linalg.norm(mapped, axis=1), 1.0, rtol=1e-5)
    similarity = mapped @ model.T
    # Each text's mapped vector is nearest the model's embedding of it, and close to it.
    assert list(similarity.argmax(axis=1)) == list(range(len(TEXTS)))
    assert similarity.diagonal().min() > 0.6 > 0.3 > np.abs(similarity - np.diag(similarity.diagonal())).max()
    assert projected.embed(TEXTS[0]).shape == (384,)
    # Vectors already embedded by the table map the same, whatever their norm; zero stays zero.
    np.testing.assert_allclose(projected.map(3.0 * table.embed(TEXTS)), mapped, atol=1e-6)
    assert not projected.map(np.zeros((1, table.dim))).any()


def test_the_question_read_in_context_finds_what_the_token_mean_misses(table: StaticEmbedder) -> None:
    # Neither "sick" nor "health" is in the answers; MiniLM reads them as such, the token mean does not.
    chat = ["Did you see the game last night? It went to overtime.", "I have to finish my essay before Friday.",
            "My mom is visiting this weekend, so I'm cleaning the apartment.",
            "The new phone update drained my battery all day."]
    projected, model = ProjectedEmbedder(table), SharedEncoder()
    view = ModelView(model, projected)
    for question, answer in (("When did he get sick?", "Got a bit of an itchy throat"),
                             ("What health problems did he have?", "Nah it gave me food poisoning lol")):
        vectors = table.embed([answer, *chat])
        assert (vectors @ table.embed(question)).argmax() != 0
        cosines = view.cosines(question, vectors)
        assert cosines.argmax() == 0
        np.testing.assert_allclose(cosines, projected.map(vectors) @ model.embed([question])[0], atol=1e-6)


def test_one_model_serves_every_engine_of_the_process() -> None:
    assert shared_encoder() is shared_encoder()
    np.testing.assert_allclose(SharedEncoder().embed(TEXTS[:1]), shared_encoder().embed(TEXTS[:1]))
    # Each cut reads with the one session the process loaded.
    assert shared_encoder(64) is shared_encoder(64) and shared_encoder(64)._session is shared_encoder()._session
    np.testing.assert_allclose(SharedEncoder(64).embed(TEXTS[:1]), shared_encoder(64).embed(TEXTS[:1]))
    assert SharedEncoder(64).model_id != SharedEncoder().model_id


def test_a_table_without_a_projection_is_refused(table: StaticEmbedder, tmp_path: Path) -> None:
    copy = tmp_path / "static"
    shutil.copytree(table.path, copy)
    (copy / "SHA256SUMS").unlink()
    (copy / "model_projection.npy").unlink()
    bare = StaticEmbedder(copy)
    assert bare.model_projection is None
    with pytest.raises(ModelError, match="no model projection"):
        ProjectedEmbedder(bare)


def test_a_projection_of_another_size_is_a_model_error(table: StaticEmbedder, tmp_path: Path) -> None:
    copy = tmp_path / "static"
    shutil.copytree(table.path, copy)
    (copy / "SHA256SUMS").unlink()
    np.save(copy / "model_projection.npy", np.zeros((8, 384), dtype=np.float32))
    with pytest.raises(ModelError, match="model_projection.npy maps from 8 dimensions"):
        StaticEmbedder(copy)


def test_vectors_that_are_not_the_tables_are_named(table: StaticEmbedder) -> None:
    with pytest.raises(InvalidTypeError, match="vectors: shape"):
        ProjectedEmbedder(table).map(np.ones((2, 5), dtype=np.float32))


def _embed_in_child(texts: list[str]) -> list[list[float]]:
    return SharedEncoder().embed(texts).tolist()


def test_a_forked_worker_embeds_with_a_session_of_its_own() -> None:
    import multiprocessing

    expected = SharedEncoder().embed(TEXTS[:2])  # the parent's session exists before the fork
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = np.array(pool.apply_async(_embed_in_child, (TEXTS[:2],)).get(timeout=120), dtype=np.float32)
    np.testing.assert_allclose(got, expected, atol=1e-6)
