"""The special-token handling a run declares (the IETF draft, 4.4.3: BOS/EOS included or excluded from counts, system
prompt tokens counted separately or included, tool/function-call formatting tokens), computed from the run's tokenizer,
its chat template, its workload and its request options, so that each run says what holds for it."""

from __future__ import annotations

from typing import Any

from infermeter.load.counting import TokenCounting
from infermeter.run_info import SpecialTokens
from infermeter.tokenizers.specials import specials
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload_declaration import WorkloadDeclaration

TOOL_KEYS = ("tools", "functions")  # request-body fields whose definitions a server formats into the prompt
TOOL_CHOICE_KEYS = ("tool_choice", "function_call")


def _bos_eos(counting: TokenCounting, prompter: ExactPrompter, ignore_eos: bool) -> str:
    tok = counting.tokenizer
    sp = specials(tok)
    option_a = counting.method == "A"
    if not sp.known:
        bos = f"{tok.name}'s BOS is unknown to infermeter: prompts are built and counted without one"
    elif prompter.template is not None and sp.bos and sp.bos in prompter.render(""):
        bos = f"BOS {sp.bos} is written by the chat template: counted in the input, one of the template's tokens"
    elif sp.added:
        added = " ".join(sp.added)
        bos = (
            f"a server encoding a prompt with {tok.name} adds {added}: the built prompt's length (the reference count) "
            f"excludes it, a server that adds it counts it in prompt_tokens; the metrics use "
            + ("the server's counts (option A): included" if option_a else "the reference counts (option B): excluded")
        )
    elif sp.bos:
        bos = f"{tok.name}'s BOS {sp.bos} is not added to prompts: not sent, not counted"
    elif option_a:
        bos = f"{tok.name} has no BOS token: none is sent or counted"
    else:
        bos = (
            f"the reference {tok.name} has no BOS token: the reference counts the metrics use (option B) hold none; a "
            "BOS the server's own tokenizer adds is in its prompt_tokens only"
        )
    if ignore_eos:
        eos = "EOS: requests set ignore_eos, so replies run to max_tokens and no EOS is generated or counted"
    else:
        name = sp.eos or "the model's EOS"
        eos = f"EOS: a reply may end on {name}, which carries no text: the reference output count excludes it; " + (
            "the metrics use the server's completion_tokens (option A), which include it where the server counts it"
            if option_a
            else "the metrics use the reference count (option B): excluded"
        )
    return f"{bos}; {eos}"


def _template(prompter: ExactPrompter) -> str:
    if prompter.template is None:
        return "none: the completions API sends the prompt as plain text, with no chat template"
    return (
        f"{prompter.template.origin}: its {prompter.overhead} tokens around each prompt (role markers, turn "
        "delimiters) are counted in the input, as prompts are built to length with them"
    )


def _system_prompt(prompter: ExactPrompter, workload: WorkloadDeclaration) -> str:
    shared = workload.prefix_sharing
    if shared is not None and shared.fraction > 0:
        where = "the user message" if prompter.template is not None else "the prompt"
        text = (
            f"the workload's shared prefix (system prompt or context: {shared.count} distinct, {shared.length} "
            f"tokens long, on {shared.fraction:.0%} of requests) opens {where} and is counted in each request's input "
            "tokens; no separate system message is sent"
        )
    else:
        text = "none is sent: the workload shares no prefix, and no system message is sent"
    if prompter.template is not None and "system" in prompter.render("").lower():
        text += "; the chat template writes a system turn of its own, counted with the template's tokens"
    return text


def _tool_calls(counting: TokenCounting, prompter: ExactPrompter, extra_body: dict[str, Any]) -> str:
    """Tool/function definitions sent with --extra-body: a chat server formats them with its template's tool tokens;
    the completions API has no template to format them with."""
    given = [k for k in TOOL_KEYS if extra_body.get(k)]
    if not given:
        return "none: no tools or functions are sent, so no tool/function-call formatting tokens are in any count"
    n = sum(len(v) if isinstance(v, list) else 1 for v in (extra_body[k] for k in given))
    choice = [k for k in TOOL_CHOICE_KEYS if k in extra_body]
    sent = (
        f"{n} definition(s) in the request body's {' and '.join(given)} (--extra-body"
        + (f", with {' and '.join(choice)}" if choice else "")
        + ")"
    )
    if prompter.template is None:
        held = (
            "; the server's counts the metrics use (option A) would hold any it added" if counting.method == "A" else ""
        )
        return (
            f"{sent} on the completions API, which sends the prompt as plain text with no chat template: nothing "
            "formats them into the prompt (a server ignores or refuses them there), so no tool/function-call tokens "
            f"are in the built prompt's length{held}"
        )
    counted = (
        "the metrics use the server's counts (option A): included"
        if counting.method == "A"
        else "the metrics use the reference counts (option B): excluded"
    )
    return (
        f"{sent}: the chat server formats them into the prompt with its template's tool tokens, counted in its "
        f"prompt_tokens but not in the built prompt's length; {counted}"
    )


def special_tokens(
    counting: TokenCounting,
    prompter: ExactPrompter,
    workload: WorkloadDeclaration,
    *,
    ignore_eos: bool,
    extra_body: dict[str, Any],
) -> SpecialTokens:
    """Each part of 4.4.3 as it holds for this run."""
    return SpecialTokens(
        bos_eos=_bos_eos(counting, prompter, ignore_eos),
        chat_template=_template(prompter),
        system_prompt=_system_prompt(prompter, workload),
        tool_calls=_tool_calls(counting, prompter, extra_body),
    )


def special_tokens_line(special: SpecialTokens) -> str:
    """The declaration in one line (run.json's tokenizer.special_tokens, as earlier runs carried it)."""
    return special.line()
