"""The window a client asks for by the model's name (``window_hints``), and where it stands among
the other sources of a window (``windows``): the tenant's patterns, then the client's hints, then
the built-in table, then ``default_context_window``."""

from __future__ import annotations

import pytest

from ctxproxy.compaction.window_hints import WindowHint, hinted_name, name_hint, narrowest
from ctxproxy.compaction.windows import context_window, known_window, learned_as, model_name, window_source
from ctxproxy.config.models import ModelConfig, TenantConfig

PLAIN = TenantConfig(name="t")
BETA_1M = WindowHint(1_000_000, "anthropic-beta context-1m-2025-08-07")


@pytest.mark.parametrize(
    ("model", "tokens", "source"),
    [
        ("claude-sonnet-4-5[1m]", 1_000_000, 'model name "[1m]"'),
        ("claude-sonnet-4-5-20250929[1M]", 1_000_000, 'model name "[1M]"'),
        ("my-model[256k]", 256_000, 'model name "[256k]"'),
        ("anthropic/claude-opus-4-8[2m]", 2_000_000, 'model name "[2m]"'),
        ("qwen2.5-7b-instruct-1m", 1_000_000, 'model name "-1m"'),
        ("Qwen/Qwen2.5-14B-Instruct-1M", 1_000_000, 'model name "-1m"'),
        ("moonshot-v1-8k", 8_000, 'model name "-8k"'),
        ("moonshot-v1-128k", 128_000, 'model name "-128k"'),
        ("moonshotai/moonshot-v1-32k:free", 32_000, 'model name "-32k"'),  # an OpenRouter variant after it
        ("gpt-3.5-turbo-16k", 16_000, 'model name "-16k"'),
        # Both forms: the smaller.
        ("qwen2.5-7b-instruct-1m[2m]", 1_000_000, 'model name "-1m"'),
        ("qwen2.5-7b-instruct-1m[500k]", 500_000, 'model name "[500k]"'),
    ],
)
def test_a_models_name_asks_for_a_window(model: str, tokens: int, source: str) -> None:
    assert name_hint(model) == WindowHint(tokens, source)
    assert context_window(model, PLAIN) == tokens
    assert window_source(model, PLAIN) == (tokens, source)


@pytest.mark.parametrize(
    "model",
    [
        "claude-opus-4-8",
        "gemma-3-270m",  # millions of parameters, not of tokens
        "smollm2-360m",
        "gpt-4-32k-0613",  # a size inside the name, not ending it
        "phi-3-mini-128k-instruct",
        "anthropic/claude-sonnet-4.5:extended",  # larger, but not saying how large
        "my-model[0k]",
        "my-model[999999999m]",
        "my-model[1g]",
        "my-model(1m)",
        None,
        "",
    ],
)
def test_names_that_ask_for_nothing(model: str | None) -> None:
    assert name_hint(model) is None


def test_sizes_are_decimal_so_never_above_what_the_provider_means() -> None:
    # Moonshot's 32k model takes 32,768 tokens, Qwen's 1M ones 1,010,000: a hint is at most that.
    assert context_window("moonshot-v1-32k", PLAIN) == 32_000 <= 32_768
    assert context_window("qwen2.5-7b-instruct-1m", PLAIN) == 1_000_000 <= 1_010_000
    # ... and wins over the table's coarser pattern (qwen2.5* is 131,072).
    assert context_window("qwen2.5-7b-instruct", PLAIN) == 131_072


def test_the_bracketed_suffix_is_not_part_of_the_models_name() -> None:
    """Patterns, the table and prices match the name without it."""
    assert model_name("claude-sonnet-4-5[1m]") == "claude-sonnet-4-5"
    assert model_name("openai/gpt-4o[64k]") == "gpt-4o"
    assert model_name("qwen2.5-7b-instruct-1m") == "qwen2.5-7b-instruct-1m"  # a real model's name
    priced = TenantConfig(name="t", models={"claude-sonnet-4-5": ModelConfig(input_price_per_mtok=3.0)})
    assert window_source("claude-sonnet-4-5[1m]", priced) == (1_000_000, 'model name "[1m]"')


def test_precedence_tenant_then_client_then_table_then_default() -> None:
    tenant = TenantConfig(
        name="t",
        models={"claude-opus*": ModelConfig(context_window=300_000)},
        default_context_window=50_000,
    )
    # The tenant's pattern wins over both forms of hint (it matches the name without its suffix).
    assert window_source("claude-opus-4-8", tenant, BETA_1M) == (300_000, '[models."claude-opus*"]')
    assert window_source("claude-opus-4-8[1m]", tenant) == (300_000, '[models."claude-opus*"]')
    # The client's hint wins over the table, smaller or larger.
    assert window_source("claude-sonnet-4-5", tenant, BETA_1M) == (1_000_000, BETA_1M.source)
    assert context_window("gpt-4o[64k]", tenant) == 64_000
    # The table wins over the default; an unknown model with a hint is known.
    assert context_window("claude-sonnet-4-5", tenant) == 200_000
    assert context_window("my-finetune", tenant) == 50_000
    assert known_window("my-finetune", tenant, BETA_1M) == 1_000_000


def test_a_header_and_a_name_asking_at_once_get_the_smaller() -> None:
    assert context_window("claude-sonnet-4-5[500k]", PLAIN, BETA_1M) == 500_000
    assert context_window("claude-sonnet-4-5[2m]", PLAIN, BETA_1M) == 1_000_000
    assert narrowest(None, None) is None


@pytest.mark.parametrize(
    ("model", "learned"),
    [
        ("claude-opus-4-8", "claude-opus-4-8[1m]"),
        ("claude-opus-4-8[1m]", "claude-opus-4-8[1m]"),
        ("claude-opus-4-8[500k]", "claude-opus-4-8[500k]"),
        ("claude-opus-4-8[2m]", "claude-opus-4-8[1m]"),
        ("Claude-Opus-4-8[2M]", "Claude-Opus-4-8[1m]"),
        ("qwen2.5-7b-instruct-1m", "qwen2.5-7b-instruct-1m[1m]"),
    ],
)
def test_what_is_learned_under_a_header_is_kept_under_a_name_that_says_its_window(model: str, learned: str) -> None:
    """A model asked for at 1M by a header learns apart from the same model at its usual size,
    and the record's name alone gives back the window it was learned under (``config check`` and
    the admin API recompute it from the name)."""
    assert learned_as(model, PLAIN, BETA_1M) == hinted_name(model, BETA_1M) == learned
    assert context_window(learned, PLAIN) == context_window(model, PLAIN, BETA_1M)


def test_without_a_header_or_under_a_tenants_window_a_model_learns_under_its_own_name() -> None:
    assert learned_as("claude-opus-4-8", PLAIN, None) == "claude-opus-4-8"
    assert learned_as("claude-opus-4-8[1m]", PLAIN, None) == "claude-opus-4-8[1m]"
    tenant = TenantConfig(name="t", models={"claude*": ModelConfig(context_window=200_000)})
    assert learned_as("claude-opus-4-8", tenant, BETA_1M) == "claude-opus-4-8"


def test_labels() -> None:
    assert [WindowHint(n, "").label for n in (1_000_000, 2_000_000, 256_000, 1_500_000)] == [
        "1m",
        "2m",
        "256k",
        "1500k",
    ]
