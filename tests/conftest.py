"""Shared fixtures: a small set of records whose every metric is computed by hand in the tests, and one quick
tradeoff suite against the embedded emulator that the suite, browser and comparison tests all read (a minute of
real clock, made once per session).  And the two tiers: `pytest` runs the first (minutes); `pytest --second-tier`
runs what only a long or real-server run can show: `SECOND_TIER_TESTS` below, and llama.cpp's and vLLM's tests under
`integration/` (last, so that `.ci/run` can build llama.cpp and install vLLM meanwhile; README runs them in a pytest
of their own, one at a time, after the others ran several at a time under pytest-xdist)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infermeter.records import RequestRecord

SECOND_TIER = Path(__file__).parent / "integration"  # against llama.cpp's and vLLM's servers: minutes each

FAULT = "tests/faults/test_stream_faults.py::test_a_fault_ends_its_requests_records_and_the_run_goes_on["
SHAPE = "tests/faults/test_stream_faults.py::test_valid_stream_shapes_are_read_as_the_plain_stream["

# Tests of the second tier, by node id prefix, with what makes them long (FAULT and SHAPE: one CLI run per
# parameter).  Each area keeps a quicker test of the same code in the first tier (the coverage README states is the
# first tier's).
SECOND_TIER_TESTS: dict[str, str] = {
    "tests/emulator/test_endpoint_runs.py": "a CLI run of 30 requests per API (each API's client and emulator sides "
    "are tested in the first tier)",
    "tests/telemetry/test_dcgm.py::test_infermeter_run_": "CLI runs beside a fake DCGM exporter (the monitor, its "
    "energy window and its warning are tested in the first tier)",
    "tests/client/test_kserve_grpc.py::test_ttft_and_itl_over_grpc_agree_with_sse": "both transports, timed",
    "tests/suites/test_quick_plans.py::test_prefix_cache_runs": "a suite's five runs",
    "tests/suites/test_capacity_and_prefill.py::test_capacity_replays_a_trace": "a capacity search's probes",
    "tests/suites/test_quick_plans.py::test_long_context_runs_each_length_at_each_concurrency": "a suite's plan, run",
    "tests/suites/test_quick_plans.py::test_guardrail_against_servers": "a suite run against three servers",
    "tests/suites/test_quick_plans.py::test_capacity_then_memory_pressure_from_its_maximum": "two suites in a row",
    "tests/suites/test_twin.py::test_the_probe_stops_its_ladder_where_a_batching_server_queues[scheduler1-mixed]": (
        "a probe ladder (the separate scheduler's stays in the first tier)"
    ),
    "tests/distributed/test_sweeps_as_tasks.py::test_a_sweep_on_workers_resumes_the_points_already_done": (
        "a sweep on workers, killed and resumed"
    ),
    "tests/faults/test_signals_and_disk.py::test_the_client_killed_loses_no_request": "a CLI run killed mid-run",
    "tests/report/test_browser.py": "Debian's chromium drawing the reports, after the quick tradeoff suite",
    "tests/python_api/test_benchmark.py::test_the_issues_one_liner_prints_exactly_the_count": "a fresh interpreter "
    "running the issue's one-liner against the emulator (benchmark() in-process stays in the first tier)",
    "tests/report/test_html.py::test_report_writes_markdown_and_html_of_a_run": "an emulator run with deadlines and "
    "an SLO, then its reports (rendering is tested on built documents in the first tier)",
    "tests/suites/test_framework.py::test_grid_measures_each_cell_and_aggregates_generation_over_the_batch": (
        "the grid suite's cells on the real clock"
    ),
    "tests/telemetry/test_energy_and_metrics.py::test_a_run_against_the_emulator_stores_and_summarizes_metrics": (
        "a CLI run scraping the emulator's metrics (the scraper and summary are tested on fixtures in the first tier)"
    ),
    "tests/workload/test_content.py::test_run_json_declares_the_content": "a CLI run per content kind",
    "tests/distributed/test_run_on_workers.py::test_a_closed_loop_divides_its_concurrency_between_the_workers": (
        "a closed loop on local dask workers (the share arithmetic is tested in the first tier)"
    ),
    "tests/load/test_server_software.py::test_a_live_run_declares_its_software_in_run_json_and_the_reports": (
        "a CLI run and its reports (the declaration is tested in the first tier)"
    ),
    "tests/load/test_realtime.py::test_a_realtime_run_says_so_in_run_json_and_the_report": "a CLI run",
    "tests/report/test_earlier_versions.py::test_a_new_live_run_writes_the_current_contracts_with_the_keys_of_v1": (
        "a live run (earlier versions' fixtures are read in the first tier)"
    ),
    "tests/load/test_warmup_and_bounds.py::test_min_duration_keeps_a_closed_loop_sending_until_both_bounds": (
        "a closed loop held to a minimum duration"
    ),
    "tests/sim/test_simulator.py::test_sim_cli_and_side_by_side_report_show_chunked_prefill_smoother": (
        "two CLI simulations and a side-by-side report"
    ),
    "tests/report/test_compare.py::test_suites_are_compared_level_by_level_and_on_their_figures": "two quick suites",
    "tests/report/test_compare.py::test_one_configuration_alone_is_a_one_line_error": "repeated emulator runs",
    "tests/report/test_compare.py::test_suites_of_different_tests_or_no_suite_are_refused": "two quick suites",
    "tests/faults/test_stream_faults.py::test_a_run_where_nothing_succeeds_says_so_with_its_exit_code": "a CLI run",
    FAULT + "http_503": "a CLI run per fault",
    FAULT + "http_500": "a CLI run per fault",
    SHAPE + "no_done": "a CLI run per shape",
    "tests/suites/test_quick_plans.py::test_fairness_runs_each_class_alone_then_mixed": "a suite's runs",
    "tests/docs/test_site_build.py": "mkdocs build --strict of the whole documentation site (its generated pages "
    "are tested in the first tier)",
    "tests/suites/test_fairness_cache_guardrail.py": "three suites at their quick scale on the real clock",
    "tests/suites/test_capacity_memory.py": "capacity and memory-pressure suites on the real clock",
    "tests/suites/test_itl_and_long_context.py::test_long_context": "the long-context suite on the real clock",
    "tests/suites/test_itl_and_long_context.py::test_itl_runs": "the ITL suite's four levels on the real clock",
    "tests/suites/test_load_sweeps.py": "the tradeoff and throughput sweeps on the real clock",
    "tests/suites/test_ttft.py": "the TTFT suite on the real clock",
    "tests/suites/test_twin.py::test_twin_suite": "the twin suite: calibration probes and measured runs",
    "tests/suites/test_twin.py::test_calibrate_recovers": "a whole calibration probe of an emulator",
    "tests/suites/test_capacity_and_prefill.py::test_capacity_against_the_emulator": "a capacity search, probed",
    "tests/report/test_compare.py::test_two_tradeoff_suites": "two tradeoff suites on the real clock",
    "tests/report/test_compare.py::test_chunked_prefill_lowers": "repeated runs of two schedulers",
    "tests/report/test_compare.py::test_different_seeds": "repeated runs on the real clock",
    "tests/report/test_compare.py::test_repeats_of_one_configuration": "nine emulator runs, three per group",
    "tests/report/test_suite_report.py::test_a_suite_records_what_each_run_sent": "reads the quick tradeoff suite",
    FAULT + "stall": "stalls the client waits out",
    FAULT + "http_429": "retries after a 429",
    FAULT + "reset_before": "a CLI run per fault",
    FAULT + "line_without": "a CLI run per fault",
    FAULT + "end_before": "a CLI run per fault",
    FAULT + "error_event": "a CLI run per fault",
    SHAPE + "crlf": "a CLI run per shape",
    SHAPE + "keep_alive": "a CLI run per shape",
    SHAPE + "no_final": "a CLI run per shape",
    SHAPE + "reset_before": "a CLI run per shape",
    "tests/faults/test_signals_and_disk.py::test_the_client_stopped_by_a_signal": "signals to running CLI runs",
    "tests/faults/test_signals_and_disk.py::test_the_clients_own_descriptor_limit": "a run at its descriptor limit",
    "tests/faults/test_signals_and_disk.py::test_the_run_directory_filling_up": "a run filling a small disk",
    "tests/faults/test_signals_and_disk.py::test_server_killed_mid_run": "a server killed under a CLI run",
    "tests/faults/test_resume.py::test_capacity_search_resumes": "a capacity search killed and resumed",
    "tests/faults/test_resume.py::test_a_suite_killed_mid_run": "a suite killed and resumed",
    "tests/distributed/test_run_on_workers.py::test_a_worker_that_dies": "dask workers started and killed",
    "tests/distributed/test_run_on_workers.py::test_ctrl_c": "dask workers stopped by a signal",
    "tests/distributed/test_run_on_workers.py::test_two_workers_send": "a run on two dask workers and one without",
    "tests/distributed/test_sweeps_as_tasks.py::test_a_suite_on_workers": "a suite on dask workers",
    "tests/distributed/test_sweeps_as_tasks.py::test_sim_sweep_on_two_workers": "a sweep on dask workers",
    "tests/test_cli.py::test_run_without_url_benchmarks_the_embedded_emulator": "the default run: 300 requests",
    "tests/test_cli_bad_input.py::test_invalid_value_is_refused[test ": "every suite's options, each a CLI process",
    "tests/client/test_sse_fuzz.py::test_a": "hypothesis over arbitrary bytes",
    "tests/client/test_sse_fuzz.py::test_any_split": "hypothesis over every split of a stream",
    "tests/engine/test_fit_quality_cli.py::test_calibrate_recovers": "a calibration probe of an emulator",
    "tests/load/test_client_health.py::test_a_client_saturated_on_purpose": "a client saturated on purpose",
    "tests/emulator/test_emulator.py::test_ttft_rises_steeply": "a load past the emulator's saturation",
    "tests/emulator/test_real_clock.py::test_sim_and_emulator_agree": "the same load simulated and served",
}


# session fixtures that take a minute of real clock to make: the tests that read one run on the same xdist worker
SHARED_FIXTURES = frozenset({"tradeoff_suite", "groups", "run_dir"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--second-tier", action="store_true", help="run the second tier (see tests/conftest.py)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "second_tier: a test of the second tier (long or against a real server)")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The first tier never collects llama.cpp's modules: they need the servers `.ci/run` builds meanwhile."""
    inside = collection_path == SECOND_TIER or SECOND_TIER in collection_path.parents
    return True if inside and not config.getoption("--second-tier") else None


def second_tier(item: pytest.Item) -> bool:
    return (
        SECOND_TIER in item.path.parents
        or item.get_closest_marker("second_tier") is not None
        or any(item.nodeid.startswith(prefix) for prefix in SECOND_TIER_TESTS)
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the xdist_group marks given here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tier asked for; the second tier runs llama.cpp's tests last.  A prefix of `SECOND_TIER_TESTS` that
    names no test of a whole-suite collection is an error, so the table cannot drift from the tests."""
    wanted = bool(config.getoption("--second-tier"))
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS:  # the whole suite, as README runs it
        ids = [item.nodeid for item in items]
        stale = [prefix for prefix in SECOND_TIER_TESTS if not any(i.startswith(prefix) for i in ids)]
        if stale:
            raise pytest.UsageError(f"SECOND_TIER_TESTS in tests/conftest.py names no test: {stale}")
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (kept if second_tier(item) == wanted else dropped).append(item)
        shared = SHARED_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if shared:  # under pytest-xdist's --dist loadgroup, one worker makes each session fixture once
            item.add_marker(pytest.mark.xdist_group(sorted(shared)[0]))
    config.hook.pytest_deselected(items=dropped)
    kept.sort(key=lambda item: SECOND_TIER in item.path.parents)
    items[:] = kept


def hand_records() -> list[RequestRecord]:
    """Four requests covering multi-token chunks, an empty leading chunk, one token, a failure, server times."""
    return [
        # empty (role-only) event at 1.05, then 1 + 1 + 2 tokens
        RequestRecord(
            request_id=0,
            request_class="short",
            input_tokens=100,
            output_tokens=4,
            max_tokens=4,
            scheduled_at=0.99,
            submitted_at=1.0,
            token_times=[1.10, 1.13, 1.19, 1.19],
            chunk_times=[1.05, 1.10, 1.13, 1.19],
            chunk_tokens=[0, 1, 1, 2],
        ),
        # a single-token reply
        RequestRecord(
            request_id=1,
            request_class="short",
            input_tokens=300,
            output_tokens=1,
            max_tokens=8,
            scheduled_at=2.0,
            submitted_at=2.0,
            token_times=[2.2],
            chunk_times=[2.2],
            chunk_tokens=[1],
        ),
        # failed mid-stream: never counted in latency metrics
        RequestRecord(
            request_id=2,
            request_class="long",
            input_tokens=2000,
            output_tokens=1,
            max_tokens=16,
            scheduled_at=1.5,
            submitted_at=1.5,
            token_times=[1.9],
            chunk_times=[1.9],
            chunk_tokens=[1],
            status="error",
            error="connection lost mid-stream: after 1 tokens",
        ),
        # server-reported times (option C) beside a 2-token chunk
        RequestRecord(
            request_id=3,
            request_class="long",
            input_tokens=1500,
            output_tokens=3,
            max_tokens=3,
            scheduled_at=0.5,
            submitted_at=0.5,
            token_times=[0.6, 0.7, 0.7],
            chunk_times=[0.6, 0.7],
            chunk_tokens=[1, 2],
            server_token_times=[0.58, 0.64, 0.69],
        ),
    ]


@pytest.fixture
def records() -> list[RequestRecord]:
    return hand_records()


@pytest.fixture(scope="session")
def tradeoff_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`infermeter test tradeoff --quick --capacity 20 --html suite.html` as a user runs it: the suite's directory,
    with the HTML report the test command wrote beside it (suite.html)."""
    from tests.cli import infermeter

    out = tmp_path_factory.mktemp("tradeoff") / "suite"
    html = out.parent / "suite.html"
    p = infermeter("test", "tradeoff", "--quick", "--capacity", "20", "--no-progress", "--out", out, "--html", html)
    assert p.returncode == 0, p.stderr
    return out
