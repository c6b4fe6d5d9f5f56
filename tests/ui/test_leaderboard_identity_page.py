"""The dashboard's leaderboard with one model benchmarked by two kinds under two spellings (issue
28, item 4): one row, the run of each kind named beside it, one point on the trade-off chart whose
tooltip names the runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fastapi.testclient import TestClient

from assay.bench.kinds import store_benchmark
from assay.bench.quality.run import QualityConfig, run_quality
from assay.store import open_store
from assay.ui.server import create_app
from tests.helpers.fake_openai_server import FakeOpenAI
from tests.helpers.perfdata import make_run

ARITH = str(Path(__file__).resolve().parents[2] / "examples" / "tasks" / "arithmetic.yaml")


def test_one_row_with_its_runs_and_one_chart_point(tmp_path):
    fake = FakeOpenAI()
    fake.models, fake.default = ["tiny"], {"content": "#### 4"}
    fake.start()
    st = open_store(str(tmp_path / "s.db"))
    try:
        q = asyncio.run(run_quality(QualityConfig(model=f"{fake.base_url}#tiny", tasks=ARITH, limit=2, api="chat"),
                                    store=st))
        s, x = make_run(name="perf tiny", model="tiny", levels=(1,), n=20)
        pref = store_benchmark(st, "perf", s, x)
        client = TestClient(create_app(st), base_url="http://127.0.0.1")
        html = client.get("/bench/leaderboard").text
        table = html.split('<table id="leaderboard">', 1)[1].split("</table>", 1)[0]
        assert table.count("<tr data-model=") == 1 and 'data-model="tiny"' in table
        assert f"quality {q.ref[:8]} · perf {pref[:8]}" in table
        chart = html.split('data-chart="quality-latency"', 1)[1].split("</figure>", 1)[0]
        assert chart.count('<g class="point') == 1 and f"runs: quality {q.ref[:8]}, perf {pref[:8]}" in chart
    finally:
        st.close()
        fake.stop()
