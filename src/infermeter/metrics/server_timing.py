"""What servers reported about their own timing, summarized: prompt processing time, generation time per output
token, and the share of prompt tokens served from the prefix cache.

Over requests with status "ok".  A server that reports cached tokens may leave the count out when it is zero (vLLM
does), so once any request of the run carries the count, a request without it counts as having none cached.
"""

from __future__ import annotations

import numpy as np

from infermeter.metrics.columns import RecordColumns
from infermeter.metrics.statistics import stats
from infermeter.metrics.summary_model import ServerTiming
from infermeter.units import MS_PER_S


def server_timing(cols: RecordColumns) -> ServerTiming | None:
    """The block, or None when no ok request carries any server-reported figure."""
    ok = cols.ok
    has_cached = ok & ~np.isnan(cols.cached_tokens)
    has_prefill = ok & ~np.isnan(cols.server_prefill_s)
    has_decode = ok & ~np.isnan(cols.server_decode_s)
    reported = has_cached | has_prefill | has_decode
    if not reported.any():
        return None
    # llama.cpp's predicted_per_token_ms divides by the same count: every generated token, the first included
    per_token = np.full(cols.n, np.nan)
    # the server's own counts: its timing and its cache are in its tokens, whichever option the metrics use
    divisible = has_decode & (cols.server_output_tokens > 0)
    per_token[divisible] = cols.server_decode_s[divisible] / cols.server_output_tokens[divisible]
    input_tokens = int(cols.server_input_tokens[ok].sum())
    cached = int(cols.cached_tokens[has_cached].sum()) if has_cached.any() else None
    return ServerTiming(
        reported=int(reported.sum()),
        prefill_ms=stats(cols.server_prefill_s[has_prefill], MS_PER_S) if has_prefill.any() else None,
        decode_ms_per_output_token=stats(per_token[divisible], MS_PER_S) if divisible.any() else None,
        cached_tokens_reported=int(has_cached.sum()),
        cached_tokens=cached,
        input_tokens=input_tokens,
        prefix_cache_hit_share=cached / input_tokens if cached is not None and input_tokens > 0 else None,
    )
