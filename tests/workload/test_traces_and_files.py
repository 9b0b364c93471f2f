import numpy as np
import pytest

from infermeter.errors import UserError
from infermeter.workload.build import build_requests
from infermeter.workload.spec import load_spec_file
from infermeter.workload.traces import load_burstgpt, load_length_csv

BURST = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
20,ChatGPT,300,40,340,Conversation log
5,GPT-4,100,0,100,Conversation log
10,ChatGPT,200,30,230,Conversation log
40,GPT-4,500,60,560,API log
"""


def test_burstgpt_sorted_failed_dropped_and_rps_scaled(tmp_path):
    p = tmp_path / "b.csv"
    p.write_text(BURST)
    r = load_burstgpt(p, rps_scale=10)
    assert r.input_tokens.tolist() == [200, 300, 500]
    assert r.output_tokens.tolist() == [30, 40, 60]
    np.testing.assert_allclose(r.arrival_s, [0.0, 1.0, 3.0])
    assert r.request_class.tolist() == ["ChatGPT", "ChatGPT", "GPT-4"]
    assert load_burstgpt(p, model="GPT-4").input_tokens.tolist() == [500]
    with pytest.raises(UserError, match="fewer than"):
        load_burstgpt(p, n=10)


def test_burstgpt_missing_columns(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(UserError, match="not a BurstGPT CSV"):
        load_burstgpt(p)
    with pytest.raises(UserError, match="does not exist"):
        load_burstgpt(tmp_path / "none.csv")


def test_length_csv(tmp_path):
    p = tmp_path / "l.csv"
    p.write_text("input_tokens,output_tokens,request_class\n10,5,a\n20,6,b\n")
    r = load_length_csv(p)
    assert r.input_tokens.tolist() == [10, 20] and r.request_class.tolist() == ["a", "b"]


def test_custom_yaml_workload(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text(
        "name: mine\nclasses:\n"
        "  - {name: chat, weight: 3, input: {kind: fixed, value: 50}, output: {kind: uniform, min: 1, max: 9}}\n"
        "  - {name: rag, weight: 1, input: {kind: lognormal, mu: 7, sigma: 0.5, min: 100, max: 8000},\n"
        "     output: {kind: fixed, value: 64}}\n"
    )
    spec = load_spec_file(p)
    reqs, decl = build_requests(1000, 9, workload=str(p))
    assert decl["name"] == "mine" and decl["seed"] == 9
    assert set(reqs.request_class.tolist()) == {"chat", "rag"}
    assert (reqs.input_tokens[reqs.request_class == "chat"] == 50).all()
    assert spec.classes[1].output.describe() == "fixed 64"


def test_custom_workload_errors_are_one_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: bad\nclasses:\n  - {input: {kind: uniform, min: 1}, output: {kind: fixed, value: 1}}\n")
    with pytest.raises(UserError) as e:
        load_spec_file(p)
    assert "classes.0.input" in str(e.value) and "\n" not in str(e.value)
    p.write_text("name: [unclosed\n")
    with pytest.raises(UserError, match="not valid"):
        load_spec_file(p)
