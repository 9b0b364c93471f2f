"""The one error an exporter raises when its destination refuses or cannot be reached; `send` turns it into the
warning line the run ends with (the run itself has finished and stays as it is)."""

from __future__ import annotations


class ExportFailed(Exception):
    """Why an exporter could not deliver, in one line without the exporter's name (send.py adds it)."""
