"""What an unknown option is answered with: infermeter's name for a peer tool's option where the two mean the same,
else the command's options whose names are close to it, else nothing (click's own list offers --no-progress for
--num-prompts)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

CLOSE = 0.8  # difflib's ratio over the names without their dashes: a typo or two, not a shared prefix


@dataclass(frozen=True)
class Peer:
    """A peer tool's option that one of ours replaces exactly: ours, how to give it, and whose option it is (in the
    possessive)."""

    ours: str
    give: str
    tools: str


VLLM_SGLANG = "vLLM bench serve's and SGLang bench_serving's"
PEER_OPTIONS: dict[str, Peer] = {
    "--num-prompts": Peer("--requests", "--requests N", VLLM_SGLANG),
    "--request-count": Peer("--requests", "--requests N", "AIPerf's and GenAI-Perf's"),
    "--max-requests": Peer("--requests", "--requests N", "GuideLLM's"),
    "--request-rate": Peer("--rate", "--rate R", VLLM_SGLANG),
    "--dataset-name": Peer(
        "--dataset", "--dataset FILE, its format (sharegpt among them) read from its content", "vLLM bench serve's"
    ),
    "--dataset-path": Peer("--dataset", "--dataset FILE", VLLM_SGLANG),
    "--random-input-len": Peer("--input-tokens", "--input-tokens N", VLLM_SGLANG),
    "--random-output-len": Peer("--output-tokens", "--output-tokens N", VLLM_SGLANG),
}


def close_options(name: str, options: Iterable[str]) -> list[str]:
    """The long options whose names are within a typo or two of `name` (best first, at most three)."""
    bare = {option.lstrip("-"): option for option in options if option.startswith("--")}
    return [bare[m] for m in difflib.get_close_matches(name.lstrip("-"), list(bare), n=3, cutoff=CLOSE)]


def no_such_option(name: str, options: Iterable[str]) -> str:
    """The message for an option the command does not have, `options` being the ones it has."""
    have = set(options)
    head = f"No such option: {name}"
    peer = PEER_OPTIONS.get(name)
    if peer is not None and peer.ours in have:
        return f"{head} ({name} is {peer.tools} option; infermeter's is {peer.give})"
    close = close_options(name, have)
    if not close:
        return head
    return f"{head} (did you mean {close[0] if len(close) == 1 else ', '.join(close[:-1]) + ' or ' + close[-1]}?)"
