"""The model the OpenAI Agents SDK example runs offline with (the tests use
it too): a fake implementing the SDK's `Model` interface that answers from a
script and records the input it is given. Not an example of its own."""

from __future__ import annotations

import json
from typing import Any

from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText


class ScriptedModel(Model):
    """Returns the scripted outputs in turn; records each input, as plain
    JSON items, in `inputs`."""

    def __init__(self, outputs: list[Any]) -> None:
        self.outputs = list(outputs)
        self.inputs: list[list[Any]] = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,  # type: ignore[no-untyped-def]
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None, **kwargs):
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        self.inputs.append(json.loads(json.dumps(items, default=str)))
        return ModelResponse(output=[self.outputs.pop(0)], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise NotImplementedError("ScriptedModel does not stream: run it with Runner.run")


def reply(text: str, n: int) -> ResponseOutputMessage:
    """An assistant message as the model returns it."""
    return ResponseOutputMessage(id=f"msg_{n}", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])
