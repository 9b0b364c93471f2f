import numpy as np
import pytest

from infermeter.metrics import RecordColumns
from infermeter.metrics import latency as lat
from infermeter.records import RequestRecord

nan = np.nan


@pytest.fixture
def cols(records):
    return RecordColumns.from_records(records)


def test_ttft_skips_empty_leading_chunk_and_failed(cols):
    np.testing.assert_allclose(lat.ttft(cols), [0.10, 0.2, nan, 0.1], atol=1e-12)


def test_e2e_tpot_normalized(cols):
    np.testing.assert_allclose(lat.e2e(cols), [0.19, 0.2, nan, 0.2], atol=1e-12)
    # (E2E - TTFT) / (n - 1): 0.09 / 3 and 0.1 / 2; a single token has no TPOT
    np.testing.assert_allclose(lat.tpot(cols), [0.03, nan, nan, 0.05], atol=1e-12)
    np.testing.assert_allclose(lat.normalized_latency(cols), [0.19 / 4, 0.2, nan, 0.2 / 3], atol=1e-12)


def test_itl_option_b_gives_zero_gaps_inside_chunks(cols):
    s = lat.itl(cols, "B")
    np.testing.assert_array_equal(s.lengths, [3, 0, 0, 2])
    np.testing.assert_allclose(s.values, [0.03, 0.06, 0.0, 0.1, 0.0], atol=1e-12)


def test_itl_option_a_is_time_between_content_chunks(cols):
    s = lat.itl(cols, "A")
    np.testing.assert_array_equal(s.lengths, [2, 0, 0, 1])
    np.testing.assert_allclose(s.values, [0.03, 0.06, 0.1], atol=1e-12)


def test_itl_option_c_uses_server_times_and_falls_back(cols):
    s = lat.itl(cols, "C")
    np.testing.assert_array_equal(s.lengths, [3, 0, 0, 2])
    # request 0 has no server times: its option-B gaps; request 3: 0.64-0.58, 0.69-0.64
    np.testing.assert_allclose(s.values, [0.03, 0.06, 0.0, 0.06, 0.05], atol=1e-12)


def test_jitter_and_max_pause(cols):
    s = lat.itl(cols, "B")
    # request 0 gaps 0.03, 0.06, 0: mean 0.03, population variance (0 + 0.03^2 + 0.03^2) / 3
    np.testing.assert_allclose(lat.jitter(s), [np.sqrt(0.0006), nan, nan, 0.05], atol=1e-12)
    np.testing.assert_allclose(lat.max_pause(s), [0.06, nan, nan, 0.1], atol=1e-12)


def test_requests_without_tokens_are_undefined_not_zero():
    recs = [
        RequestRecord(request_id=0, submitted_at=1.0, status="ok"),
        RequestRecord(request_id=1, submitted_at=1.0, token_times=[1.5], output_tokens=1),
    ]
    cols = RecordColumns.from_records(recs)
    np.testing.assert_allclose(lat.ttft(cols), [nan, 0.5])
    assert lat.itl(cols, "B").values.size == 0


def test_input_buckets_follow_the_draft():
    idx = lat.input_bucket_index(np.array([0, 255, 256, 511, 512, 1023, 1024, 2047, 2048, 4095, 4096, 100000]))
    np.testing.assert_array_equal(idx, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5])
    assert [lat.bucket_label(*b) for b in lat.INPUT_BUCKETS][-1] == "4096+"
