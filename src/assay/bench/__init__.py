"""Model benchmarks: serving performance (``perf``) and cost (``cost``). See docs/bench.md."""
