"""`EngineConfig` on its own: defaults, presets, and each bad value named."""

from __future__ import annotations

import pytest

from ctxfold import EngineConfig, InvalidInputError
from ctxfold.engine.config import DEFAULT_WEIGHTS, SEED_WEIGHTS, STRATEGIES


def test_defaults() -> None:
    config = EngineConfig()
    assert config.budget == 8000 and config.strategy == "optimal" and config.on_invalid == "repair"
    assert config.weights == DEFAULT_WEIGHTS and config.weights is not DEFAULT_WEIGHTS  # a copy per config
    assert set(SEED_WEIGHTS) == set(DEFAULT_WEIGHTS)
    assert set(STRATEGIES) == {"optimal", "auto", "full", "windowed", "compacted", "multi_level"}


def test_presets_order_and_overrides() -> None:
    low, mid, high = EngineConfig.high_compression(), EngineConfig(), EngineConfig.high_fidelity()
    assert low.summary_ratio < mid.summary_ratio < high.summary_ratio
    assert low.protect_last < mid.protect_last < high.protect_last
    assert low.compact_threshold < high.compact_threshold
    assert EngineConfig.high_compression(protect_last=5, budget=4000).protect_last == 5
    with pytest.raises(InvalidInputError, match="summary_ratio"):
        EngineConfig.high_fidelity(summary_ratio=1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"budget": 0}, "budget: must be > 0, got 0"),
        ({"weights": {"vibes": 1.0}}, r"weights: unknown layers \['vibes'\]"),
        ({"weights": {"semantic": -0.1}}, "weights: every weight must be >= 0"),
        ({"protect_last": -1}, "protect_last: must be >= 0"),
        ({"summary_ratio": 0.0}, r"summary_ratio: must be in \(0, 1\)"),
        ({"strategy": "greedy"}, "strategy: unknown 'greedy'; use one of optimal"),
        ({"on_invalid": "ignore"}, "on_invalid: use 'repair' or 'raise'"),
        ({"compact_threshold": 1.5}, r"compact_threshold: must be in \(0, 1\]"),
    ],
)
def test_each_bad_value_is_named(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        EngineConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [-1, True, 1.5, "50"])
def test_rerank_must_be_a_count(value):
    with pytest.raises(InvalidInputError, match="rerank"):
        EngineConfig(rerank=value)


@pytest.mark.parametrize("value", [0, 513, True, 1.5, "64"])
def test_rerank_tokens_must_be_a_count_the_model_can_read(value):
    with pytest.raises(InvalidInputError, match="rerank_tokens"):
        EngineConfig(rerank_tokens=value)


def test_reranked_preset_reads_more_of_more_messages():
    assert (EngineConfig().rerank, EngineConfig().rerank_tokens) == (100, 64)
    assert (EngineConfig.reranked().rerank, EngineConfig.reranked().rerank_tokens) == (150, 256)
    assert EngineConfig.reranked(rerank=64, budget=900).rerank == 64
