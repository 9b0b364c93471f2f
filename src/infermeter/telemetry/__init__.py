"""Host telemetry during a run (CPU, memory, RAPL CPU energy, NVIDIA GPUs) and energy/cost accounting."""
