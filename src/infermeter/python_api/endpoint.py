"""The target a run sends to: the server at a URL, or the embedded emulator started in its own process for the
length of a block."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infermeter.emulator.config import EmulatorConfig
    from infermeter.load.target import Endpoint

STARTING = "starting the embedded emulator (no --url given)"
Announce = Callable[[str], object]  # says a line (the emulator starting) where the caller shows them


@contextlib.contextmanager
def serving(
    url: str | None,
    emu: EmulatorConfig | None,
    backend: str = "openai",
    announce: Announce | None = None,
) -> Iterator[Endpoint]:
    """Yield the endpoint (target, SUT declaration, HTTP base URL for /metrics): the server at `url`, or the embedded
    emulator started for the block (`emu` None: its defaults; its gRPC front end is the target for backend "grpc"),
    on CPUs of its own: the calling thread keeps the first (emulator.process).  `announce` says it is starting."""
    from infermeter.load.target import Endpoint

    if url is not None:
        yield Endpoint(url, {}, url)
        return
    from infermeter.client.proxy import direct
    from infermeter.emulator.config import EmulatorConfig
    from infermeter.emulator.declaration import sut_declaration
    from infermeter.emulator.process import emulator_process

    if emu is None:
        emu = EmulatorConfig()
    if backend == "grpc":
        emu = emu.model_copy(update={"grpc_port": 0})
    if announce is not None:
        announce(STARTING)
    with emulator_process(emu, pin_cpus=True) as process, direct(process.url):  # started here: never via a proxy
        target = process.grpc_target if backend == "grpc" and process.grpc_target else process.url
        yield Endpoint(target, sut_declaration(emu), process.url)
