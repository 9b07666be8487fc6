"""kpca's sharded wing: a KHA-family fit whose rows are split into contiguous shards, each keeping its
columns of the solver state, a coordinator exchanging only small messages with them (docs/scaling.md).

It builds on kpca's core (row sources, kernels, the solvers' arithmetic, the pass driver); nothing in
the core imports it. Its modules, from the bottom up:

* `kpca.sharded.messages`: what the coordinator and the shards say to each other, typed (a call of a
  shard method, the `Shards` protocol every placement of the shards answers, the replies);
* `kpca.sharded.kha_step`: the coordinator's half of a stochastic KHA-family step;
* `kpca.sharded.ritz`: both halves of the default fit's Rayleigh-Ritz passes;
* `kpca.sharded.shards`: a `Shard`, the shards in this process (`LocalShards`) and the coordinator's
  `ShardGroup`;
* `kpca.sharded.passes`: the centring pass, the start, and the pass loop over a group.

`workers.shards` places the same `Shard` on dask workers (`ActorShards`, `ActorGroup`).
"""
