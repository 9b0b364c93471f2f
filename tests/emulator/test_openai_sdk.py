"""The OpenAI Python SDK against the emulator as `infermeter serve` runs it (its own process on 127.0.0.1): its
embeddings call (base64 by default, decoded by the SDK) and its Responses calls, plain and streamed.  The SDK reaches
nothing but the loopback server: no retries, no proxy from the environment."""

from __future__ import annotations

import numpy as np
import openai
import pytest

from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.emulator.tokenizer import EmulatorTokenizer
from tests.prompts import cl100k

TOK = EmulatorTokenizer("cl100k_base")
PROMPT = len(cl100k().encode("<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n"))


@pytest.fixture(scope="module")
def client():
    with running_emulator(EmulatorConfig(speed=20, embedding_dim=64)) as url:
        http = openai.DefaultHttpxClient(trust_env=False, timeout=10)
        yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, http_client=http)
        http.close()


def test_embeddings_create(client):
    texts = ["Hello world", "a second text", "and a third"]
    reply = client.embeddings.create(model="infermeter-emulator", input=texts)
    vectors = np.array([d.embedding for d in reply.data])
    assert vectors.shape == (3, 64) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    tokens = sum(len(cl100k().encode(t)) for t in texts)
    assert reply.usage.prompt_tokens == reply.usage.total_tokens == tokens


def test_responses_create(client):
    reply = client.responses.create(model="infermeter-emulator", input="Hello world", max_output_tokens=4)
    assert reply.output_text == "".join(TOK.reply(k) for k in range(4))
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (PROMPT, 4)
    assert reply.status == "incomplete" and reply.incomplete_details.reason == "max_output_tokens"


def test_responses_create_streamed(client):
    stream = client.responses.create(model="infermeter-emulator", input="Hello world", max_output_tokens=4, stream=True)
    events = list(stream)
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]  # fmt: skip
    assert types[4:8] == ["response.output_text.delta"] * 4 and types[-1] == "response.incomplete"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    done = next(e for e in events if e.type == "response.output_text.done")
    assert deltas == done.text == "".join(TOK.reply(k) for k in range(4))
    final = events[-1].response
    assert (final.usage.input_tokens, final.usage.output_tokens, final.usage.total_tokens) == (PROMPT, 4, PROMPT + 4)
