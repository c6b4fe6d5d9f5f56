"""The readers of benchmarks/bench_redteam_peers.py (garak's report, assay's summary) and the peer
venv marker of benchmarks/peers/venv.py, on small made-up inputs: no peer venv, no network."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

from peers import venv  # noqa: E402


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_redteam_peers", BENCH / "bench_redteam_peers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_garak_report_gives_asr_per_encoding_from_decodematch() -> None:
    bench = load_bench()
    lines = [json.dumps(r) for r in [
        {"entry_type": "attempt", "status": 2, "probe_classname": "encoding.InjectBase64"},
        {"entry_type": "eval", "probe": "encoding.InjectBase64", "detector": "encoding.DecodeApprox",
         "passed": 10, "fails": 0, "total_evaluated": 10},
        {"entry_type": "eval", "probe": "encoding.InjectBase64", "detector": "encoding.DecodeMatch",
         "passed": 2, "fails": 8, "total_evaluated": 10},
        {"entry_type": "eval", "probe": "encoding.InjectROT13", "detector": "encoding.DecodeMatch",
         "passed": 4, "fails": 0, "total_evaluated": 4},
    ]]
    per = bench.garak_figures(lines)
    assert per == {"base64": {"attempts": 10, "successes": 8, "asr": 0.8},
                   "rot13": {"attempts": 4, "successes": 0, "asr": 0.0}}


def test_assay_summary_gives_asr_per_strategy() -> None:
    bench = load_bench()
    summary = {"run": {"redteam": {"strategies": {
        "baseline": {"attempts": 24, "judged": 24, "successes": 0, "asr": 0.0},
        "base64": {"attempts": 24, "judged": 24, "successes": 24, "asr": 1.0}}}}}
    per = bench.assay_figures(summary)
    assert per["base64"] == {"attempts": 24, "asr": 1.0, "successes": 24, "judged": 24}
    assert per["baseline"]["asr"] == 0.0


def test_venv_marker_names_the_pinned_requirements(tmp_path: Path) -> None:
    assert not venv.is_ready("garak", tmp_path)
    (tmp_path / "garak").mkdir()
    (tmp_path / "garak" / "assay-peer.txt").write_text("garak==0.0.1\n")
    assert not venv.is_ready("garak", tmp_path)          # another pin: made anew
    (tmp_path / "garak" / "assay-peer.txt").write_text(venv.marker_text("garak"))
    assert venv.is_ready("garak", tmp_path)
    assert venv.venv_bin("garak", "garak", tmp_path) == tmp_path / "garak" / "bin" / "garak"


def test_unknown_peer_is_a_one_line_error(tmp_path: Path) -> None:
    try:
        venv.venv_dir("lm-eval-harness", tmp_path)
    except SystemExit as exc:
        assert "unknown peer 'lm-eval-harness'" in str(exc)
    else:
        raise AssertionError("no error for an unknown peer")
