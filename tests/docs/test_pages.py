"""The documentation's generated parts (docs/hooks/infermeter_docgen), checked without building the site: a page per
command and subcommand, every option of `run` on its page, every field of summary.json on its page, the Python API,
the tests' list, the helpers' escaping, and the README lines CI greps for."""

import re
from pathlib import Path
from typing import Literal

import pytest
import yaml
from infermeter_docgen import api, commands, contracts, markers, suites, text
from pydantic import BaseModel, Field

from infermeter.cli.app import command_group
from infermeter.cli.lazy import COMMANDS
from infermeter.metrics.summary_model import Requests, Stats, Summary
from infermeter.plugins import BUILTIN
from infermeter.suites.registry import SUITES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tree() -> commands.Command:
    return commands.command_tree()


@pytest.fixture(scope="module")
def pages(tree) -> dict[str, str]:
    return {page.src_uri: page.markdown for page in commands.pages(tree)}


def nav_uris(entries) -> list[str]:
    """Every page a (nested) mkdocs nav names."""
    out = []
    for entry in entries:
        if isinstance(entry, str):
            out.append(entry)
        elif isinstance(entry, dict):
            for value in entry.values():
                out += nav_uris([value] if isinstance(value, str) else value)
    return out


def test_every_command_and_subcommand_has_a_page_and_a_nav_entry(tree, pages):
    assert commands.problems(tree) == []
    assert [c.path[0] for c in tree.subcommands] == list(COMMANDS)
    group = command_group()
    ctx = type(group).context_class(group, info_name="infermeter")
    expected = {"commands/index.md"}
    for name in COMMANDS:
        cmd = group.get_command(ctx, name)
        if hasattr(cmd, "list_commands"):  # a group: its page is its directory's index, then a page per subcommand
            subs = cmd.list_commands(type(ctx)(cmd, parent=ctx, info_name=name))
            assert subs, name
            expected |= {f"commands/{name}/index.md", *(f"commands/{name}/{sub}.md" for sub in subs)}
        else:
            expected.add(f"commands/{name}.md")
    assert set(pages) == expected
    for name in SUITES:  # every test of the registry has its page, under its title
        if SUITES[name].package == BUILTIN:
            assert pages[f"commands/test/{name}.md"].startswith(f"# infermeter test {name}\n")
    assert {"commands/runs/list.md", "commands/runs/trend.md", "commands/runs/check.md"} <= set(pages)
    assert sorted(nav_uris(commands.nav(tree))) == sorted(pages)


def test_each_option_of_run_appears_on_its_page(pages):
    group = command_group()
    ctx = type(group).context_class(group, info_name="infermeter")
    run = group.get_command(ctx, "run")
    page = pages["commands/run.md"]
    assert page.startswith("# infermeter run\n\n```text\nUsage: infermeter run [OPTIONS]\n```")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in page.splitlines() if line.startswith("| `-")}
    for param in run.params:
        assert any(f"`{opt}`" in row for row in rows for opt in param.opts), param.name
    assert len(rows) == len(run.params)
    rate = next(param for param in run.params if param.name == "rate")
    assert rows["`--rate`"] == f"| `--rate` | float |   | {rate.help} |"
    assert rows["`-n` `--requests`"].startswith("| `-n` `--requests` | int |")
    assert rows["`--progress` `--no-progress`"] == "| `--progress` `--no-progress` | flag | `on` | show live progress |"
    assert "| `--header` | str, repeatable |" in rows["`--header`"]


def test_a_group_page_lists_its_commands_and_its_own_options(pages):
    page = pages["commands/test/index.md"]
    assert "## Options of the group itself" in page and "| `--list` | flag | `off` |" in page
    assert "| [`infermeter test ttft`](ttft.md) | Time to First Token (IETF draft, section 5.1)" in page
    index = pages["commands/index.md"]
    assert "[`infermeter test ttft`](test/ttft.md)" in index and "[`infermeter run`](run.md)" in index


def test_a_declared_default_text_is_shown():
    class Param:
        default = 0.05
        show_default = "5%"

    assert commands._default(Param()) == "5%"
    Param.show_default = True
    assert commands._default(Param()) == "0.05"


def table_rows(markdown: str, model: str) -> dict[str, str]:
    """The rows of one model's table on a contract page, by key."""
    section = markdown.split(f"### {model} {{#", 1)[1].split("\n### ", 1)[0]
    return {m.group(1): line for line in section.splitlines() if (m := re.match(r"\| `([^`]+)` \|", line))}


def test_every_field_of_summary_appears_on_the_summary_page():
    page = markers.fill((ROOT / "docs/contracts/summary-json.md").read_text(), "contracts/summary-json.md")
    assert "<!-- infermeter" not in page
    for model in contracts.model_tree(Summary):
        rows = table_rows(page, model.__name__)
        keys = {info.serialization_alias or info.alias or name for name, info in model.model_fields.items()}
        assert set(rows) == keys, model.__name__
    summary = table_rows(page, "Summary")
    assert set(summary) >= set(Summary.model_fields)
    assert summary["ttft_ms"] == "| `ttft_ms` | [Stats](#stats) | required |   |"
    assert summary["fluidity"] == "| `fluidity` | [Fluidity](#fluidity) or null | required | null without deadlines |"
    assert "| left out | live runs that could scrape /metrics |" in summary["server_metrics"]
    stats = table_rows(page, "Stats")
    assert "p99.9" in stats and "p99_9" not in stats  # the JSON key, not the Python name
    requests = table_rows(page, "Requests")
    assert requests["failures_by_reason"].endswith("| by the reason part of each error, most common first |")
    assert len(contracts.model_tree(Summary)) > 20  # every block, at any depth


def test_the_records_page_has_every_arrow_column():
    from infermeter.records.schema import SCHEMA

    page = markers.fill("<!-- infermeter: records -->\n", "contracts/records.md")
    rows = table_rows(page, "RequestRecord")
    assert list(rows) == SCHEMA.names
    assert rows["token_times"] == "| `token_times` | `list<item: double>` | `[]` |   |"
    assert rows["turn"] == "| `turn` | `int32` | `null` | the turn's index in its session, from 0 |"


def test_field_comments_are_read_from_the_source():
    class Example(BaseModel):
        """An example."""

        a: int  # on its line
        # above it
        b: int = 0
        # cut off by the blank line

        c: int = 0
        d: str = Field(default="#", description="given")  # trailing, but the description wins

        def method(self) -> int:
            x = 1  # not a field
            return x

    assert contracts.field_comments(Example) == {
        "a": "on its line",
        "b": "above it",
        "d": "trailing, but the description wins",
    }
    rows = {r.key: r for r in contracts.model_table(Example, lambda m: m.__name__, "example").rows}
    assert rows["d"].description == "given" and rows["c"].description == "" and rows["b"].default == "`0`"
    assert rows["a"].default == "required" and rows["d"].type == "string"


def test_types_read_as_json():
    def link(model: type[BaseModel]) -> str:
        return f"<{model.__name__}>"

    assert contracts.type_text(int | None, link) == "integer or null"
    assert contracts.type_text(list[Stats], link) == "list[<Stats>]"
    assert contracts.type_text(dict[str, float], link) == "dict[string, number]"
    assert contracts.type_text(Summary.model_fields["itl_option"].annotation, link) == 'one of `"A"`, `"B"`, `"C"`'
    assert contracts.type_text(Literal["infermeter.run/2"], link) == '`"infermeter.run/2"`'
    assert contracts.model_tree(Requests)[0] is Requests


def test_the_api_page_follows_infermeter_all(monkeypatch):
    import infermeter

    reference = api.reference()
    for name in infermeter.__all__:
        assert f"## `{name}`\n" in reference
    assert "```python\ndef benchmark(" in reference
    assert "Its fields are summary.json's keys: [the summary.json tables](contracts/summary-json.md)." in reference
    monkeypatch.delattr(infermeter, "__all__")
    assert api.reference() == api.NOT_INSTALLED


def test_a_long_signature_is_split_at_its_own_commas():
    head = "def f(a: dict[str, int] = {'x': 1, 'y': 2}, b: str = 'p, q', *, c: int = 3) -> None"
    assert api.wrapped(head, width=40) == (
        "def f(\n    a: dict[str, int] = {'x': 1, 'y': 2},\n    b: str = 'p, q',\n    *,\n    c: int = 3,\n) -> None"
    )
    assert api.wrapped("def g(a) -> None") == "def g(a) -> None"


def test_the_tests_list_comes_from_the_registry():
    table = suites.suite_table("draft-tests/index.md")
    builtin = [name for name in SUITES if SUITES[name].package == BUILTIN]
    assert len(table.splitlines()) == 2 + len(builtin)
    assert "| [`ttft`](../commands/test/ttft.md) | IETF draft, section 5.1 | Time to First Token |" in table


def test_markers_fill_their_parts_and_refuse_unknown_names():
    page = "Intro.\n\n<!-- infermeter: exporters -->\n\nA `<!-- infermeter: NAME -->` in prose stays.\n"
    filled = markers.fill(page, "guide/export.md")
    assert "| `--export otlp:WHERE` |" in filled and "`<!-- infermeter: NAME -->` in prose" in filled
    with pytest.raises(markers.UnknownMarker, match="no generated part named 'nothing'"):
        markers.fill("<!-- infermeter: nothing -->\n", "x.md")


def test_program_text_is_escaped_but_its_code_spans_kept():
    assert text.plain("a <b> *c* `d|e` [f] seeds/001") == r"a &lt;b&gt; \*c\* `d|e` \[f\] Metron"
    assert text.paragraphs("one\ntwo\n\nthree") == "one two\n\nthree"
    assert text.code("a`b") == "``a`b``"
    assert text.table_code_pipes("| `a \\| b` | c \\| d |\nnot `x \\| y`") == "| `a | b` | c \\| d |\nnot `x \\| y`"


def test_every_docs_page_is_in_the_nav_and_no_generated_page_is_committed():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = nav_uris(config["nav"])
    written = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts}
    assert set(listed) - {"commands/index.md"} == written
    assert not (ROOT / "docs" / "commands").exists()  # made at build time only
    assert config["theme"]["font"] is False  # no web fonts fetched


def test_readme_keeps_what_ci_runs_and_its_links_resolve():
    readme = (ROOT / "README.md").read_text()
    first = [line for line in readme.splitlines() if re.search(r"# run the tests$", line)]
    second = [line for line in readme.splitlines() if re.search(r"# run the second tier$", line)]
    assert first[0] == (
        'python3 -m venv .venv && .venv/bin/pip install -e ".[test]" && .venv/bin/python -m pytest   # run the tests'
    )
    assert second[0] == (
        ".venv/bin/python -m pytest --second-tier -n 3 --dist loadgroup --ignore=tests/integration && "
        ".venv/bin/python -m pytest --second-tier tests/integration   # run the second tier"
    )
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert len(links) > 20
    for link in links:
        assert (ROOT / link).is_file(), link
