"""LLM judges: a judge declared as data (:mod:`.judge`), its prompt rendered with every evaluated
text delimited (:mod:`.prompt`), and the one way of asking it and reading its answer
(:mod:`.ask`). The metrics register judges (:func:`assay.metrics.judged.register_judge`);
judges sit above the models and below the metrics."""

from assay.judges.ask import (
                              NO_JUDGE,
                              ScoredAnswer,
                              Verdict,
                              answer_prefix,
                              ask,
                              ask_json,
                              ask_many,
                              ask_parsed,
                              ask_score,
                              is_smoke_test,
                              judge_note,
                              merge,
                              prob_from_generation,
                              run_judge,
                              score_from_distribution,
                              scoring_mode,
)
from assay.judges.judge import DEFAULT_MAX_TOKENS, Judge, default_threshold, prompt_of
from assay.judges.parse import (
                              LogprobScore,
                              ParseResult,
                              Scale,
                              parse_score,
                              score_from_logprobs,
                              score_from_token_logprobs,
)
from assay.judges.prompt import (
                              PREAMBLE,
                              PROMPTS_DIR,
                              REMINDER,
                              UNREADABLE,
                              Prompt,
                              answer_format,
                              block,
                              field_text,
                              key_format,
                              load_prompt,
                              neutralise,
                              parse_prompt,
                              reask,
                              render,
                              template_text,
)

__all__ = [
    "DEFAULT_MAX_TOKENS", "LogprobScore", "NO_JUDGE", "ParseResult", "Scale", "parse_score", "score_from_logprobs",
    "score_from_token_logprobs", "PREAMBLE", "PROMPTS_DIR", "REMINDER", "UNREADABLE", "Judge", "Prompt",
    "ScoredAnswer", "Verdict", "answer_format", "answer_prefix", "ask", "ask_json", "ask_many", "ask_parsed", "ask_score", "block",
    "default_threshold", "field_text", "is_smoke_test", "judge_note", "key_format", "load_prompt", "merge",
    "neutralise", "parse_prompt", "prob_from_generation", "prompt_of", "reask", "render", "run_judge",
    "score_from_distribution", "scoring_mode", "template_text",
]
