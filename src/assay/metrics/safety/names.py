"""The harm categories the safety metrics score, in a module of their own so that what only needs
their names (the jailbreak defect rate, loaded for every run's summary) does not compile the
embedded classifier's rules (:mod:`assay.metrics.safety.rules`)."""

HARMS = ("hate_unfairness", "sexual", "violence", "self_harm")
