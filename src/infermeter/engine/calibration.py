"""How an engine was calibrated (kept in its engine file beside the parameters it set): each parameter with its
error, each fit's quality on measurements held out of it, the scheduling policies weighed.  The parts live beside it:
the grid fit (`grid_fit`), the probe's measurements (`probe_data`, `probe_points`), the fits (`least_squares`,
`decode_fit`, `prefill_fit`, `request_cost`), the policy choice (`policy_choice`); `probe_fit` puts them together.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

DECODE_FIT, PREFILL_FIT = "decode steps", "isolated TTFT"  # the calibration's fits, by what they were fitted to
LOAD_FIT, TOGETHER_FIT = "closed loops and newcomers", "prompts sent together"
HELD_OUT_MAX = 0.15  # a fit whose held-out probes it misses by more (RMS of relative errors) is a warning
R2_MIN = 0.9  # a fit explaining less of its measurements' variance is a warning (where they vary beyond noise)


class ParameterFit(BaseModel):
    """One calibrated parameter: its value, its standard error, and the fit it came from."""

    parameter: str
    value: float
    unit: str
    stderr: float | None = None
    fit: str  # which measurements it was fitted to
    r2: float | None = None  # None: a median, not a least-squares fit
    residual_rms_ms: float | None = None
    points: int
    held_out_rms: float | None = None  # its fit's RMS relative error on probes held out of it (FitQuality)


class FitQuality(BaseModel):
    """How well one of the calibration's fits explains its probes, and how well it predicts probes held out of it;
    the held-out errors' range is the relative error band `predict` carries into its intervals."""

    fit: str  # which measurements: "decode steps", "isolated TTFT"
    model: str  # the model chosen, in words
    points: int
    r2: float
    held_out: str | None = None  # what was held out in turn; None: too few measurements to hold any out
    held_out_rms: float | None = None  # RMS of the held-out relative errors
    held_out_low: float | None = None  # the lowest held-out relative error ((predicted - measured) / measured)
    held_out_high: float | None = None
    candidates: dict[str, float] = Field(default_factory=dict)  # each model tried -> its held-out RMS


class PolicyFit(BaseModel):
    """How well one scheduling policy explains the isolated prompts' TTFT (RMS of the residuals)."""

    policy: str
    residual_rms_ms: float
    r2: float


class Calibration(BaseModel):
    """How `infermeter calibrate` measured an engine: kept in the engine file beside the parameters it set."""

    source: str
    measured_at: str = ""
    duration_s: float = 0.0
    parameters: list[ParameterFit] = Field(default_factory=list)
    policies: list[PolicyFit] = Field(default_factory=list)
    policy: str = ""
    prefill_mixing: str = "not measured"  # whether prefill shares the decode steps, and the evidence
    largest_batch: int = 0
    batch_limited: bool = False
    prefix_cache: str = "not measured"
    kv_capacity_source: str = "not measured"
    notes: list[str] = Field(default_factory=list)
    fits: list[FitQuality] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)  # poor fits: predict repeats them beside its tables
    unseen: list[str] = Field(default_factory=list)  # mechanisms a black-box probe cannot see, and what is assumed

    def band(self, fit: str) -> tuple[float, float] | None:
        """A fit's held-out relative error band (lowest, highest), or None where nothing was held out."""
        for f in self.fits:
            if f.fit == fit and f.held_out_low is not None and f.held_out_high is not None:
                return f.held_out_low, f.held_out_high
        return None
