"""How the embedded emulator declares itself as a system under test (run.json's `sut` block, draft 4.1 and
5.1.2.3, Appendix C.1): its engine model (and what images and audio cost it) as the hardware, infermeter's version
and its scheduler as the software, its prefix caching and guardrails."""

from __future__ import annotations

from typing import Any

from infermeter import __version__
from infermeter.emulator.config import EmulatorConfig
from infermeter.emulator.media_cost import MediaCost
from infermeter.run_info import SoftwareVersion


def sut_declaration(emu: EmulatorConfig) -> dict[str, Any]:
    """The SUT fields of a run against this emulator (`emulated` marks the run kind, `model` names its model)."""
    engine = emu.engine
    sut: dict[str, Any] = {
        "emulated": True,
        "model": emu.model,
        "hardware": f"emulated engine ({engine.latency_model().name} latency model, KV {engine.capacity()} tokens, "
        f"{MediaCost.of(emu).describe()})",
        "software": f"infermeter emulator {__version__}, scheduler {engine.scheduler.name}, speed x{emu.speed:g}",
        "software_versions": [
            SoftwareVersion(
                name="infermeter emulator", version=__version__, source="the embedded emulator's declaration"
            )
        ],
        "boundary": "Model Engine",
        "tokenizer": emu.tokenizer,
        "prefix_caching": "enabled" if emu.prefix_caching else "disabled",
        "guardrails": f"input filter {emu.input_filter_ms:g} ms, output filter {emu.output_filter_ms:g} ms"
        if emu.input_filter_ms or emu.output_filter_ms
        else "none",
    }
    if emu.faults:
        sut["faults"] = [f.model_dump(exclude_defaults=True) for f in emu.faults]
    return sut
