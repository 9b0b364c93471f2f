"""Bounds and names the command line checks before anything is generated: known without loading numpy."""

MAX_LENGTH = 10_000_000  # tokens in one prompt or reply: more is a typo, and would not fit in memory
RATE_PROCESSES = ("poisson", "gamma", "constant", "uniform")  # arrival processes a rate can drive
