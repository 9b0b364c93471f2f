"""The serving-engine model: latency models, KV memory, schedulers, and the clock-free EngineCore."""
