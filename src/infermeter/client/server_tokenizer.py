"""Count a prompt's tokens with the server's own tokenizer, through whichever tokenize endpoint it offers."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from infermeter.client.urls import endpoint

# (path, request body, how to read the count): vLLM and the emulator, llama.cpp's server, llama-cpp-python's server
ENDPOINTS: tuple[tuple[str, str], ...] = (
    ("/tokenize", "prompt"),
    ("/tokenize", "content"),
    ("/extras/tokenize/count", "input"),
)


def _count(data: Any) -> int | None:
    if isinstance(data, dict):
        if isinstance(data.get("count"), int):
            return data["count"]
        if isinstance(data.get("tokens"), list):
            return len(data["tokens"])
    return None


class ServerTokenizer:
    """Finds a working endpoint on first use; `count` returns None when the server offers none."""

    def __init__(self, base_url: str, model: str, headers: dict[str, str] | None = None) -> None:
        self.base_url = base_url
        self.model = model
        self.headers = {**(headers or {}), "Content-Type": "application/json"}
        self.endpoint: tuple[str, str] | None = None
        self.available: bool | None = None

    async def count(self, session: aiohttp.ClientSession, text: str) -> int | None:
        candidates = [self.endpoint] if self.endpoint else list(ENDPOINTS)
        if self.available is False:
            return None
        for path, key in candidates:
            body = {
                key: text,
                "model": self.model,
                "add_special_tokens": False,
                "add_special": False,
                "with_pieces": False,
            }
            try:
                url = endpoint(self.base_url, path)
                async with session.post(url, data=orjson.dumps(body), headers=self.headers) as r:
                    if r.status != 200:
                        continue
                    n = _count(orjson.loads(await r.read()))
            except (aiohttp.ClientError, orjson.JSONDecodeError, TimeoutError):
                continue
            if n is not None:
                self.endpoint, self.available = (path, key), True
                return n
        if self.endpoint is None:
            self.available = False
        return None

    @property
    def description(self) -> str:
        return f"{self.endpoint[0]} ({self.endpoint[1]})" if self.endpoint else "none offered"
