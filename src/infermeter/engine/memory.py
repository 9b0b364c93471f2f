"""KV-cache memory of one engine, in fixed-size blocks of tokens (paged attention)."""

from __future__ import annotations

from dataclasses import dataclass


def capacity_tokens(m_max_gb: float, m_model_gb: float, kv_gb_per_token: float) -> int:
    """seeds/004 Algorithm 1: eta = (M_max - M_model) / kv_mem_per_token."""
    if m_max_gb <= m_model_gb:
        raise ValueError(f"memory {m_max_gb} GB leaves nothing for KV cache after a {m_model_gb} GB model")
    return int((m_max_gb - m_model_gb) / kv_gb_per_token)


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


@dataclass
class KVMemory:
    """Block allocator: `used` never exceeds `total` (allocation fails instead)."""

    capacity: int  # tokens
    block_size: int = 16

    def __post_init__(self) -> None:
        self.total = self.capacity // self.block_size
        self.used = 0
        self.peak = 0

    @property
    def free(self) -> int:
        return self.total - self.used

    def allocate(self, blocks: int) -> bool:
        if blocks > self.total - self.used:
            return False
        self.used += blocks
        self.peak = max(self.peak, self.used)
        return True

    def release(self, blocks: int) -> None:
        self.used -= blocks
        assert self.used >= 0, "released more KV blocks than were allocated"

    @property
    def usage(self) -> float:
        return self.used / self.total if self.total else 0.0
