"""A shard's models on the cluster: one small task per shard, never a large graph.

The distributed path sends each store shard's models once, as the result of a task its slices
depend on (the scheduler recomputes it when the worker holding it dies). Small models (a pendulum
chain: a few hundred bytes) travel inside that task. Large ones (an ``lj_sphere`` model of 642
molecules pickles to 3.3 MB, a shard of 8 to 26 MB) would make the task a graph that distributed
warns about ("Sending large graph") and that the scheduler holds in memory: such a shard's models
are built on the worker instead, from the plan's spec (:func:`build_bundle`, the same
``SystemDef.build`` call :func:`geosweep.sweeps.spec.build_models` made in the driver, so the
models and every value computed from them are bitwise the same).
"""

from __future__ import annotations

from typing import Any

import cloudpickle

from geosweep.sweeps.plan import Plan

#: a shard's models whose pickles together exceed this many bytes are built on the worker (well
#: under distributed's large-graph warning, 10 MB; a shard of 4000 chain models, 0.64 kB each, ships)
MAX_SHIPPED_BYTES = 4 << 20


def model_bytes(plan: Plan) -> int:
    """Pickled bytes of the plan's first model: the size of one model as shipped (one pickle per plan)."""
    return len(cloudpickle.dumps(plan.first_model))


def combination_params(plan: Plan, key: tuple[int, ...]) -> dict[str, Any]:
    """The system parameters of the parameter combination ``key`` (:meth:`Grid.combination`)."""
    spec = plan.spec
    swept = spec.swept_params()
    return {**spec.fixed_params(), **{name: values[i] for (name, values), i in zip(swept.items(), key)}}


def build_bundle(plan: Plan, keys: list[tuple[int, ...]]) -> dict[tuple[int, ...], Any]:
    """The models of ``keys``, built here (on a worker) from ``plan``'s spec, as the driver built them."""
    sysdef, spec = plan.sysdef, plan.spec
    return {key: sysdef.build(**spec.system_kwargs(combination_params(plan, key), sysdef)) for key in keys}


def _identity(x: Any) -> Any:
    return x


def submit_bundle(client: Any, plan: Plan, bare: Plan, keys: list[tuple[int, ...]], key: str, per_model: int) -> Any:
    """The future of the models ``keys`` of one shard: shipped in a task when they pickle to at most
    :data:`MAX_SHIPPED_BYTES` together (``per_model`` bytes each, :func:`model_bytes`), else built
    on the worker from ``bare`` (the plan without models)."""
    if per_model * len(keys) > MAX_SHIPPED_BYTES:
        return client.submit(build_bundle, bare, keys, key=key, pure=False)
    return client.submit(_identity, {k: plan.models[k] for k in keys}, key=key, pure=False)
