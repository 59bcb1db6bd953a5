"""The toy's observer: two workloads, a tensor and ids per step. TOY_PRISTINE_RAISES makes it raise."""

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
        for step in range(3):
            emit(step, 0, "scaled", scale(x + step))
            emit(step, 0, "ids", ids(x + step))


def make_observer():
    return Observer()
