"""Compiled speed-ups for the classic text metrics (optional).

Everything else about the package is in pyproject.toml. The two C extensions below make BLEU,
GLEU, METEOR and ROUGE faster; each is optional: where no C compiler is available the install
still succeeds and the metrics run their pure-Python implementations, which give the same values
(``assay.metrics.text.native`` says which one is in use). ``ASSAY_NATIVE=0`` switches them off
at run time.
"""

from setuptools import Extension, setup

OPTS = ["-O2"]

setup(ext_modules=[
    Extension("assay.metrics.text.ngram_native", ["src/assay/metrics/text/ngram_native.c"],
              extra_compile_args=OPTS, optional=True),
    Extension("assay.metrics.text.tokenize_native", ["src/assay/metrics/text/tokenize_native.c"],
              extra_compile_args=OPTS, optional=True),
])
