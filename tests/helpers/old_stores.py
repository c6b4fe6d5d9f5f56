"""How to make a store look as an older assay wrote it (for the migration tests).

A store is written by this assay with ``Store(path, row_format=1)`` (a score row per metric
output, as version 5 and before wrote every run), then :data:`BEFORE_V6` (SQL) takes away
what version 6 and later added: the full-text index, the runs' row form and index number, the
rows' compact scores and reasons; the spans and traces (version 7); the monitor's scores and
alerts (version 8); the review queues and labels (version 10).
"""

BEFORE_V6 = """
    DROP TABLE IF EXISTS review_labels; DROP TABLE IF EXISTS review_queues;
    DROP TABLE IF EXISTS monitor_alerts; DROP TABLE IF EXISTS monitor_scores;
    DROP TABLE IF EXISTS spans; DROP TABLE IF EXISTS traces;
    DROP TABLE row_text;
    ALTER TABLE runs DROP COLUMN row_format; ALTER TABLE runs DROP COLUMN seq;
    ALTER TABLE rows DROP COLUMN scores; ALTER TABLE rows DROP COLUMN reasons;
    DELETE FROM assay_meta WHERE key = 'text_seq';"""
