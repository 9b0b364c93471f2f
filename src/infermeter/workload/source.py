"""Where a run's (or a simulation's) requests are drawn from, its file read once: a workload to generate from, a
BurstGPT trace, or a dataset (workload/datasets/); and the drawing of n of them with their arrival offsets and the
declaration run.json keeps."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from infermeter.errors import UserError
from infermeter.workload.arrivals import ArrivalSpec, arrival_offsets
from infermeter.workload.content import describe
from infermeter.workload.dataset import DatasetFormat
from infermeter.workload.spec import Requests, WorkloadSpec, generate
from infermeter.workload_declaration import DatasetDeclaration

if TYPE_CHECKING:
    from infermeter.config.sections import Workload

MAX_DRAWN = 10_000_000  # a generated workload draws as many requests as asked (the CLI bounds a run to this)


@dataclass(frozen=True)
class WorkloadSource:
    """Where requests are drawn from, its file read once: a BurstGPT trace's usable requests in arrival order (its
    own times, uncompressed), a dataset's requests (verbatim text or a trace's lengths and blocks, its own times when
    it has them), or a workload to generate from."""

    spec: WorkloadSpec | None = None
    trace: Requests | None = None  # the requests a file holds (a BurstGPT trace's, or a dataset's)
    trace_path: Path | None = None
    dataset: DatasetDeclaration | None = None  # the file was a --dataset: what run.json says about it

    @classmethod
    def read(cls, section: Workload) -> WorkloadSource:
        """The configuration's workload: its trace, dataset or workload file read here, and only here."""
        if section.trace is not None:
            return cls.burstgpt(section.trace)
        if section.dataset is not None:
            return cls.from_dataset(section)
        return cls.named(section.workload, section.input_tokens, section.output_tokens)

    @classmethod
    def burstgpt(cls, path: Path) -> WorkloadSource:
        """A BurstGPT trace's usable requests (--trace)."""
        from infermeter.workload.traces import load_burstgpt

        try:
            return cls(trace=load_burstgpt(path), trace_path=path.resolve())
        except UserError as exc:
            raise UserError(f"--trace {exc}") from None

    @classmethod
    def from_dataset(cls, section: Workload) -> WorkloadSource:
        """A --dataset read, filtered and sampled, its lengths counted under the run's named tokenizer (else the
        shipped reference: the server's own is not known before the run starts).  Read once per file version and
        choice in a process: a suite's runs, or a capacity search's probes, share one reading."""
        assert section.dataset is not None
        path = section.dataset.resolve()
        try:
            stat = path.stat()
            version = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            version = (0, 0)  # the reader names what is wrong (a failed read is not cached)
        choices = (
            section.dataset_format, section.block_tokens, section.max_input_tokens, section.max_output_tokens,
            section.dataset_sample, section.output_tokens, section.multi_turn, section.history, section.tokenizer,
            section.seed,
        )  # fmt: skip
        return _dataset_source(section.dataset, path, version, *choices)

    @classmethod
    def named(
        cls, workload: str | None, input_tokens: int | None = None, output_tokens: int | None = None
    ) -> WorkloadSource:
        """A standard workload, a workload file, or fixed lengths."""
        from infermeter.workload.standard import fixed_lengths, resolve

        if input_tokens is not None or output_tokens is not None:
            if workload is not None or input_tokens is None or output_tokens is None:
                raise UserError("give either --workload, or both --input-tokens and --output-tokens")
            return cls(spec=fixed_lengths(input_tokens, output_tokens))
        return cls(spec=resolve(workload or "synthetic-uniform"))

    def size(self) -> int:
        """How many requests it can give: a file's usable rows, else (a generated workload) no bound."""
        return MAX_DRAWN if self.trace is None else len(self.trace)

    @property
    def timed(self) -> bool:
        """Whether its requests carry their own arrival times (a trace, a timed dataset): it can be replayed."""
        return self.trace is not None and len(self.trace.arrival_s) == len(self.trace)

    def rest(self, used: int) -> WorkloadSource | None:
        """The source a warm-up draws from: itself, or a dataset's rows after the `used` measured ones (so no
        measured prompt is sent before the measurement; None when none are left)."""
        if self.dataset is None or self.trace is None:
            return self
        if used >= len(self.trace):
            return None
        tail = self.trace.tail(used)
        if self.timed:
            tail.arrival_s = tail.arrival_s - tail.arrival_s[0]
        return WorkloadSource(trace=tail, trace_path=self.trace_path, dataset=self.dataset)

    @property
    def flag(self) -> str:
        return "--trace" if self.dataset is None else "--dataset"

    def draw(
        self, n: int, seed: int, arrivals: ArrivalSpec | None = None, rps_scale: float = 1.0
    ) -> tuple[Requests, dict[str, Any]]:
        """n requests with their arrival offsets, and the declaration run.json keeps.  A file gives its first n,
        arriving at its own times compressed rps_scale times unless `arrivals` names a rate process."""
        if self.trace is None:
            assert self.spec is not None
            requests = generate(self.spec, n, seed)
            declaration = self.spec.declaration(seed)
        else:
            assert self.trace_path is not None
            if n > len(self.trace):
                have, what = len(self.trace), "usable requests" if self.dataset is None else "requests left"
                raise UserError(
                    f"{self.flag} {self.trace_path} has {have} {what}, fewer than the {n} asked for: ask for at most "
                    f"{have}"
                )
            requests = self.trace.head(n)
            if self.timed:
                requests.arrival_s = requests.arrival_s / rps_scale
            declaration = self._file_declaration(n, seed, rps_scale)
            if arrivals is None and self.timed:
                arrivals = ArrivalSpec(kind="trace", time_scale=rps_scale)
        if arrivals is not None and arrivals.kind != "trace":
            requests.arrival_s = arrival_offsets(arrivals, n, seed)
        declaration["arrivals"] = (
            None if arrivals is None else {**arrivals.model_dump(), "description": arrivals.describe()}
        )
        return requests, declaration

    def _file_declaration(self, n: int, seed: int, rps_scale: float) -> dict[str, Any]:
        """run.json's workload block for requests read from a file."""
        assert self.trace_path is not None
        if self.dataset is None:
            return {
                "name": f"trace:{self.trace_path.name}",
                "seed": seed,
                "source": str(self.trace_path),
                "content": describe("words"),
                "notes": ["lengths and arrival times replayed from a BurstGPT-format trace, sorted by timestamp"],
            }
        assert self.trace is not None
        texts = self.trace.texts
        verbatim = texts is not None and any(t is not None for t in texts[:n])
        update: dict[str, Any] = {"used": n, "time_scale": rps_scale if self.timed else None}
        notes = [f"requests from the {self.dataset.format} dataset {self.trace_path.name}, in file order"]
        if self.timed:
            notes.append(f"arrival times replayed from the dataset's timestamps, compressed x{rps_scale:g}")
        return {
            "name": f"dataset:{self.trace_path.name}",
            "seed": seed,
            "source": str(self.trace_path),
            "content": "the dataset's own text, sent verbatim" if verbatim else describe("words"),
            "output_control": "max_tokens",
            "notes": notes,
            "dataset": self.dataset.model_copy(update=update).model_dump(),
        }


@functools.lru_cache(maxsize=2)
def _dataset_source(
    given: Path,
    path: Path,
    version: tuple[int, int],
    fmt: DatasetFormat | None,
    block_tokens: int,
    max_input_tokens: int | None,
    max_output_tokens: int | None,
    sample: int | None,
    output_tokens: int | None,
    multi_turn: bool,
    history: Literal["replies", "dataset"],
    tokenizer: str | None,
    seed: int,
) -> WorkloadSource:
    """The source the dataset file `given` (at `path`, `version`: its mtime and size) gives under these choices.
    Callers only draw from it (`Requests.head`/`tail` give new objects), so one reading serves them all."""
    from infermeter.tokenizers import REFERENCE, resolve_tokenizer
    from infermeter.workload.dataset_requests import DatasetChoice, dataset_requests
    from infermeter.workload.datasets import read_dataset

    read = read_dataset(given, fmt, block_tokens)  # its messages name the file as the user did
    choice = DatasetChoice(max_input_tokens, max_output_tokens, sample, output_tokens, multi_turn, history)
    requests, declared = dataset_requests(read, resolve_tokenizer(tokenizer or REFERENCE), choice, seed)
    return WorkloadSource(trace=requests, trace_path=path, dataset=declared)
