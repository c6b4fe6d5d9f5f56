"""Scale-out on Ray: the same run over many workers, with limits that hold for the whole cluster
(:mod:`assay.scale.limiter`). Ray is an extra: ``pip install 'assay[ray]'``."""
