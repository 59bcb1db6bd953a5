"""One intra-op thread: the model is tiny, and threads only contend with each other on a shared machine."""

import torch

torch.set_num_threads(1)
