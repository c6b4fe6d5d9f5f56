"""Model benchmarks, one package per kind — serving performance (``perf``), quality on tasks
(``quality``), embedding models (``embed``) — and what they share: the leaderboard's board
(``board``) and cost (``cost``). See docs/bench.md, docs/quality.md, docs/embed.md, docs/leaderboard.md."""
