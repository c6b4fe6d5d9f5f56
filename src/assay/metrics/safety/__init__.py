"""Risk and safety metrics (harm severities, indirect attack, protected material) and the
embedded rules classifier they fall back to when no capable judge is configured."""
