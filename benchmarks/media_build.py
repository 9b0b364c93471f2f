"""How long infermeter takes to make one request's media (--images, --audio): a synthetic image of each size and
format, and a WAV clip, base64 included; median and P90 of --repeats, each a distinct (request, image) seed.

These are made on worker threads ahead of the sends (load/media_ahead.py); the figure says how many requests per
second one core can keep supplied: 1000 / (ms per image x images per request)."""

from __future__ import annotations

import argparse
import time

import numpy as np

from infermeter.workload.media import synthetic_audio, synthetic_image


def timed(make, repeats: int) -> tuple[float, float, int]:
    """Median and P90 milliseconds of `repeats` calls, and the size in bytes of the last item."""
    times, size = [], 0
    for k in range(repeats):
        t = time.perf_counter()
        item = make(k)
        times.append((time.perf_counter() - t) * 1000)
        size = item.size_bytes
    return float(np.median(times)), float(np.percentile(times, 90)), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    for side in (256, 512, 1024):
        for fmt in ("png", "jpeg"):
            p50, p90, size = timed(lambda k: synthetic_image(1, k, 0, side, side, fmt), args.repeats)  # noqa: B023
            print(f"{side}x{side} {fmt:4}: {p50:6.1f} ms median, {p90:6.1f} ms P90, {size / 1024:7.0f} KiB")
    for seconds in (1.0, 10.0):
        p50, p90, size = timed(lambda k: synthetic_audio(1, k, seconds), args.repeats)  # noqa: B023
        print(f"WAV {seconds:4.0f} s : {p50:6.1f} ms median, {p90:6.1f} ms P90, {size / 1024:7.0f} KiB")


if __name__ == "__main__":
    main()
