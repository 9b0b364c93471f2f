"""infermeter: benchmark LLM inference servers the way the IETF draft prescribes."""

__version__ = "0.1.0"
