"""The toy's observer: two workloads, a tensor and ids per step. TOY_OBSERVER_RAISES makes it raise;
TOY_OBSERVER_UNSEEDED makes it emit a draw nobody seeded (each run differs)."""

import os

import torch

from toy.engine import ids, scale


class Observer:
    workloads = ("ramp", "steps")
    gates = {"scaled": "a gate comparing scale() with its formula"}

    def run(self, workload, emit):
        if os.environ.get("TOY_OBSERVER_RAISES") and workload == "steps":
            raise RuntimeError("the toy observer was told to raise")
        x = torch.linspace(0.0, 1.0, 5) if workload == "ramp" else torch.arange(4.0)
        if os.environ.get("TOY_OBSERVER_UNSEEDED"):
            emit(-1, -1, "unseeded draw", int.from_bytes(os.urandom(4), "little"))
        for step in range(3):
            emit(step, 0, "scaled", scale(x + step))
            emit(step, 0, "ids", ids(x + step))


def make_observer():
    return Observer()
