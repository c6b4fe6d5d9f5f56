"""Scale-out engines: the same evaluation scored on a cluster.

``assay.evaluate(..., engine="ray")`` and ``assay eval --engine ray`` score the chunks of a run
on a pool of Ray actors (:mod:`assay.scale.ray_engine`); the plan, the store, the aggregates and
resume stay with the local engine (:class:`assay.engine.run.ChunkRunner`). Importing this
package registers the engine; Ray itself is imported only when a run asks for it. The judge's
limits (concurrency, requests and tokens per minute, a 429's pause) hold for the whole cluster
through one limiter actor (:mod:`assay.scale.limiter`). Ray is an extra: ``pip install 'assay[ray]'``.
"""

from assay.engine.evaluate import register_engine
from assay.scale.ray_engine import make_ray_scorer

register_engine("ray", make_ray_scorer)

__all__ = ["make_ray_scorer"]
