"""The chat model the LangChain and LangGraph examples run offline with (the
tests use it too): a fake that answers from a script and records every
prompt it is sent. Not an example of its own."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from pydantic import Field


class ScriptedChatModel(GenericFakeChatModel):
    """Answers from `messages` in turn and records every prompt it gets in `prompts`."""

    prompts: list[list[Any]] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
        self.prompts.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    def bind_tools(self, tools, **kwargs):  # type: ignore[no-untyped-def]
        # The script already says which tool to call.
        return self
