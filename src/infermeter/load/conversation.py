"""A multi-turn session's conversation so far, and each turn's request built from it: the chat API gets the messages
(system, then user and assistant in turn, then this turn's user message); the completions API gets the same
conversation flattened to text, its messages' contents joined by a blank line (no role labels, so turn 0's prompt is
its user text verbatim, as a single-turn request's is).  Each request's token count is that of what is sent, under
the run's declared tokenizer (after the chat template for chat)."""

from __future__ import annotations

import dataclasses

from infermeter.client.request import Message, PreparedRequest
from infermeter.workload.prompts import ExactPrompter

JOINER = "\n\n"  # between the messages of a conversation flattened for the completions API


class Transcript:
    """One session's messages so far: its opening system message (when its first turn brings one), then each turn's
    user message and the reply that history carries."""

    def __init__(self, prompter: ExactPrompter, chat: bool) -> None:
        self.prompter, self.chat = prompter, chat
        self.messages: list[Message] = []
        self._asked: Message | None = None  # the user message of the turn awaiting its reply

    def ask(self, turn: PreparedRequest) -> PreparedRequest:
        """The turn's request: the conversation so far, then the turn's user text (`turn.prompt`).  The system
        messages of the first turn's `messages` open the conversation; a later turn's own `messages` are not read."""
        if not self.messages and turn.messages is not None:
            self.messages = [m for m in turn.messages if m.role == "system"]
        self._asked = Message("user", turn.prompt)
        messages = (*self.messages, self._asked)
        if self.chat:
            return dataclasses.replace(turn, messages=messages)
        return dataclasses.replace(turn, prompt=JOINER.join(m.content for m in messages), messages=None)

    def answer(self, reply: str) -> None:
        """The turn last asked was answered with `reply`: both are history from now on."""
        assert self._asked is not None, "answer() follows ask()"
        self.messages += [self._asked, Message("assistant", reply)]
        self._asked = None

    def count(self, sent: PreparedRequest) -> int:
        """The exact token count of what `sent` sends under the prompter's tokenizer."""
        return sent_tokens(self.prompter, sent, self.chat)


def sent_tokens(prompter: ExactPrompter, sent: PreparedRequest, chat: bool) -> int:
    """The exact token count of what `sent` sends under the prompter's tokenizer: the conversation rendered by the
    chat template (chat), else the prompt text (completions; chat without a template: the joined text)."""
    template = prompter.template
    if not chat or sent.messages is None:
        return prompter.count(sent.prompt)
    if template is None:
        return len(prompter.tok.encode(JOINER.join(m.content for m in sent.messages)))
    rendered = template.render([{"role": m.role, "content": m.content} for m in sent.messages])
    return len(prompter.tok.encode(rendered))


def with_system(prompter: ExactPrompter, req: PreparedRequest, system: str) -> PreparedRequest:
    """A single request opened by a dataset's system message: a system then a user message (chat), or the two texts
    joined as a conversation is (completions); counted as sent."""
    messages = (Message("system", system), Message("user", req.prompt))
    chat = prompter.template is not None
    sent = (
        dataclasses.replace(req, messages=messages)
        if chat
        else dataclasses.replace(req, prompt=JOINER.join(m.content for m in messages))
    )
    n = sent_tokens(prompter, sent, chat)
    return dataclasses.replace(sent, input_tokens=n, ref_input_tokens=n)
