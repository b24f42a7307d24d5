"""The cluster as data: nodes of GPUs, GPU types, throughputs and the placement policy.

A :class:`ClusterSpec` says how many nodes there are, how many GPUs each holds,
which GPU type each node has, how fast each job type runs on each GPU type
(relative to the reference speed at which a job's length is measured), how
much slower a job runs when it is spread over more nodes than it needs, and
which placement policy (:mod:`evalstop_gym.placement`) puts jobs on nodes.

The flat pool of the paper's world is one node holding every GPU, one GPU
type at speed 1 and no spread penalty (:meth:`ClusterSpec.flat`): every
placement is then trivial and the simulator behaves exactly as without a spec.

Default figures (sources in ``docs/cluster.md``):

* 8 GPUs per node, as in the Acme (A100), ByteDance and Llama 3 (H100)
  clusters; the realistic cluster is 8 nodes x 8 GPUs (:data:`CLUSTER_PRESETS`).
* Spread penalty: throughput of a job spread over more nodes than it needs,
  divided by its consolidated throughput. Gavel's measurements (Narayanan et
  al., OSDI 2020) put language models at a median 0.23 and Transformers at
  0.54; models that communicate little relative to compute (ResNet-50) near
  0.94. Full fine-tuning (RLHF, DPO) moves whole-model gradients: RLHF takes the
  LM figure, DPO the Transformer figure; LoRA all-reduces only adapter weights
  and takes the ResNet-50 figure.
* Two GPU generations: Gavel's single-GPU throughputs give a V100/P100 speedup
  of 0.84-1.84x (median 1.26x) across models. The default matrix puts the
  older type at 0.80 (LoRA), 0.65 (DPO) and 0.55 (RLHF) of the newer one:
  within that range, and different per job type so that a placement that
  reads the matrix has something to gain. They are modelling choices inside
  a measured range, not measurements of these job types.

Every factor is stored as an exact fraction (:func:`fractions.Fraction` of its
decimal text), so progress rates, and the event times computed from them, are
exact integers (see :mod:`evalstop_gym.placement`).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping

from .checks import JOB_TYPES, MAX_GPUS, ConfigError, UsageError, check_range

PLACEMENTS = ("consolidate", "first-fit", "spread")
DEFAULT_TYPE = "gpu"

# throughput of a spread job / the same job consolidated, per job type (see the module docstring)
DEFAULT_SPREAD_PENALTY = {"lora": 0.94, "dpo": 0.54, "rlhf": 0.23}
# the older of two GPU generations, relative to the newer one, per job type
OLDER_GPU_THROUGHPUT = {"lora": 0.80, "dpo": 0.65, "rlhf": 0.55}

_MAX_DENOMINATOR = 10_000  # factors are read to 4 decimals: rates stay small exact fractions


@functools.lru_cache(maxsize=None)
def exact(value: float) -> Fraction:
    """A factor as the exact fraction of its decimal text (0.23 -> 23/100)."""
    return Fraction(repr(float(value))).limit_denominator(_MAX_DENOMINATOR)


@dataclass(frozen=True)
class ClusterSpec:
    """Nodes x GPUs per node, GPU types, throughputs, spread penalty and placement policy.

    ``node_types``: the GPU type of each node (one name per node); empty means
    every node has the type ``"gpu"``. ``throughput``: ``((gpu_type,
    ((job_type, factor), ...)), ...)``, a job type's speed on a GPU type relative
    to the speed its length is measured at (missing entries are 1). A job
    placed on nodes of several types runs at the slowest of them (synchronous
    data-parallel training waits for its slowest worker). ``spread_penalty``:
    ``((job_type, factor), ...)``, the speed factor of a job on more nodes than
    ``ceil(gpus / gpus_per_node)`` (missing entries are 1). ``placement``: one
    of :data:`PLACEMENTS`.
    """

    nodes: int
    gpus_per_node: int
    node_types: tuple[str, ...] = ()
    throughput: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()
    spread_penalty: tuple[tuple[str, float], ...] = ()
    placement: str = "consolidate"
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        check_range("cluster.nodes", self.nodes, 1, 100_000, integer=True)
        check_range("cluster.gpus_per_node", self.gpus_per_node, 1, MAX_GPUS, integer=True)  # a flat pool is one node
        if self.nodes * self.gpus_per_node > MAX_GPUS:
            raise ConfigError("cluster", f"{self.nodes} x {self.gpus_per_node} GPUs",
                              f"must hold at most {MAX_GPUS:,} GPUs in all")
        if self.placement not in PLACEMENTS:
            raise ConfigError("cluster.placement", self.placement, f"must be one of {', '.join(PLACEMENTS)}")
        if self.node_types and len(self.node_types) != self.nodes:
            raise ConfigError("cluster.node_types", len(self.node_types),
                              f"must name one GPU type per node ({self.nodes} nodes), or be empty")
        for t in self.node_types:
            if not isinstance(t, str) or not t:
                raise ConfigError("cluster.node_types", t, "GPU type names must be non-empty strings")
        types = set(self.gpu_types)
        for gpu_type, row in self.throughput:
            if gpu_type not in types:
                raise ConfigError("cluster.throughput", gpu_type,
                                  f"must be a GPU type of some node: {', '.join(sorted(types))}")
            self._check_factors(f"cluster.throughput.{gpu_type}", row, hi=100.0)
        self._check_factors("cluster.spread_penalty", self.spread_penalty, hi=1.0)

    @staticmethod
    def _check_factors(name: str, row, hi: float) -> None:
        for job_type, factor in row:
            if job_type not in JOB_TYPES:
                raise ConfigError(name, job_type, f"job types must be among {', '.join(JOB_TYPES)}")
            check_range(f"{name}.{job_type}", factor, 0.0, hi, lo_open=True)
            if exact(factor) == 0:
                raise ConfigError(f"{name}.{job_type}", factor, "must be >= 0.0001")

    # -- construction ------------------------------------------------------------------
    @classmethod
    def flat(cls, gpus: int) -> "ClusterSpec":
        """The flat pool: one node of ``gpus`` GPUs, one type at speed 1, no penalty."""
        return cls(nodes=1, gpus_per_node=gpus, name="flat")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], name: str = "") -> "ClusterSpec":
        """From plain data (a parsed YAML/JSON file): see ``docs/cluster.md`` for the layout.

        ``nodes`` is either a count (with ``gpus_per_node`` and an optional
        ``gpu_type``) or a list of ``{count, gpu_type}`` groups.
        """
        if not isinstance(d, Mapping):
            raise ConfigError("cluster", type(d).__name__, "must be a mapping of fields")
        known = {"nodes", "gpus_per_node", "gpu_type", "throughput", "spread_penalty", "placement", "name"}
        for k in d:
            if k not in known:
                raise ConfigError(f"cluster.{k}", d[k], f"unknown field; known: {', '.join(sorted(known))}")
        nodes = d.get("nodes", 1)
        if isinstance(nodes, list):
            types: list[str] = []
            for i, g in enumerate(nodes):
                if not isinstance(g, Mapping) or set(g) - {"count", "gpu_type"}:
                    raise ConfigError(f"cluster.nodes[{i}]", g, "must be a mapping with count and gpu_type")
                check_range(f"cluster.nodes[{i}].count", g.get("count"), 1, integer=True)
                types += [str(g.get("gpu_type", DEFAULT_TYPE))] * g["count"]
            n, node_types = len(types), tuple(types)
        else:
            n = nodes
            node_types = (str(d["gpu_type"]),) * n if "gpu_type" in d and isinstance(n, int) else ()
        if "gpus_per_node" not in d:
            raise ConfigError("cluster.gpus_per_node", None, "is required: GPUs in each node")

        def rows(key: str, value: Any) -> tuple:
            if not isinstance(value, Mapping):
                raise ConfigError(key, value, "must map job types to factors")
            return tuple(sorted((str(k), v) for k, v in value.items()))

        tp = d.get("throughput", {})
        if not isinstance(tp, Mapping):
            raise ConfigError("cluster.throughput", tp, "must map GPU types to {job type: factor}")
        return cls(nodes=n, gpus_per_node=d["gpus_per_node"], node_types=node_types,
                   throughput=tuple(sorted((str(t), rows(f"cluster.throughput.{t}", r)) for t, r in tp.items())),
                   spread_penalty=rows("cluster.spread_penalty", d.get("spread_penalty", {})),
                   placement=d.get("placement", "consolidate"), name=str(d.get("name", name)))

    def with_placement(self, placement: str) -> "ClusterSpec":
        return dataclasses.replace(self, placement=placement)

    # -- derived -----------------------------------------------------------------------
    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def types_of_nodes(self) -> tuple[str, ...]:
        return self.node_types or (DEFAULT_TYPE,) * self.nodes

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The distinct GPU types, in order of first appearance."""
        return tuple(dict.fromkeys(self.types_of_nodes))

    def speed(self, gpu_type: str, job_type: str) -> Fraction:
        """Throughput of ``job_type`` on ``gpu_type`` relative to its measured length (exact)."""
        for t, row in self.throughput:
            if t == gpu_type:
                return exact(dict(row).get(job_type, 1.0))
        return Fraction(1)

    def penalty(self, job_type: str) -> Fraction:
        """Speed factor of a spread job of ``job_type`` (exact; 1 = no penalty)."""
        return exact(dict(self.spread_penalty).get(job_type, 1.0))

    def min_nodes(self, gpus: int) -> int:
        """The fewest nodes a job of ``gpus`` GPUs can run on."""
        return -(-gpus // self.gpus_per_node)

    @property
    def trivial(self) -> bool:
        """One node and no throughput matrix: the flat pool, where placement can change nothing.

        (A one-node spec with a matrix of ones runs the node code path, with
        identical results: the tests check that.)
        """
        return self.nodes == 1 and not self.throughput

    def describe(self) -> str:
        groups = {t: self.types_of_nodes.count(t) for t in self.gpu_types}
        kinds = " + ".join(f"{c} x {self.gpus_per_node} {t}" for t, c in groups.items())
        return f"{kinds} ({self.total_gpus} GPUs, {self.placement})"


def uniform(nodes: int, gpus_per_node: int, placement: str = "consolidate",
            spread_penalty: Mapping[str, float] | None = None) -> ClusterSpec:
    """``nodes`` identical nodes with the default spread penalty (or ``spread_penalty``)."""
    pen = DEFAULT_SPREAD_PENALTY if spread_penalty is None else spread_penalty
    return ClusterSpec(nodes=nodes, gpus_per_node=gpus_per_node, spread_penalty=tuple(sorted(pen.items())),
                       placement=placement, name=f"{nodes}x{gpus_per_node}")


def two_types(nodes: int = 8, gpus_per_node: int = 8, placement: str = "consolidate") -> ClusterSpec:
    """Half the nodes of a newer GPU type (``new``, speed 1), half older (``old``)."""
    half = nodes // 2
    return ClusterSpec(nodes=nodes, gpus_per_node=gpus_per_node,
                       node_types=("new",) * (nodes - half) + ("old",) * half,
                       throughput=(("old", tuple(sorted(OLDER_GPU_THROUGHPUT.items()))),),
                       spread_penalty=tuple(sorted(DEFAULT_SPREAD_PENALTY.items())),
                       placement=placement, name=f"{nodes}x{gpus_per_node}-two-types")


CLUSTER_PRESETS = {
    "nodes8": lambda: uniform(8, 8),          # the realistic cluster: 8 nodes x 8 GPUs = 64
    "two-types": lambda: two_types(8, 8),     # the same, half of the nodes an older GPU generation
}


def load_cluster(path_or_name: str) -> ClusterSpec:
    """A preset name (:data:`CLUSTER_PRESETS`) or a YAML/JSON file (``docs/cluster.md``)."""
    if path_or_name in CLUSTER_PRESETS:
        return CLUSTER_PRESETS[path_or_name]()
    p = Path(path_or_name)
    if not p.is_file():
        raise UsageError(f"--cluster {path_or_name}: no such file, and not a preset "
                         f"({', '.join(CLUSTER_PRESETS)})")
    from .files import ConfigFileError, load_json, load_yaml   # bounded, one-line errors naming the file

    data = (load_json if p.suffix.lower() == ".json" else load_yaml)(p, ConfigFileError, "cluster spec")
    return ClusterSpec.from_dict(data, name=p.stem)


def resolve_cluster(cluster: "ClusterSpec | Mapping | str | None", gpus: int) -> ClusterSpec:
    """A spec from what a caller passed: a spec, a dict, a preset name / file, or None / ``"flat"``
    (the flat pool of ``gpus``)."""
    if cluster is None or cluster == "flat":
        return ClusterSpec.flat(gpus)
    if isinstance(cluster, ClusterSpec):
        return cluster
    if isinstance(cluster, str):
        return load_cluster(cluster)
    return ClusterSpec.from_dict(cluster)
