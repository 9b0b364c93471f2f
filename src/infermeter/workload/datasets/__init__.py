"""Dataset readers, one module per format family (ShareGPT, prompt tables, Hugging Face on disk, Mooncake, Azure,
BurstGPT), behind one entry: `read_dataset` gives the `Dataset` contract of workload/dataset.py."""

from infermeter.workload.datasets.registry import READERS, detect_format, read_dataset

__all__ = ["READERS", "detect_format", "read_dataset"]
