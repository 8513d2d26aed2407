"""Drop-in adapters for the agent frameworks, one module each:

- `ctxfold.integrations.langchain`: `FitContext`, an agent middleware for
  `langchain.agents.create_agent` that fits what the model sees, and
  `fit_messages`, a `trim_messages`-style callable (or Runnable) on
  `BaseMessage` lists;
- `ctxfold.integrations.langgraph`: `PreModelHook`, the `pre_model_hook` of
  `create_react_agent` (or a node of your own graph) returning
  ``{"llm_input_messages": ...}``;
- `ctxfold.integrations.openai_agents`: `FitSession`, an Agents SDK session
  wrapping another one (e.g. `SQLiteSession`) whose history is fitted
  before each run;
- `ctxfold.integrations.anthropic`: `fit_messages`, Anthropic `messages` and
  `system` in, ``(system, messages)`` out, content blocks, tool pairs and
  `cache_control` breakpoints kept.

This package imports no framework: each module imports its own when it is
imported, and says which ``pip install`` is missing when it is not there
(``pip install 'ctxfold[integrations]'`` installs them all).
"""

from __future__ import annotations

from ctxfold.errors import CtxFoldError

__all__ = ["IntegrationImportError"]


class IntegrationImportError(CtxFoldError, ImportError):
    """The framework an integration module adapts is not installed; the
    message names the ``pip install`` that fixes it."""
