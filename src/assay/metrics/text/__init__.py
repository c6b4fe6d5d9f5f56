"""Text-overlap metrics (F1, exact match, BLEU, GLEU, METEOR, ROUGE) and the tokenizers,
sentence splitter, WordNet reader and LCS routines they are computed with."""
