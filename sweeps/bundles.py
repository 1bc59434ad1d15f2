"""A shard's models on the cluster: inside its slices, or one small task per shard, never a large graph.

When every shard's models pickle to at most :data:`INLINE_BYTES` (a pendulum chain: a few hundred
bytes a model) each slice carries the models of its own cells: nothing to wait for, copy or lose.
Otherwise the distributed path sends each store shard's models once, as the result of a task its
slices depend on (the scheduler recomputes it when the worker holding it dies); up to
:data:`MAX_SHIPPED_BYTES` they travel inside that task. Large ones (an ``lj_sphere`` model of 642
molecules pickles to 3.3 MB, a shard of 8 to 26 MB) would make the task a graph that distributed
warns about ("Sending large graph") and that the scheduler holds in memory: such a shard's models
are built on the worker instead, from the plan's spec (:func:`build_bundle`, the same
``SystemDef.build`` call :func:`geosweep.sweeps.spec.build_models` made in the driver, so the
models and every value computed from them are bitwise the same).
"""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle

from geosweep.sweeps.gc_policy import fewer_collections
from geosweep.sweeps.plan import Plan

#: a shard's models whose pickles together exceed this many bytes are built on the worker (well
#: under distributed's large-graph warning, 10 MB; a shard of 4000 chain models, 0.64 kB each, ships)
MAX_SHIPPED_BYTES = 4 << 20


def model_bytes(plan: Plan) -> int:
    """Pickled bytes of the plan's first model: the size of one model as shipped (one pickle per plan)."""
    return len(cloudpickle.dumps(plan.first_model))


#: a shard's models that pickle to at most this many bytes together travel inside its slices (no
#: model task): a slice then depends on nothing, and the workers take slices in priority order
INLINE_BYTES = 1 << 20


def inline_models(per_model: int, cells_by_shard: dict[Any, list], plan: Plan) -> bool:
    """True when every shard's models (``per_model`` bytes each, :func:`model_bytes`) pickle to at
    most :data:`INLINE_BYTES`: the slices then carry their models themselves."""
    most = max((len(plan.combinations(cells)) for cells in cells_by_shard.values()), default=0)
    return per_model * most <= INLINE_BYTES


def combination_params(plan: Plan, key: tuple[int, ...]) -> dict[str, Any]:
    """The system parameters of the parameter combination ``key`` (:meth:`Grid.combination`)."""
    spec = plan.spec
    swept = spec.swept_params()
    return {**spec.fixed_params(), **{name: values[i] for (name, values), i in zip(swept.items(), key)}}


def build_bundle(plan: Plan, keys: list[tuple[int, ...]]) -> dict[tuple[int, ...], Any]:
    """The models of ``keys``, built here (on a worker) from ``plan``'s spec, as the driver built them."""
    sysdef, spec = plan.sysdef, plan.spec
    return {key: sysdef.build(**spec.system_kwargs(combination_params(plan, key), sysdef)) for key in keys}


class Models:
    """Models in one opaque object: Dask pickles it in one go (a plain dict in a task is walked and
    each model pickled on its own, ~0.15 ms a model: 4 s of driver time for 25 000 seeds), as one
    in-band pickle (Dask's protocol-5 pickling would send each of the models' arrays as a buffer of
    its own: 625 chain models took 56 ms, against 11 ms as one)."""

    __slots__ = ("models",)

    def __init__(self, models: dict[tuple[int, ...], Any]) -> None:
        self.models = models

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        try:
            blob = pickle.dumps(self.models, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, AttributeError, TypeError):  # a plugin's model holding a lambda …
            blob = cloudpickle.dumps(self.models, protocol=pickle.HIGHEST_PROTOCOL)
        return _models_from, (blob,)


def _models_from(blob: bytes) -> Models:
    # many small objects at once: with the collector's default threshold, loading 2 500 chain models on a
    # worker process ran full collections of its heap, 0.10 s instead of 0.02 s (geosweep.sweeps.gc_policy)
    with fewer_collections():
        return Models(pickle.loads(blob))


def unwrap(models: Models | dict[tuple[int, ...], Any]) -> dict[tuple[int, ...], Any]:
    """The model dict of ``models`` (a :class:`Models`, or a bundle task's result)."""
    return models.models if isinstance(models, Models) else models


def _identity(x: Any) -> Any:
    return unwrap(x)


def submit_bundle(client: Any, plan: Plan, bare: Plan, keys: list[tuple[int, ...]], key: str, per_model: int) -> Any:
    """The future of the models ``keys`` of one shard: shipped in a task when they pickle to at most
    :data:`MAX_SHIPPED_BYTES` together (``per_model`` bytes each, :func:`model_bytes`), else built
    on the worker from ``bare`` (the plan without models)."""
    if per_model * len(keys) > MAX_SHIPPED_BYTES:
        return client.submit(build_bundle, bare, keys, key=key, pure=False)
    return client.submit(_identity, Models({k: plan.models[k] for k in keys}), key=key, pure=False)
