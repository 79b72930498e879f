"""DistributedDataParallel across the machines of a Themis gang (gloo backend).

The runtime starts one rank per GPU of the gang with ``MASTER_ADDR``, ``MASTER_PORT``,
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` set, so
``init_process_group(init_method="env://")`` just works. Every rank restores the same
checkpoint (rank 0 alone writes them) and draws its own batches; DDP averages the
gradients. ``agree`` makes the lease's stop collective: a rank that sees the stop first
keeps stepping until every rank has seen it, so no all-reduce is left waiting.
"""

from __future__ import annotations

import themis

DATA_SEED = 11


def make_data(torch, n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 8, generator=g) * 4 - 2
    y = torch.sin(x[:, :4]).sum(dim=1, keepdim=True)
    return x, y + 0.05 * torch.randn(n, 1, generator=g)


def train(trial: themis.Trial) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", init_method="env://")
    try:
        torch.manual_seed(0)  # the same initial weights on every rank
        x, y = make_data(torch, 4096, DATA_SEED)
        x_val, y_val = make_data(torch, 1024, DATA_SEED + 1)
        model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1))
        saved = trial.restore()
        if saved is not None:
            model.load_state_dict(saved["model"])
        ddp = DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=float(trial.config["lr"]) * 10)
        if saved is not None:
            opt.load_state_dict(saved["opt"])
        sampler = torch.Generator().manual_seed(1000 * (trial.start_step + 1) + trial.rank)
        if trial.rank == 0:
            trial.log(f"DDP over {dist.get_world_size()} ranks from step {trial.start_step}")

        def agree(go_on: bool) -> bool:
            flag = torch.tensor([1 if go_on else 0])
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
            return bool(flag.item())

        def state() -> dict:
            return {
                "model": model.state_dict(),
                "opt": opt.state_dict(),
                "world": dist.get_world_size(),
            }

        for _ in themis.lease(trial, save=state, agree=agree):
            batch = torch.randint(0, len(x), (128,), generator=sampler)
            loss = nn.functional.mse_loss(ddp(x[batch]), y[batch])
            opt.zero_grad()
            loss.backward()  # gradients averaged over the ranks
            opt.step()
            with torch.no_grad():
                trial.report(loss=float(nn.functional.mse_loss(model(x_val), y_val)))
    finally:
        dist.destroy_process_group()
