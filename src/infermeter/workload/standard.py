"""The draft's five standard workloads (section 4.3.2, exactly as Appendix A specifies) and a fairness mix.

Where a workload names a dataset infermeter cannot download (ShareGPT, The Stack), its lengths come from the
draft's reference statistics instead, and the workload's notes say so.
"""

from __future__ import annotations

from pathlib import Path

from infermeter.errors import UserError
from infermeter.plugins import Entry, Registry
from infermeter.workload.distributions import Empirical, Fixed, LogNormal, Quantiles, Uniform
from infermeter.workload.spec import PrefixSharing, RequestClass, WorkloadSpec, load_spec_file

SYNTHETIC_UNIFORM = WorkloadSpec(
    name="synthetic-uniform",
    purpose="baseline comparison with controlled variability (A.1)",
    classes=[RequestClass(input=Uniform(min=128, max=512), output=Uniform(min=64, max=256))],
    notes=[
        "A.1: input Uniform[128, 512], output Uniform[64, 256] as max_tokens, temperature 0, no prefix sharing.",
        "Lengths are drawn with numpy's PCG64 from the recorded seed, not Python's random.Random of the "
        "A.1.4 pseudocode: the same distribution, a different stream.",
    ],
)

SYNTHETIC_SKEWED = WorkloadSpec(
    name="synthetic-skewed",
    purpose="scheduling under high length variance (A.2)",
    classes=[
        RequestClass(
            input=LogNormal(mu=5.5, sigma=1.0, min=32, max=4096),
            output=LogNormal(mu=4.5, sigma=1.2, min=16, max=2048),
        )
    ],
    notes=[
        "A.2: floor and cap clip the drawn value (a draw below the floor becomes the floor, above the cap "
        "the cap); the clipped input has median e^5.5 = 245 and mean 400 (the draft rounds it to ~405)."
    ],
)

CONVERSATION = WorkloadSpec(
    name="conversation",
    purpose="interactive chat (A.3)",
    content="prose",
    classes=[
        RequestClass(
            input=Quantiles(points={50: 156, 95: 892, 99: 2134}, min=4, max=8192),
            output=Quantiles(points={50: 234, 95: 789, 99: 1567}, min=4, max=4096),
        )
    ],
    prefix=PrefixSharing(fraction=0.5, count=1, length=Fixed(value=200)),
    notes=[
        "ShareGPT cannot be downloaded here: lengths follow the draft's A.3.2 reference statistics "
        "(input P50 156 / P95 892 / P99 2134, output P50 234 / P95 789 / P99 1567) through a quantile-"
        "matched log-normal (piecewise in z-score and log length), floored at 4 and capped at 8192 / 4096.",
        "50% of requests carry one shared 200-token system prompt, prepended to the drawn user input.",
        "Prompts are English prose from infermeter's embedded grammar (natural sentences, not a word list): "
        "servers with speculative decoding or n-gram lookup behave differently on random words.",
    ],
)

CODE_COMPLETION = WorkloadSpec(
    name="code-completion",
    purpose="prefix caching with code context (A.4)",
    content="code",
    classes=[
        RequestClass(
            input=Quantiles(points={50: 192, 95: 768}, min=16, max=4096),
            output=LogNormal(mu=4.0, sigma=1.5, min=1, max=2048),
        )
    ],
    prefix=PrefixSharing(fraction=0.8, count=10, length=Uniform(min=512, max=1024), zipf_s=1.5),
    notes=[
        "A.4: 10 repository contexts of Uniform[512, 1024] tokens; 80% of requests start with one of them, "
        "chosen Zipf(s=1.5) by rank. Output Log-normal(mu=4.0, sigma=1.5), capped at 2048.",
        "The Stack cannot be downloaded here: prompts are Python only, the standard library's own source read "
        "offline (each repository context the openings of several modules, each request consecutive lines of "
        "one); the function-level part of each prompt (after any shared context) is log-normal with median 192 "
        "and P95 768 tokens, infermeter's assumption, not the draft's.",
    ],
)

LONG_CONTEXT = WorkloadSpec(
    name="long-context",
    purpose="long-context behaviour (A.5)",
    content="document-question",
    classes=[
        RequestClass(
            input=Empirical(values=[8192, 16384, 32768, 65536, 131072]),
            output=Fixed(value=256),
        )
    ],
    notes=[
        "A.5: input uniform over the target lengths 8192, 16384, 32768, 65536, 131072 tokens "
        "(a document of target - 100 tokens and a ~100-token question); output fixed at 256 (max_tokens).",
        "Section 4.3.2.5 instead says Uniform(8192, 32768); infermeter follows Appendix A. For a model with "
        "a shorter context, write a custom workload with the lengths it supports.",
    ],
)

FAIRNESS_MIX = WorkloadSpec(
    name="fairness-mix",
    purpose="the short/long class mix of the scheduling-fairness test (5.6.2), 80% short / 20% long",
    classes=[
        RequestClass(name="short", weight=0.8, input=Uniform(min=64, max=256), output=Uniform(min=32, max=128)),
        RequestClass(name="long", weight=0.2, input=Uniform(min=1024, max=4096), output=Uniform(min=256, max=1024)),
    ],
    notes=["Not one of the five standard workloads: the class definitions of draft 5.6.2."],
)

STANDARD: dict[str, WorkloadSpec] = {
    w.name: w for w in (SYNTHETIC_UNIFORM, SYNTHETIC_SKEWED, CONVERSATION, CODE_COMPLETION, LONG_CONTEXT, FAIRNESS_MIX)
}


def _a_workload(name: str, obj: object) -> str | None:
    """What keeps another package's entry from being the workload `name` (None: nothing)."""
    if not isinstance(obj, WorkloadSpec):
        return "it is not a WorkloadSpec"
    return None if obj.name == name else f"its workload's name is {obj.name!r}, not {name!r}"


# the names `--workload` accepts: the workloads above, and those another package adds with an entry point in
# `infermeter.workloads` naming a WorkloadSpec
WORKLOADS: Registry[WorkloadSpec] = Registry(
    "workload",
    [
        Entry("synthetic-uniform", f"{__name__}:SYNTHETIC_UNIFORM", SYNTHETIC_UNIFORM.purpose),
        Entry("synthetic-skewed", f"{__name__}:SYNTHETIC_SKEWED", SYNTHETIC_SKEWED.purpose),
        Entry("conversation", f"{__name__}:CONVERSATION", CONVERSATION.purpose),
        Entry("code-completion", f"{__name__}:CODE_COMPLETION", CODE_COMPLETION.purpose),
        Entry("long-context", f"{__name__}:LONG_CONTEXT", LONG_CONTEXT.purpose),
        Entry("fairness-mix", f"{__name__}:FAIRNESS_MIX", FAIRNESS_MIX.purpose),
    ],
    check=_a_workload,
    describe=lambda spec: spec.purpose or spec.name,
)


def resolve(name_or_path: str) -> WorkloadSpec:
    """A workload by name (infermeter's standard ones, or another package's), or a custom one from a YAML/JSON
    file."""
    spec = WORKLOADS.load(name_or_path)
    if spec is not None:
        return spec
    path = Path(name_or_path)
    if name_or_path.strip() and (path.suffix in (".yaml", ".yml", ".json") or path.exists()):
        return load_spec_file(path)
    raise UserError(
        f"unknown workload '{name_or_path}': use one of {', '.join(WORKLOADS)} or a path to a YAML/JSON file"
    )


def fixed_lengths(input_tokens: int, output_tokens: int) -> WorkloadSpec:
    """A one-class workload of fixed lengths (the `--input-tokens N --output-tokens N` shortcut)."""
    return WorkloadSpec(
        name=f"fixed-{input_tokens}-{output_tokens}",
        classes=[RequestClass(input=Fixed(value=input_tokens), output=Fixed(value=output_tokens))],
    )
