"""The capstone (notebook 10): train a tiny transformer on N ranks, by hand, checked step by step.

* :mod:`labsupport.capstone.model` - the model, the generated data, AdamW.
* :mod:`labsupport.capstone.strategies` - bucketed DDP, ZeRO-1, torch's DDP; bytes of model states.
* :mod:`labsupport.capstone.run` - train, time, count traffic, trace on the ranks.
* :mod:`labsupport.capstone.compare` - train next to the single-process baseline, step by step,
  and find the first step where the two differ.
"""

from labsupport.capstone.compare import compare_steps, first_divergence
from labsupport.capstone.model import (
    Config,
    TinyTransformer,
    baseline,
    entropy_rate,
    global_batch,
    initial_loss,
    local_batch,
    loss_fn,
    make_model,
    make_optimizer,
)
from labsupport.capstone.run import (
    setup,
    time_steps,
    traced_collectives,
    traffic_per_step,
    train,
    train_step,
)
from labsupport.capstone.strategies import (
    STRATEGIES,
    BucketedDDP,
    Strategy,
    TorchDDP,
    ZeRO1,
    broadcast_parameters,
    make_strategy,
    model_states,
)

__all__ = [
    "STRATEGIES",
    "BucketedDDP",
    "Config",
    "Strategy",
    "TinyTransformer",
    "TorchDDP",
    "ZeRO1",
    "baseline",
    "broadcast_parameters",
    "compare_steps",
    "entropy_rate",
    "first_divergence",
    "global_batch",
    "initial_loss",
    "local_batch",
    "loss_fn",
    "make_model",
    "make_optimizer",
    "make_strategy",
    "model_states",
    "setup",
    "time_steps",
    "traced_collectives",
    "traffic_per_step",
    "train",
    "train_step",
]
