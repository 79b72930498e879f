"""A PyTorch MLP sweep on a generated regression task, under Themis leases.

The entrypoint of ``app.yaml`` (``train_torch:train``). Needs the optional dependency
``pip install 'themis-scheduler[torch]'``. Uses the GPUs of its lease when CUDA is there
(``CUDA_VISIBLE_DEVICES`` is set by Ray), the CPU otherwise. The checkpoint holds the
model, the optimizer and the data sampler's state, so a resumed trial continues exactly
where its last lease ended.
"""

from __future__ import annotations

import themis

DATA_SEED = 11


def make_data(torch, n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 8, generator=g) * 4 - 2
    y = torch.sin(x[:, :4]).sum(dim=1, keepdim=True) + 0.1 * x[:, 4:].pow(2).sum(
        dim=1, keepdim=True
    )
    return x, y + 0.05 * torch.randn(n, 1, generator=g)


def train(trial: themis.Trial) -> None:
    import torch
    from torch import nn

    device = torch.device("cuda" if torch.cuda.is_available() and trial.gpus else "cpu")
    torch.manual_seed(int(trial.trial_id[1:]))
    x, y = make_data(torch, 4096, DATA_SEED)
    x_val, y_val = make_data(torch, 1024, DATA_SEED + 1)
    x, y, x_val, y_val = (t.to(device) for t in (x, y, x_val, y_val))
    width = int(trial.config["width"])
    model = nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 1)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=float(trial.config["lr"]))
    sampler = torch.Generator().manual_seed(1000 + int(trial.trial_id[1:]))
    saved = trial.restore()
    if saved is not None:
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        sampler.set_state(saved["sampler"])

    def state() -> dict:
        return {
            "model": {k: v.cpu() for k, v in model.state_dict().items()},
            "opt": opt.state_dict(),
            "sampler": sampler.get_state(),
        }

    for _ in themis.lease(trial, save=state):
        batch = torch.randint(0, len(x), (128,), generator=sampler).to(device)
        loss = nn.functional.mse_loss(model(x[batch]), y[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            trial.report(loss=float(nn.functional.mse_loss(model(x_val), y_val)))
