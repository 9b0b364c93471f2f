"""Scale-out on dask.distributed: a run's load sent from several processes or hosts and merged into one run
directory, and simulations run as tasks.  dask is an optional extra (`pip install 'infermeter[distributed]'`)."""

from __future__ import annotations

from infermeter.errors import UserError

INSTALL = "pip install 'infermeter[distributed]'"


def require(option: str) -> None:
    """A one-line error naming the install command when dask.distributed is missing."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UserError(f"{option} runs on dask.distributed, which is not installed: {INSTALL}") from None
