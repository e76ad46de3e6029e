"""What ``Cluster(n, network=...)`` and ``%%ranks --network`` need: check, then hand to the ranks.

Everything is checked here, in the kernel, before any rank starts; the ranks
get the network as JSON in $LABSUPPORT_NETWORK and call
:func:`labsupport.runtime.emulator.install_from_env` before joining the group.
"""

from __future__ import annotations

import os

from labsupport.netem.network import ALGO_ENV, NETWORK_ENV, Network, check_algorithm, resolve


def network_env(
    network: Network | str, world_size: int, backend: str, env: dict[str, str]
) -> tuple[Network, str, dict[str, str]]:
    """(the Network, the backend to start, the variables for the ranks), or a clear error.

    The emulation runs over gloo on the CPU, so ``backend`` must be "auto" or
    "gloo". A LAB_ALGO in ``env`` (or the kernel's environment) must name a
    known algorithm when the network does not set one.
    """
    net = resolve(network)
    if net is None:
        raise ValueError("network=None means no emulation; pass a netem.Network or a preset name")
    net.validate(world_size)
    if backend not in ("auto", "gloo"):
        raise ValueError(
            f"an emulated network runs over gloo on the CPU; got backend={backend!r} "
            "(use backend='gloo' or 'auto', or drop network= to use the real devices)."
        )
    algo = env.get(ALGO_ENV) or os.environ.get(ALGO_ENV)
    if net.algorithm is None and algo:
        check_algorithm(algo)
    return net, "gloo", {NETWORK_ENV: net.to_json()}


def preset_or_none(name: str | None) -> Network | None:
    """For ``%%ranks --network NAME``: the preset (a clear error listing presets if unknown)."""
    return None if name is None or name.lower() == "none" else resolve(name)
